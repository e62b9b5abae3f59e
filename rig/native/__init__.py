"""The rig's C kernels (record format, write engine), loaded with ctypes.

`make setup` builds `libpfr.so` next to this file from the C sources here (Debian gcc, -Wall
-Wextra -Werror); nothing else is needed at run time. Calls through ctypes release the GIL.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

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
    handle.pfr_parse.argtypes = [_u8p, _u64, _u8p, _u8p, _u8p, _u8p, _u8p, _u8p]
    handle.pfr_parse.restype = None
    handle.pfr_parse_header.argtypes = [_u8p, _u64, _u8p, _u8p]
    handle.pfr_parse_header.restype = None
    _i64, _int, _p = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
    handle.pfr_aio_setup.argtypes = [_u32, _p]
    handle.pfr_aio_setup.restype = _int
    handle.pfr_aio_destroy.argtypes = [_u64]
    handle.pfr_aio_destroy.restype = None
    engine_args: list[Any] = [_u64, _int, _u32, _int, _u32, _u64, _int, _i64, _i64, _p, _u64]
    engine_args += [_p] * 9  # slot_start kind lba nblocks gen_offset gens op_seq worker slot_of
    engine_args += [_p] * 6  # issue, complete, status, timer issue, complete, status
    engine_args += [_u64, _p, _p, _p]  # timer capacity, timer count, stop flag, live signals
    handle.pfr_engine_run.argtypes = engine_args
    handle.pfr_engine_run.restype = _int
    handle.pfr_readq_setup.argtypes = [_u32, _p]
    handle.pfr_readq_setup.restype = _int
    handle.pfr_readq_destroy.argtypes = [_u64]
    handle.pfr_readq_destroy.restype = None
    handle.pfr_readq_run.argtypes = [_u64, _int, _u32, _u64, _p, _p, _p, _p, _i64, _p, _p]
    handle.pfr_readq_run.restype = _i64
    return handle


@dataclass(frozen=True)
class EngineResult:
    """Per planned entry: issue ns (-2 = never submitted), completion ns (-1 = never), errno;
    plus the engine's timed flushes. `stuck`: requests were still in flight at the drain
    timeout (they are marked ETIMEDOUT; their buffers must never be reused)."""

    slot_of: npt.NDArray[np.int16]
    issue_ns: npt.NDArray[np.int64]
    complete_ns: npt.NDArray[np.int64]
    status: npt.NDArray[np.int32]
    timer_issue_ns: npt.NDArray[np.int64]
    timer_complete_ns: npt.NDArray[np.int64]
    timer_status: npt.NDArray[np.int32]
    stuck: bool


class AioContext:
    """A Linux AIO context for the write engine, kept for a whole writer (not per batch)."""

    def __init__(self, depth: int) -> None:
        handle = ctypes.c_uint64(0)
        rc = lib().pfr_aio_setup(depth, ctypes.byref(handle))
        if rc < 0:
            raise OSError(-rc, f"io_setup({depth}): {os.strerror(-rc)}")
        self.handle = handle.value

    def close(self) -> None:
        if self.handle:
            lib().pfr_aio_destroy(self.handle)
            self.handle = 0


def engine_run(
    aio: AioContext,
    fd: int,
    nslots: int,
    shared: bool,
    block_size: int,
    campaign: int,
    durable: bool,
    flush_every_ns: int,
    drain_timeout_ns: int,
    buffers: npt.NDArray[np.uint8],
    slot_bytes: int,
    slot_start: npt.NDArray[np.int64],
    kind: npt.NDArray[np.uint8],
    lba: npt.NDArray[np.int64],
    nblocks: npt.NDArray[np.uint32],
    gen_offset: npt.NDArray[np.int64],
    gens: npt.NDArray[np.uint32],
    op_seq: npt.NDArray[np.uint64],
    worker: npt.NDArray[np.uint16],
    stop: ctypes.c_int,
    timer_capacity: int,
    live: ctypes.Array[ctypes.c_int64],
) -> EngineResult:
    """One batch of the write engine (engine.c). Stripes: slot s runs entries slot_start[s] ..
    slot_start[s+1]-1. Shared (stream layout): `nslots` slots take entries 0 .. slot_start[1]-1
    in order. Slot s writes as `worker[s]`; `slot_of` in the result is the slot index."""
    if len(slot_start) != (2 if shared else nslots + 1):
        raise ValueError("slot_start does not match the layout")
    n = int(slot_start[-1])
    arrays = [np.ascontiguousarray(a) for a in (slot_start, kind, lba, nblocks, gen_offset)]
    arrays += [np.ascontiguousarray(gens, dtype=np.uint32), np.ascontiguousarray(op_seq)]
    arrays += [np.ascontiguousarray(worker, dtype=np.uint16)]
    if len(worker) != nslots:
        raise ValueError("one worker id per slot")
    if len(buffers) < nslots * slot_bytes:
        raise ValueError("engine buffers too small")
    slot_of = np.empty(n, dtype=np.int16)
    issue = np.empty(n, dtype=np.int64)
    complete = np.empty(n, dtype=np.int64)
    status = np.empty(n, dtype=np.int32)
    t_issue = np.empty(timer_capacity, dtype=np.int64)
    t_complete = np.empty(timer_capacity, dtype=np.int64)
    t_status = np.empty(timer_capacity, dtype=np.int32)
    t_count = ctypes.c_uint64(0)
    rc = lib().pfr_engine_run(
        aio.handle,
        fd,
        nslots,
        int(shared),
        block_size,
        campaign,
        int(durable),
        flush_every_ns,
        drain_timeout_ns,
        buffers.ctypes.data,
        slot_bytes,
        *[a.ctypes.data for a in arrays],
        slot_of.ctypes.data,
        issue.ctypes.data,
        complete.ctypes.data,
        status.ctypes.data,
        t_issue.ctypes.data,
        t_complete.ctypes.data,
        t_status.ctypes.data,
        timer_capacity,
        ctypes.byref(t_count),
        ctypes.byref(stop),
        live,
    )
    if rc < 0:
        raise OSError(-rc, f"write engine: {os.strerror(-rc)}")
    t = t_count.value
    return EngineResult(
        slot_of, issue, complete, status, t_issue[:t], t_complete[:t], t_status[:t], rc == 1
    )
