"""Drive discovery and presence on the host bus, by identity (never by /dev name)."""

from rig.drive.node import DriveNode, Presence, PresenceWatch

__all__ = ["DriveNode", "Presence", "PresenceWatch"]
