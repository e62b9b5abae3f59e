"""A drive's verdict: the rule, its statistics and the sequential plans."""
