"""Media and I/O: the on-media record format, O_DIRECT block targets, discard, the writer."""
