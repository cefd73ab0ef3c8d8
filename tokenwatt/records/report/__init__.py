"""Report records, versions 1 to 3, and the replication record."""
