"""Record text and numbers as page text: escaping, number formatting, confidence intervals beside
a headline number, and a window's figures as a page names them.
"""
