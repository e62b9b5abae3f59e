"""The rig's C kernels (record format, write engine), loaded with ctypes.

`make setup` builds `libpfr.so` next to this file from the C sources here (Debian gcc, -Wall
-Wextra -Werror); nothing else is needed at run time. Calls through ctypes release the GIL.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from rig.errors import RigError

LIBRARY = Path(__file__).with_name("libpfr.so")

_u8p = ctypes.c_void_p
_u64 = ctypes.c_uint64
_u32 = ctypes.c_uint32


@functools.cache
def lib() -> ctypes.CDLL:
    """The loaded library with its prototypes declared."""
    try:
        handle = ctypes.CDLL(str(LIBRARY))
    except OSError as error:
        raise RigError(f"native kernels missing ({LIBRARY.name}): run 'make setup'") from error
    build_args = [_u8p, _u32, _u64, _u64, _u64, _u8p, _u64, _u64, _u64, _u64]
    for name in ("pfr_build", "pfr_build32"):
        getattr(handle, name).argtypes = build_args
        getattr(handle, name).restype = None
    handle.pfr_check.argtypes = [_u8p, _u64, _u8p]
    handle.pfr_check.restype = None
    return handle
