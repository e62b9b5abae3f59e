"""Endurance: sustained writes in measured intervals (`endurance`), SNIA PTS steady state and
purge (`pts`, `pts_flow`)."""
