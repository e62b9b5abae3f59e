"""On-media record format: a self-checking header in every 512-byte sector (docs/architecture.md,
"The on-media record format"; docs/record-format.md).

A sector is 64 little-endian 64-bit words:

    word 0   magic (u32) | format version (u16) << 32 | sector index within its block (u16) << 48
    word 1   campaign id
    word 2   LBA the block was written for (in logical blocks)
    word 3   write generation of that LBA (per-LBA sequence, never reused)
    word 4   first LBA of the write that carried this block
    word 5   length of that write in blocks (u32) | worker id (u16) << 32 | flags (u16) << 48
    word 6   the worker's operation count
    word 7   host timestamp (monotonic ns) when the write was issued
    word 8   checksum of the other 63 words
    9..63    payload: pseudo-random words derived from words 0..7 (incompressible, regenerable)

Version 1 derives every payload word from the whole header (two splitmix64 rounds a word). Version
2, which the native write engine writes, derives it from the sector's place in its write (campaign,
LBA - first LBA, sector index) XORed with one word of the whole header, and its checksum covers
the header and the payload's XOR fold: a writer prepares the bases once and stamps each write's
headers, that word and the checksums at submission. The checker reads both.

Generation and checking run in C (`rig/native/media.c`, about 1-2 GB/s per core); the numpy
functions `reference_build` and `reference_state` are the readable definition of the format and
the tests hold the C kernel to them byte for byte. `docs/record-format.md` has a hex dump.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rig.native import lib

SECTOR = 512
WORDS = SECTOR // 8
HEADER_WORDS = 8
CHECKSUM_WORD = 8
PAYLOAD_START = 9
MAGIC = 0x47524650  # "PFRG" read as little-endian bytes
VERSION = 1
VERSION2 = 2  # payload = base of the sector's place ^ mix(header sum); see the module docstring

FLAG_FUA = 1  # the write was issued with RWF_DSYNC / FUA

U64 = npt.NDArray[np.uint64]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
# Per-word tweaks so that swapping two words changes the checksum.
_WORD_TWEAK = (np.arange(1, WORDS + 1, dtype=np.uint64) * _GOLDEN).astype(np.uint64)
_PAYLOAD_TWEAK = _WORD_TWEAK[PAYLOAD_START:]
_CHECKED = np.array([w for w in range(WORDS) if w != CHECKSUM_WORD])


def _mix(x: U64) -> U64:
    """splitmix64 finaliser, in place on a fresh array: a bijection with full avalanche."""
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _payload(header: U64) -> U64:
    """Payload words (n, 55) regenerated from header words (n, 8)."""
    seed = _mix(header + _WORD_TWEAK[:HEADER_WORDS]).sum(axis=1, dtype=np.uint64)
    return _mix(seed[:, None] + _PAYLOAD_TWEAK[None, :])


def _checksum(words: U64) -> U64:
    """Checksum (n,) of sectors (n, 64), ignoring the checksum word itself."""
    tweaked = words[:, _CHECKED] + _WORD_TWEAK[None, : WORDS - 1]
    return _mix(_mix(tweaked).sum(axis=1, dtype=np.uint64))


def _header_sum(header: U64) -> U64:
    """Sum (n,) of the header words' terms: v1's payload seed, v2's H."""
    return _mix(header + _WORD_TWEAK[:HEADER_WORDS]).sum(axis=1, dtype=np.uint64)


def _v2_base(header: U64) -> U64:
    """Version 2's payload base (n, 55): from the campaign, the offset of the sector's block in
    its write (LBA - first LBA) and its sector index, nothing else of the header."""
    offset = header[:, 2] - header[:, 4]
    seed = (
        _mix(header[:, 1] + _WORD_TWEAK[1])
        + _mix(offset + _WORD_TWEAK[2])
        + _mix((header[:, 0] >> np.uint64(48)) + _WORD_TWEAK[0])
    )
    return _mix(seed[:, None] + _PAYLOAD_TWEAK[None, :])


def _v2_checksum(header_sum: U64, payload: U64) -> U64:
    fold = np.bitwise_xor.reduce(payload, axis=1)
    return _mix(header_sum + _mix(fold + _WORD_TWEAK[CHECKSUM_WORD]))


