"""Reading campaign files: typed TOML tables, station keys, the sections assembled, criteria."""
