"""Error types shared across layers.

`RigError` and its subclasses are faults of the rig itself (or of its input); they end a cycle as
ERROR and are never counted as a drive failure. `UserError` is bad input: the CLI prints its message
as one line and exits non-zero.
"""


class RigError(Exception):
    """A fault of the rig (serial timeout, host error, power that did not go off)."""


class UserError(RigError):
    """Bad input: a malformed campaign, an unknown drive, an unsafe device."""


class UnsafeDeviceError(UserError):
    """An interlock refused a device."""


class PowerError(RigError):
    """The power switch did not do what it was asked."""


class PowerTimeoutError(PowerError):
    """The power switch did not answer in time."""


class ProtocolMismatchError(PowerError):
    """The relay board speaks another protocol version."""


class ChannelLostError(PowerError):
    """The switch lost control of the channel (its relay board lost or restarted): the cycle is a
    rig ERROR and the channel stops; other boards' channels go on (docs/campaign.md, "Several
    relay boards")."""