def _v2_payload(header: U64) -> tuple[U64, U64]:
    """Version 2's payload (n, 55) and checksum (n,) from header words (n, 8)."""
    h = _header_sum(header)
    payload = _v2_base(header) ^ _mix(h.copy())[:, None]
    return payload, _v2_checksum(h, payload)


@dataclass(frozen=True)
class WriteRecord:
    """What the header of every sector of one write says (per block: lba and generation)."""

    campaign: int
    first_lba: int
    generations: npt.NDArray[np.uint64]  # one per block of the write
    worker: int
    op_seq: int
    issued_ns: int
    flags: int = 0


def build(record: WriteRecord, block_size: int, version: int = VERSION) -> npt.NDArray[np.uint8]:
    """Bytes of a whole write: len(generations) blocks, each `block_size` bytes (C kernel)."""
    nblocks = len(record.generations)
    out = aligned_buffer(nblocks * block_size)  # O_DIRECT needs an aligned buffer
    if version == VERSION2:
        Stamper(out, block_size, record.campaign).stamp(record)
    else:
        build_into(out, record, block_size)
    return out


class Stamper:
    """Version 2 the way the write engine makes it: `buffer` prepared once with the payload bases
    of its sectors' places, then stamped in place, write after write (C kernel)."""

    def __init__(self, buffer: npt.NDArray[np.uint8], block_size: int, campaign: int) -> None:
        if len(buffer) % block_size or not buffer.flags.c_contiguous:
            raise ValueError("stamp buffer not whole blocks or not contiguous")
        self.buffer, self.per_block, self.campaign = buffer, block_size // SECTOR, campaign
        sectors = len(buffer) // SECTOR
        self._fold = np.empty(sectors, dtype=np.uint64)
        self._k = np.empty(sectors, dtype=np.uint64)
        lib().pfr_stamp_init(
            buffer.ctypes.data, sectors, self.per_block, campaign,
            self._fold.ctypes.data, self._k.ctypes.data,
        )  # fmt: skip

    def stamp(self, record: WriteRecord) -> None:
        gens = np.ascontiguousarray(record.generations, dtype=np.uint64)
        too_long = len(gens) * self.per_block * SECTOR > len(self.buffer)
        if too_long or record.campaign != self.campaign:
            raise ValueError("record larger than the stamp buffer, or of another campaign")
        lib().pfr_stamp(
            self.buffer.ctypes.data, self.per_block, len(gens), record.campaign,
            record.first_lba, gens.ctypes.data, record.worker, record.op_seq,
            record.issued_ns, record.flags, self._fold.ctypes.data, self._k.ctypes.data,
        )  # fmt: skip


def build_into(out: npt.NDArray[np.uint8], record: WriteRecord, block_size: int) -> None:
    """Write the record's bytes into `out` (at least len(generations) * block_size bytes)."""
    gens = np.ascontiguousarray(record.generations, dtype=np.uint64)
    if len(out) < len(gens) * block_size or not out.flags.c_contiguous:
        raise ValueError("output buffer too small or not contiguous")
    lib().pfr_build(
        out.ctypes.data,
        block_size // SECTOR,
        len(gens),
        record.campaign,
        record.first_lba,
        gens.ctypes.data,
        record.worker,
        record.op_seq,
        record.issued_ns,
        record.flags,
    )


def reference_build(
    record: WriteRecord, block_size: int, version: int = VERSION
) -> npt.NDArray[np.uint8]:
    """The numpy definition of `build` (slow; the tests compare the C kernel with it)."""
    nblocks = len(record.generations)
    per_block = block_size // SECTOR
    n = nblocks * per_block
    block_index = np.repeat(np.arange(nblocks, dtype=np.uint64), per_block)
    sector_index = np.tile(np.arange(per_block, dtype=np.uint64), nblocks)
    out = aligned_buffer(n * SECTOR)  # O_DIRECT needs an aligned buffer
    words = out.view(np.uint64).reshape(n, WORDS)
    words[:, 0] = np.uint64(MAGIC | (version << 32)) | (sector_index << np.uint64(48))
    words[:, 1] = record.campaign
    words[:, 2] = np.uint64(record.first_lba) + block_index
    words[:, 3] = np.repeat(record.generations.astype(np.uint64), per_block)
    words[:, 4] = record.first_lba
    words[:, 5] = nblocks | (record.worker << 32) | (record.flags << 48)
    words[:, 6] = record.op_seq
    words[:, 7] = record.issued_ns
    if version == VERSION2:
        words[:, PAYLOAD_START:], words[:, CHECKSUM_WORD] = _v2_payload(words[:, :HEADER_WORDS])
        return out
    words[:, PAYLOAD_START:] = _payload(words[:, :HEADER_WORDS])
    words[:, CHECKSUM_WORD] = _checksum(words)
    return out


