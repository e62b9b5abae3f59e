"""Drive discovery and presence on the host bus, by identity (never by /dev name)."""

from rig.bus.base import DriveNode, Presence, PresenceWatch

__all__ = ["DriveNode", "Presence", "PresenceWatch"]
