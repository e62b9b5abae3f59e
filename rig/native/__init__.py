"""The rig's C kernels (record format, write engine), loaded with ctypes.

`make setup` builds `libpfr.so` next to this file from the C sources here (Debian gcc, -Wall
-Wextra -Werror); nothing else is needed at run time. Calls through ctypes release the GIL.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import select
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
    build_args: list[Any] = [_u8p, _u32, _u64, _u64, _u64, _u8p, _u64, _u64, _u64, _u64]
    for name in ("pfr_build", "pfr_build32"):
        getattr(handle, name).argtypes = build_args
        getattr(handle, name).restype = None
    handle.pfr_stamp_init.argtypes = [_u8p, _u64, _u32, _u64, _u8p, _u8p]
    handle.pfr_stamp.argtypes = [*build_args, _u8p, _u8p]
    handle.pfr_check.argtypes = [_u8p, _u64, _u8p]
    handle.pfr_check.restype = None
    block_args: list[Any] = [_u8p, _u64, _u32, _u8p, _u8p, _u8p, _u8p, _u64, _u8p, _u64]
    handle.pfr_parse_blocks.argtypes = block_args
    handle.pfr_parse_blocks.restype = None
    handle.pfr_parse_header.argtypes = [_u8p, _u64, _u8p, _u8p]
    handle.pfr_parse_header.restype = None
    _i64, _int, _p = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
    handle.pfr_aio_setup.argtypes = [_u32, _p]
    handle.pfr_aio_setup.restype = _int
    handle.pfr_aio_destroy.argtypes = [_u64]
    handle.pfr_aio_destroy.restype = None
    loop_args: list[Any] = [_u64, _int, _u32, _int, _u32, _u64, _int, _i64, _i64, _p, _u64]
    loop_args += [_p, _p, _u32, _int, _p, _p]  # worker ids, ring, ring size, eventfd, stop, live
    handle.pfr_engine_loop.argtypes = loop_args
    handle.pfr_engine_loop.restype = _int
    handle.pfr_batch_publish.argtypes = [_p]
    handle.pfr_batch_publish.restype = None
    handle.pfr_batch_state.argtypes = [_p]
    handle.pfr_batch_state.restype = ctypes.c_int32
    handle.pfr_rqs_open.argtypes = [_u32, _u64, _p]
    handle.pfr_rqs_open.restype = _int
    handle.pfr_rqs_add.argtypes = [_p, _int, _u64, _p, _p, _p, _p, _i64, _p, _p]
    handle.pfr_rqs_add.restype = _i64
    rqs = [("wait", [_p, _u64]), ("wait_span", [_p, _u64, _u64]), ("retire", [_p, _u64])]
    for name, args in [*rqs, ("settled", [_p])]:
        getattr(handle, f"pfr_rqs_{name}").argtypes = args
        getattr(handle, f"pfr_rqs_{name}").restype = _i64
    handle.pfr_rqs_stats.argtypes = [_p, _p, _p]
    handle.pfr_rqs_stats.restype = None
    for name in ("pfr_rqs_resume", "pfr_rqs_abandon"):
        getattr(handle, name).argtypes = [_p]
        getattr(handle, name).restype = None
    handle.pfr_trigger_fire.argtypes = [_p, _i64]
    handle.pfr_trigger_fire.restype = None
    handle.pfr_trigger_at.argtypes = [_p]
    handle.pfr_trigger_at.restype = _i64
    handle.pfr_complete_at.argtypes = [_i64, _p]
    handle.pfr_complete_at.restype = _i64
    handle.pfr_arrive.argtypes = [_p, _i64, _p]
    handle.pfr_arrive.restype = _i64
    handle.pfr_arrive_join.argtypes = [_u64]
    handle.pfr_arrive_join.restype = None
    return handle


@dataclass(frozen=True)
class EngineResult:
    """One retired batch, per planned entry: the slot that ran it, issue ns (-2 = never
    submitted), completion ns (-1 = never), errno; plus the engine's timed flushes logged with it.
    `stuck`: requests were still in flight at the drain timeout (they are marked ETIMEDOUT; their
    buffers must never be reused). `seconds`: from its first submission to its retirement."""

    slot_of: npt.NDArray[np.int16]
    issue_ns: npt.NDArray[np.int64]
    complete_ns: npt.NDArray[np.int64]
    status: npt.NDArray[np.int32]
    timer_issue_ns: npt.NDArray[np.int64]
    timer_complete_ns: npt.NDArray[np.int64]
    timer_status: npt.NDArray[np.int32]
    stuck: bool
    seconds: float


_BATCH_RETIRED = 3  # PFR_BATCH_RETIRED


_POINTERS = (  # the plan's columns, then the results', in struct pfr_batch order
    "slot_start",
    "kind",
    "lba",
    "nblocks",
    "gen_offset",
    "gens",
    "op_seq",
    "slot_of",
    "issue_ns",
    "complete_ns",
    "status",
    "t_issue",
    "t_complete",
    "t_status",
)


class _Batch(ctypes.Structure):
    """struct pfr_batch (pfr.h)."""

    _fields_ = [(name, ctypes.c_void_p) for name in _POINTERS] + [
        ("t_cap", ctypes.c_uint64),
        ("t_count", ctypes.c_uint64),
        ("seq", ctypes.c_uint64),
        ("nslots_planned", ctypes.c_uint64),
        ("started_ns", ctypes.c_int64),
        ("retired_ns", ctypes.c_int64),
        ("inflight", ctypes.c_int64),
        ("state", ctypes.c_int32),
        ("stuck", ctypes.c_int32),
    ]


class BatchRing:
    """The write engine's ring of planned batches: one thread publishes batches in order (seq 0,
    1, ...) and collects them once retired, while the engine (`engine_loop`, in another thread)
    runs them back to back. Batch q goes into descriptor q % size, free again once batch
    q - size is collected. The arrays of a published batch are kept alive here until collected."""

    def __init__(self, size: int, timer_capacity: int) -> None:
        self.size = size
        self.timer_capacity = timer_capacity
        self.descriptors = (_Batch * size)()
        self._arrays: list[list[npt.NDArray[Any]]] = [[] for _ in range(size)]
        self.published = 0  # batches published so far (the next seq)
        self.collected = 0  # batches collected so far
        self.notify = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)  # the engine: "retired"

    def close(self) -> None:
        os.close(self.notify)

    def has_room(self) -> bool:
        return self.published - self.collected < self.size

    def publish(
        self,
        slot_start: npt.NDArray[np.int64],
        kind: npt.NDArray[np.uint8],
        lba: npt.NDArray[np.int64],
        nblocks: npt.NDArray[np.uint32],
        gen_offset: npt.NDArray[np.int64],
        gens: npt.NDArray[np.uint32],
        op_seq: npt.NDArray[np.uint64],
    ) -> None:
        """The next batch (see engine.c for the layout of a plan)."""
        if not self.has_room():
            raise RuntimeError("engine ring full: collect a retired batch first")
        n = int(slot_start[-1])
        plan: list[npt.NDArray[Any]] = [np.ascontiguousarray(slot_start, dtype=np.int64)]
        plan += [np.ascontiguousarray(kind, dtype=np.uint8)]
        plan += [np.ascontiguousarray(lba, dtype=np.int64)]
        plan += [np.ascontiguousarray(nblocks, dtype=np.uint32)]
        plan += [np.ascontiguousarray(gen_offset, dtype=np.int64)]
        plan += [np.ascontiguousarray(gens, dtype=np.uint32)]
        plan += [np.ascontiguousarray(op_seq, dtype=np.uint64)]
        if any(len(a) != n for a in plan[1:5] + plan[6:]):
            raise ValueError("plan columns differ in length")
        results: list[npt.NDArray[Any]] = [np.empty(n, np.int16), np.empty(n, np.int64)]
        results += [np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int32)]
        cap = self.timer_capacity
        results += [np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)]
        results += [np.empty(cap, dtype=np.int32)]
        index = self.published % self.size
        d = self.descriptors[index]
        for name, array in zip(_POINTERS, plan + results, strict=True):
            setattr(d, name, array.ctypes.data)
        d.t_cap, d.t_count, d.seq = cap, 0, self.published
        d.nslots_planned = len(slot_start) - 1
        self._arrays[index] = plan + results
        lib().pfr_batch_publish(ctypes.byref(d))
        self.published += 1

    def collect(self) -> EngineResult | None:
        """The results of the oldest batch not collected yet, once the engine retired it."""
        if self.collected == self.published:
            return None
        index = self.collected % self.size
        d = self.descriptors[index]
        if lib().pfr_batch_state(ctypes.byref(d)) != _BATCH_RETIRED:
            return None
        slot_of, issue, complete, status, t_issue, t_complete, t_status = self._arrays[index][7:]
        t = int(d.t_count)
        seconds = (d.retired_ns - d.started_ns) / 1e9 if d.started_ns else 0.0
        result = EngineResult(
            slot_of,
            issue,
            complete,
            status,
            t_issue[:t],
            t_complete[:t],
            t_status[:t],
            bool(d.stuck),
            seconds,
        )
        self.collected += 1
        return result

    def wait(self, timeout_s: float) -> None:
        """Until the engine retires a batch (or `wake` is called), at most `timeout_s`."""
        ready, _, _ = select.select([self.notify], [], [], timeout_s)
        if ready:
            with contextlib.suppress(BlockingIOError):  # another reader took it
                os.eventfd_read(self.notify)

    def wake(self) -> None:
        os.eventfd_write(self.notify, 1)


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


def engine_loop(
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
    worker: npt.NDArray[np.uint16],
    ring: BatchRing,
    stop: ctypes.c_int,
    live: ctypes.Array[ctypes.c_int64],
) -> bool:
    """Runs the batches published in `ring` until `stop` is set or every slot failed (engine.c,
    pfr_engine_loop); True if requests were still in flight at the drain timeout ("stuck").
    Slot s writes as `worker[s]`; `slot_of` in each result is the slot index."""
    worker = np.ascontiguousarray(worker, dtype=np.uint16)
    if len(worker) != nslots:
        raise ValueError("one worker id per slot")
    if len(buffers) < nslots * slot_bytes:
        raise ValueError("engine buffers too small")
    rc = lib().pfr_engine_loop(
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
        worker.ctypes.data,
        ring.descriptors,
        ring.size,
        ring.notify,
        ctypes.byref(stop),
        live,
    )
    if rc < 0:
        raise OSError(-rc, f"write engine: {os.strerror(-rc)}")
    return rc == 1