# Sector states returned by `parse`.
VALID = 0
ZERO = 1  # all zero bytes: never written, trimmed or unmapped
CORRUPT = 2  # anything else: bad magic, bad checksum, payload not regenerable


@dataclass(frozen=True)
class Sectors:
    """Decoded sectors, one entry per 512-byte sector, as columnar arrays."""

    state: npt.NDArray[np.uint8]
    sector_index: npt.NDArray[np.uint64]
    campaign: U64
    lba: U64
    generation: U64
    first_lba: U64
    nblocks: U64
    worker: U64
    op_seq: U64
    issued_ns: U64

    def __len__(self) -> int:
        return len(self.state)


Data = npt.NDArray[np.uint8] | U64 | bytes | memoryview


def _words(data: Data) -> U64:
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    return np.ascontiguousarray(raw).view(np.uint64).reshape(-1, WORDS)


def check_state(data: Data) -> npt.NDArray[np.uint8]:
    """VALID / ZERO / CORRUPT per sector of `data` (C kernel)."""
    words = _words(data)
    state = np.empty(len(words), dtype=np.uint8)
    lib().pfr_check(words.ctypes.data, len(words), state.ctypes.data)
    return state


def reference_state(data: Data) -> npt.NDArray[np.uint8]:
    """The numpy definition of `check_state`."""
    words = _words(data)
    head = words[:, 0] & np.uint64(0xFFFFFFFFFFFF)
    magic_ok = head == np.uint64(MAGIC | (VERSION << 32))
    zero = ~words.any(axis=1)
    valid = magic_ok & (words[:, CHECKSUM_WORD] == _checksum(words))
    if valid.any():
        # The checksum covers the payload; regenerating it as well rules out a header that was
        # rewritten consistently over someone else's payload (a misdirected partial write).
        idx = np.flatnonzero(valid)
        payload_ok = (words[idx, PAYLOAD_START:] == _payload(words[idx, :HEADER_WORDS])).all(axis=1)
        valid[idx[~payload_ok]] = False
    v2 = np.flatnonzero(head == np.uint64(MAGIC | (VERSION2 << 32)))
    if len(v2):  # the payload regenerated from its place and k, the checksum over both
        payload, checksum = _v2_payload(words[v2, :HEADER_WORDS])
        stored = words[v2, PAYLOAD_START:]
        ok = (stored == payload).all(axis=1) & (words[v2, CHECKSUM_WORD] == checksum)
        valid[v2[ok]] = True
    state = np.full(len(words), CORRUPT, dtype=np.uint8)
    state[zero] = ZERO
    state[valid] = VALID
    return state


def parse(data: Data) -> Sectors:
    """Decode and check every sector of `data` (a multiple of 512 bytes) in bulk (one C pass:
    the check and the header words as columns, no strided copy)."""
    words = _words(data)
    state = np.empty(len(words), dtype=np.uint8)
    header = np.empty((HEADER_WORDS, len(words)), dtype=np.uint64)  # rows are the header fields
    lib().pfr_parse_header(words.ctypes.data, len(words), state.ctypes.data, header.ctypes.data)
    w5 = header[5]
    return Sectors(
        state=state,
        sector_index=header[0] >> np.uint64(48),
        campaign=header[1],
        lba=header[2],
        generation=header[3],
        first_lba=header[4],
        nblocks=w5 & np.uint64(0xFFFFFFFF),
        worker=(w5 >> np.uint64(32)) & np.uint64(0xFFFF),
        op_seq=header[6],
        issued_ns=header[7],
    )


