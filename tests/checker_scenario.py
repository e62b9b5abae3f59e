"""A hand-driven cycle for checker tests: writes land on an in-memory image as the test says."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rig.check import verify
from rig.io import media
from rig.io.ledger import NOT_DONE, CycleLog, LbaState

CAMPAIGN = 11
BS = 4096


class Scenario:
    def __init__(self, nblocks: int = 64) -> None:
        self.state = LbaState(0, nblocks)
        self.image = np.zeros(nblocks * BS, dtype=np.uint8)
        self.log = CycleLog()
        self.op = 0
        self.failing: set[int] = set()

    def new_cycle(self) -> None:
        self.log = CycleLog()

    def data(self, lba: int, count: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]]:
        gens = self.state.next_generations(lba, count)
        self.op += 1
        record = media.WriteRecord(CAMPAIGN, lba, gens.astype(np.uint64), 0, self.op, self.op)
        return media.build(record, BS), gens

    def write(
        self,
        lba: int,
        count: int,
        issue: int,
        complete: int = NOT_DONE,
        *,
        land: bool = True,
        fua: bool = False,
        status: int = 0,
    ) -> npt.NDArray[np.uint8]:
        data, gens = self.data(lba, count)
        self.log.add_write(0, self.op, lba, gens, issue, complete, status, fua)
        if land:
            self.image[lba * BS : (lba + count) * BS] = data
        return data

    def discard(
        self, lba: int, count: int, issue: int, complete: int = NOT_DONE, *, land: bool = True
    ) -> int:
        """A discard of the range, logged as the writer logs one; `land`: the drive applied it
        (the blocks read zeroes). Returns its op count."""
        gens = self.state.next_generations(lba, count)
        self.op += 1
        self.log.add_write(0, self.op, lba, gens, issue, complete, 0, False, True)
        if land:
            self.image[lba * BS : (lba + count) * BS] = 0
        return self.op

    def flush(self, issue: int, complete: int) -> None:
        self.log.add_flush(0, issue, complete, 0)

    def read(self, lba: int, count: int) -> npt.NDArray[np.uint8]:
        if self.failing & set(range(lba, lba + count)):
            raise OSError(5, "Input/output error")
        return self.image[lba * BS : (lba + count) * BS].copy()

    def check(
        self,
        cut: int,
        error: int = 0,
        extra: list[int] | None = None,
        atomic: int = 1,
        zeroes: bool = False,
    ) -> verify.CheckResult:
        durability = self.log.durability(cut, error)
        blocks = np.array(extra or [], dtype=np.int64)
        return verify.check(
            CAMPAIGN, self.state, self.log, durability, blocks, self.read, BS,
            atomic_blocks=atomic, zeroes=zeroes,
        )  # fmt: skip

    def unknown_content(self, lba: int) -> verify.CheckResult:
        """Two cycles: `lba` written durably and checked, then a write to it that does not land
        and a read of it that fails, so from the next cycle on its content is unknown. Returns
        the second check; leaves a new cycle open, the block readable again."""
        self.write(lba, 1, issue=0, complete=1)
        self.flush(2, 3)
        self.check(cut=10)
        self.new_cycle()
        self.write(lba, 1, issue=20, land=False)
        self.failing = {lba}
        result = self.check(cut=30)
        self.new_cycle()
        self.failing = set()
        return result


def failures(result: verify.CheckResult) -> list[verify.Finding]:
    return [f for f in result.findings if f.failure]


def classes(result: verify.CheckResult) -> list[str]:
    return sorted(f.cls for f in failures(result))
