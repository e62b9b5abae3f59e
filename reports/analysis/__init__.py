"""From a dataset to the figures a report states (pure, no I/O)."""
