"""The site's pages and their sections: a report page (tables, conclusion, the configuration
comparison, setup, the SLO search, the Reproduce section, cloud cost, replications), the
frontier page, the spec reference and the Jinja2 side that renders them.
"""