# Header fields of `parse_blocks_into`'s `head` and `fields` rows, in order.
BLOCK_FIELDS = ("campaign", "lba", "generation", "op_seq", "worker")


@dataclass(frozen=True)
class BlockColumns:
    """Where `parse_blocks_into` writes, for n blocks of `per_block` sectors. Per sector: `state`
    (n * per_block). Per block: `uniform` (no sector corrupt, and every sector has sector 0's
    state, campaign, LBA and generation: one write's, or all zero), sector 0's `state0` and
    header fields `head` (len(BLOCK_FIELDS), n). Per sector `fields` (len(BLOCK_FIELDS),
    n * per_block), written only in blocks that are not uniform. Fields are 8-byte integers (the
    header word's bits as they are); the rows of `head` and `fields` may be apart in memory."""

    state: npt.NDArray[np.uint8]
    uniform: npt.NDArray[np.bool_]
    state0: npt.NDArray[np.uint8]
    head: npt.NDArray[np.int64]
    fields: npt.NDArray[np.int64]


def parse_blocks_into(data: Data, per_block: int, out: BlockColumns) -> None:
    """Check `data` and summarise it block by block into `out` (one C pass): what the checker
    reads, per sector only where a block is not uniform. `out` holds exactly the data's blocks."""
    words = _words(data)
    if per_block < 1 or len(words) % per_block:
        raise ValueError("parse_blocks_into: data is not whole blocks")
    parser = BlockParser(per_block, out)
    if len(words) != parser.blocks * per_block:
        raise ValueError("parse_blocks_into: output columns of the wrong shape or layout")
    parser.parse(words, 0)


class BlockParser:
    """`parse_blocks_into` call after call into one set of columns (the checker's rows, one
    window at a time): their layout is checked and their addresses taken once; each call checks
    that its data is whole blocks that fit from `first_block` on."""

    def __init__(self, per_block: int, out: BlockColumns) -> None:
        n = len(out.uniform)
        shapes = (
            (out.state, (n * per_block,), 1),
            (out.uniform, (n,), 1),
            (out.state0, (n,), 1),
            (out.head, (len(BLOCK_FIELDS), n), 8),
            (out.fields, (len(BLOCK_FIELDS), n * per_block), 8),
        )
        for a, shape, itemsize in shapes:
            # a stride along an axis of length 0 or 1 is never used: numpy may set it to anything
            right = a.shape == shape and a.itemsize == itemsize
            dense = right and (shape[-1] <= 1 or a.strides[-1] == itemsize)
            apart = len(shape) == 1 or shape[-1] == 0 or a.strides[0] >= shape[-1] * itemsize
            if not (right and dense and apart):
                raise ValueError("parse_blocks_into: output columns of the wrong shape or layout")
        if per_block < 1:
            raise ValueError("parse_blocks_into: data is not whole blocks")
        self.per_block, self.blocks = per_block, n
        self._out = out  # the addresses below point into it
        self._addresses = [a.ctypes.data for a, _, _ in shapes]
        self._strides = out.head.strides[0] // 8, out.fields.strides[0] // 8

    def parse(self, data: Data, first_block: int) -> None:
        words = _words(data)
        per_block = self.per_block
        n = len(words) // per_block
        if n * per_block != len(words):
            raise ValueError("parse_blocks_into: data is not whole blocks")
        if first_block < 0 or first_block + n > self.blocks:
            raise ValueError("parse_blocks_into: blocks beyond the output columns")
        state, uniform, state0, head, fields = self._addresses
        first_sector = first_block * per_block
        lib().pfr_parse_blocks(
            words.ctypes.data,
            n,
            per_block,
            state + first_sector,
            uniform + first_block,
            state0 + first_block,
            head + first_block * 8,
            self._strides[0],
            fields + first_sector * 8,
            self._strides[1],
        )


def aligned_buffer(nbytes: int, alignment: int = 4096) -> npt.NDArray[np.uint8]:
    """A zeroed byte array whose address is aligned for O_DIRECT."""
    spare = np.zeros(nbytes + alignment, dtype=np.uint8)
    offset = (-spare.ctypes.data) % alignment
    return spare[offset : offset + nbytes]
