"""Write hardware/BOM.csv from the schematic's symbol fields (MPN, Manufacturer, Price_EUR, DNP).

The root sheet is counted once, the channel sheet once per channel-sheet instance. Off-board
items (cables, shunts, PCB) that have no symbol are listed in OFFBOARD below.
usage: bom.py OUT.csv  (run from hardware/)
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import ksch

HERE = Path(__file__).resolve().parent.parent

# (qty, value/description, manufacturer, MPN, unit EUR, note)
OFFBOARD = [
    (
        3,
        "ATO blade fuse holder, PCB",
        "Keystone",
        "3557-2",
        0.60,
        "for F1..F3 (F3 only with the 3.3 V option)",
    ),
    (8, "jumper shunt 2.54 mm", "Wurth", "60900213421", 0.05, "J2 sense select x4, JP5, spares"),
    (
        4,
        "SATA 15-pin power receptacle (cable side)",
        "Molex",
        "0675820000",
        0.90,
        "crimp on 18 AWG: P13-15 12 V, P7-9 5 V, P4-6/P10/P12 GND, P1-P3 NOT connected",
    ),
    (
        1,
        "2-layer PCB 100x80 mm, 2 oz copper (5 pcs batch / 5)",
        "any (JLCPCB, Aisler, ...)",
        "-",
        4.00,
        "or a perfboard build",
    ),
    (1, "USB cable (Mini-B for Nano)", "any", "-", 2.00, ""),
]


def collect(path: Path) -> tuple[ksch.Sexp, list[dict[str, str]]]:
    sch = ksch.parse(path.read_text())
    rows = []
    for sym in ksch.find_all(sch, "symbol"):
        lib_id = str(ksch.find(sym, "lib_id")[1])  # type: ignore[index]
        if lib_id.startswith("power:"):
            continue
        pr = {k: str(v[2]) for k, v in ksch.props(sym).items()}
        rows.append(pr)
    return sch, rows


COLUMNS = [
    "references",
    "qty",
    "value",
    "manufacturer",
    "mpn",
    "footprint",
    "unit_eur",
    "ext_eur",
    "fitted",
    "note",
]

Key = tuple[str, str, str, str]  # manufacturer, MPN, value, "fit" or "DNP"
Row = list[object]


@dataclass
class Group:
    """The parts of one BOM line: the same manufacturer, MPN and value, fitted or not."""

    refs: list[str] = field(default_factory=list)
    qty: int = 0
    fp: str = ""
    price: str = ""
    note: str = ""


def channel_instances(root: ksch.Sexp) -> int:
    return sum(
        1
        for sh in ksch.find_all(root, "sheet")
        if str(ksch.props(sh)["Sheet file"][2]) == "channel.kicad_sch"
    )


def group_parts(
    root_rows: list[dict[str, str]], ch_rows: list[dict[str, str]], n_ch: int
) -> dict[Key, Group]:
    """The root sheet's parts once, the channel sheet's once per instance."""
    groups: dict[Key, Group] = defaultdict(Group)
    for rows, mult, scope in ((root_rows, 1, ""), (ch_rows, n_ch, f"per channel x{n_ch}")):
        for pr in rows:
            dnp = pr.get("DNP") == "yes"
            key = (
                pr.get("Manufacturer", ""),
                pr.get("MPN", ""),
                pr["Value"].replace(" (DNP)", ""),
                "DNP" if dnp else "fit",
            )
            g = groups[key]
            g.refs.append(pr["Reference"] + ("(ch)" if mult > 1 else ""))
            g.qty += mult
            g.fp = pr.get("Footprint", "").split(":")[-1]
            g.price = pr.get("Price_EUR", "")
            g.note = pr.get("Note", "") or scope
    return groups


def part_rows(groups: dict[Key, Group]) -> tuple[list[Row], float, float]:
    """The BOM lines of the parts, fitted first, and the fitted and optional totals."""
    rows: list[Row] = []
    total_fit = 0.0
    total_opt = 0.0
    for (mfr, mpn, value, fit), g in sorted(
        groups.items(), key=lambda kv: (kv[0][3] == "DNP", kv[0][1])
    ):
        qty = g.qty
        unit = float(g.price or 0)
        ext = qty * unit
        if fit == "fit":
            total_fit += ext
        else:
            total_opt += ext
        refs = " ".join(sorted(set(g.refs)))
        rows.append(
            [
                refs,
                qty,
                value,
                mfr,
                mpn,
                g.fp,
                f"{unit:.2f}",
                f"{ext:.2f}",
                "yes" if fit == "fit" else "option (DNP)",
                g.note,
            ]
        )
    return rows, total_fit, total_opt


def offboard_rows(total_fit: float) -> tuple[list[Row], float]:
    """The OFFBOARD lines, and the fitted total with them added one by one."""
    rows: list[Row] = []
    for qty, desc, mfr, mpn, unit, note in OFFBOARD:
        total_fit += qty * unit
        rows.append(
            [
                "(off-board)",
                qty,
                desc,
                mfr,
                mpn,
                "",
                f"{unit:.2f}",
                f"{qty * unit:.2f}",
                "yes",
                note,
            ]
        )
    return rows, total_fit


def total_rows(total_fit: float, total_opt: float) -> list[Row]:
    return [
        [
            "TOTAL fitted (4 channels, 12 V + 5 V, genuine Nano)",
            "",
            "",
            "",
            "",
            "",
            "",
            f"{total_fit:.2f}",
            "",
            "approximate single-quantity distributor prices, EUR, excl. VAT",
        ],
        [
            "TOTAL options (3.3 V M.2 path + active discharge, all 4 channels)",
            "",
            "",
            "",
            "",
            "",
            "",
            f"{total_opt:.2f}",
            "",
            "",
        ],
    ]


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else HERE / "BOM.csv"
    root, root_rows = collect(HERE / "powerboard.kicad_sch")
    n_ch = channel_instances(root)
    _, ch_rows = collect(HERE / "channel.kicad_sch")
    rows, total_fit, total_opt = part_rows(group_parts(root_rows, ch_rows, n_ch))
    extra, total_fit = offboard_rows(total_fit)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows + extra + total_rows(total_fit, total_opt))
    print(f"wrote {out}: fitted {total_fit:.2f} EUR, options {total_opt:.2f} EUR")


if __name__ == "__main__":
    main(sys.argv)
