"""Reading records and session files from disk, with one problem per thing wrong, and the
JSON Schema export of every record model.
"""
