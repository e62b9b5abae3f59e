"""Host software of the SSD power-fault rig."""

__version__ = "0.1.0"
