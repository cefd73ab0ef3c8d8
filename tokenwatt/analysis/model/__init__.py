"""The model's shape and the memory it moves: geometry and parameter counts, MBU, KV-cache
bytes and capacity, and what ``tokenwatt model-info`` reports (pure).
"""
