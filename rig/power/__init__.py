"""Power switching: the `PowerSwitch` capability and its backends (one small module each)."""

from rig.power.base import Edge, PendingCut, PowerSwitch

__all__ = ["Edge", "PendingCut", "PowerSwitch"]
