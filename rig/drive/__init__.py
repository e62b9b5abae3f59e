"""A drive as the rig names it: its node on the bus and its identity."""
