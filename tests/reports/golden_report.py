"""Reference outputs of the whole report (HTML, JSON, every CSV, per-model pages) for a few stores
kept in tests/reports/golden/, written by the report as it was before it aggregated in SQL
(every cut loaded as a Python object). test_report_golden.py builds the report of the
same stores and compares: a change of content fails it.

Regenerate (only for an intended change of content, saying so in the commit):
    .venv/bin/python -m tests.reports.golden_report
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from reports import export
from rig.store import Store
from tests.reports.storebuilder import DriveSpec, build, falling_rails, healthy_plp_drive

GOLDEN = Path(__file__).resolve().parent / "golden"
# case -> the store files of the case (in GOLDEN/stores), in the order given to the report
CASES = {
    "stations": ("station-a.sqlite", "station-b.sqlite"),
    "demo": ("demo.sqlite",),
    "ledger-only": ("ledger-only.sqlite",),
}
STORES = "<stores>"


def normalise(text: str, stores: Path) -> str:
    """The parts that differ between two runs of the same report: where the stores lie and when
    the report was generated."""
    text = text.replace(str(stores), STORES)
    text = re.sub(r'\n "generated_at": [^\n]*,\n', "\n", text, count=1)
    text = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated <when>", text, count=1)
    # each model's printed certificate states when its report was generated
    return re.sub(
        r"report generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "report generated <when>", text
    )


def report_files(case: str, work: Path, *, migrate: bool = False) -> dict[str, str]:
    """The report of a case's stores (copied into `work`), every file normalised, by name;
    `migrate`: the copies first migrated to this rig's schema (the references' stores are v10:
    older than the v11 summaries, so both of the report's read paths are compared)."""
    stores = work / "stores"
    stores.mkdir()
    for name in CASES[case]:
        shutil.copyfile(GOLDEN / "stores" / name, stores / name)
        if migrate:
            Store(str(stores / name)).close()
            db = sqlite3.connect(stores / name)
            db.execute("PRAGMA journal_mode = DELETE")
            db.close()
    out = work / "report"
    export.write_report([str(stores / n) for n in CASES[case]], str(out))
    return {p.name: normalise(p.read_text(encoding="utf-8"), stores) for p in sorted(out.iterdir())}


def _build_stores(into: Path) -> None:
    """The fixture stores. demo.sqlite is copied in by hand: `rig demo --in-process --quiet
    --cycles 40`, its lba_state and ledger rows deleted (a report reads neither) and vacuumed."""
    build(
        into / "station-a.sqlite",
        [
            healthy_plp_drive(),
            DriveSpec(
                "Model Liar",
                "L1",
                ["ok", "lost_durable_write", "lost_durable_write+shorn_write"] * 7 + ["dead"],
                channel=1,
                rail=falling_rails(5),
                return_ms=140,
                delays_ms=[(0.2 * (i + 1), 1.5**i) for i in range(22)],
            ),
        ],
        station="station-a",
        config='[campaign]\nname = "qual"\n[criteria]\nmax_failure_probability = 0.01\n',
    )
    build(
        into / "station-b.sqlite",
        [
            DriveSpec("Model PLP", "P2", ["ok"] * 25 + ["error", "interrupted"], return_ms=75),
            DriveSpec("Model Liar", "L2", ["ok"] * 6 + ["shorn_write"] * 4, channel=2),
        ],
        name="qual-b",
        station="station-b",
    )
    build(
        into / "ledger-only.sqlite",
        [
            DriveSpec(
                "Old",
                "O1",
                ["ok", "flying_write+bit_corruption", "ok", "error"] * 5,
                delays_ms=[(0.5 * i, 3.0**i) for i in range(8)],
            ),
            DriveSpec("Old", "O2", ["ok"] * 12, channel=1, return_ms=33.3),
        ],
        delays_in_row=False,
    )
    for path in into.glob("*.sqlite"):
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode = DELETE")  # one file, readable read-only
        db.close()


def main() -> None:
    stores = GOLDEN / "stores"
    if "--stores" in sys.argv:
        _build_stores(stores)
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            files = report_files(case, Path(tmp))
        target = GOLDEN / case
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for name, text in files.items():
            (target / name).write_text(text, encoding="utf-8")
        print(f"{case}: {len(files)} files")


if __name__ == "__main__":
    main()
