"""Power and energy: a window's power figures, their plausibility and cross-checks, tokens per
joule, and cost and energy per million tokens (pure).
"""
