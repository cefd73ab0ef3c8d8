"""From run records to a report and its rows: the summary, every derived number recomputed, the
setup tables, the terminal's tables and warnings, why a run cannot go into a report, capacity,
the archive across notes and replications (pure).
"""
