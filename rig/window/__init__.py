"""The window of vulnerability: where the next cut goes (design) and what the cuts say (fit)."""
