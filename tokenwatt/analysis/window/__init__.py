"""One measurement window and the SLO search over windows: latency percentiles, goodput and the
SLO verdict, the checks that a window's figures stand for its rate, failed requests and why a
window missed, how sure a verdict is, and the search's windows and story (pure).
"""
