"""Vega-Lite charts of a report page, made with Altair: the bar charts, latency against load, the
SLO search's probes, and off-scale values on a log axis.
"""
