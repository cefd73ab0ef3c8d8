"""The build's files and checks: the docs folder written beside and swapped in, the page cache,
the assets the site ships, and the archive's checks around its reports.
"""
