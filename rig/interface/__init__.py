"""The interfaces at the top: the `rig` command, its --json documents, the demo and the fleet."""
