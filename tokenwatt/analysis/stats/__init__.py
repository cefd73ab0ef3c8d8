"""Uncertainty and numbers in words: confidence intervals, statistics over repeats, the variance
band, and numbers as the terminal and the pages print them (pure).
"""
