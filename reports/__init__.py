"""Reports built from the SQLite store only."""
