"""Station kinds, one module each: its [station] keys (a `StationSpec` subclass and the function
that reads and checks them) and its constructor. They are listed in rig/backends.py."""
