"""One P-FET high-side cell of the channel sheet (12 V and 5 V use the same topology).

Level shifter, totem-pole gate driver, soft-start and fast turn-off gate paths, the P-FET with
its polyfuse, freewheel diode and the optional (DNP) active discharge; hardware/README.md,
"How one channel works", says why each part is there.
"""

from __future__ import annotations

from dataclasses import dataclass

from schgen.model import FP_2920, FP_C, FP_DPAK, FP_R, FP_SMA, FP_SOT23, Sheet


@dataclass(frozen=True)
class Cell:
    """Where a cell sits, the rail it switches, and its reference numbers."""

    y0: float
    rail: str  # the board rail in
    fused: str  # the rail behind the polyfuse
    out: str  # the switched output
    tag: str  # names the cell's own nets: D<tag>, E<tag>, G<tag>, DIS<tag>
    nums: tuple[int, ...]  # Q1..Q5, R a..d, D1, D2, C1, F1 of the cell, in that order
    cmiller: str
    fuse_mpn: str
    fuse_val: str

    @property
    def fets(self) -> tuple[str, ...]:
        return tuple(f"Q{n}" for n in self.nums[:5])

    @property
    def resistors(self) -> tuple[str, ...]:
        return tuple(f"R{n}" for n in self.nums[5:9])

    @property
    def diodes(self) -> tuple[str, str]:
        return f"D{self.nums[9]}", f"D{self.nums[10]}"

    @property
    def nodes(self) -> tuple[str, str, str, str]:
        """Node D (level shifter), E (driver emitters), G (the gate), DIS (the discharge)."""
        tag = self.tag
        return f"D{tag}", f"E{tag}", f"G{tag}", f"DIS{tag}"


CELLS = (
    Cell(
        60.96,
        "+12V",
        "V12F",
        "OUT12",
        "12",
        (1, 2, 3, 4, 5, 3, 4, 5, 6, 1, 2, 1, 1),
        "47n",
        "2920L330/24MR",
        "3.3A/24V",
    ),
    Cell(
        137.16,
        "+5V",
        "V5F",
        "OUT5",
        "5",
        (6, 7, 8, 9, 10, 7, 8, 9, 10, 3, 4, 2, 2),
        "22n",
        "2920L300/15MR",
        "3A/15V",
    ),
)


def cell(s: Sheet, c: Cell) -> None:
    driver(s, c)
    gate_paths(s, c)
    output(s, c)


def driver(s: Sheet, c: Cell) -> None:
    """Q1 level shifter (the MCU never sees the rail), Q2/Q3 totem pole buffering node D."""
    y0, fused = c.y0, c.fused
    q1, q2, q3, _, _ = c.fets
    ra = c.resistors[0]
    da, ea, _, _ = c.nodes
    s.add(
        q1,
        "Transistor_FET:2N7002",
        "2N7002",
        55.88,
        y0 + 20.32,
        {"G": "ENF", "D": da, "S": "GND"},
        footprint=FP_SOT23,
        mpn="2N7002,215",
        manufacturer="Nexperia",
        price_eur="0.05",
    )
    s.add(
        ra,
        "Device:R",
        "4k7",
        58.42,
        y0 + 2.54,
        {"1": fused, "2": da},
        footprint=FP_R,
        mpn="RC0805FR-074K7L",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        q2,
        "Transistor_BJT:MMBT3904",
        "MMBT3904",
        81.28,
        y0 + 10.16,
        {"B": da, "C": fused, "E": ea},
        footprint=FP_SOT23,
        mpn="MMBT3904,215",
        manufacturer="Nexperia",
        price_eur="0.04",
    )
    s.add(
        q3,
        "Transistor_BJT:MMBT3906",
        "MMBT3906",
        81.28,
        y0 + 25.4,
        {"B": da, "E": ea, "C": "GND"},
        mirror="x",
        footprint=FP_SOT23,
        mpn="MMBT3906,215",
        manufacturer="Nexperia",
        price_eur="0.04",
    )


def gate_paths(s: Sheet, c: Cell) -> None:
    """Turn-on through R 22k (soft start with the Miller cap), turn-off through the BAT54."""
    y0, fused, out, cmiller = c.y0, c.fused, c.out, c.cmiller
    _, rb, rc, _ = c.resistors
    d1 = c.diodes[0]
    c1 = f"C{c.nums[11]}"
    _, ea, ga, _ = c.nodes
    s.add(
        rb,
        "Device:R",
        "22k",
        101.6,
        y0 + 12.7,
        {"1": ea, "2": ga},
        angle=90,
        footprint=FP_R,
        mpn="RC0805FR-0722KL",
        manufacturer="Yageo",
        price_eur="0.01",
        note="turn-on (soft-start) path",
    )
    s.add(
        d1,
        "Device:D_Schottky",
        "BAT54",
        101.6,
        y0 + 20.32,
        {"A": ea, "K": ga},
        angle=180,
        footprint=FP_SOT23,
        mpn="BAT54,215",
        manufacturer="Nexperia",
        price_eur="0.04",
        note="fast turn-off path",
    )
    s.add(
        rc,
        "Device:R",
        "100k",
        114.3,
        y0 - 2.54,
        {"1": fused, "2": ga},
        footprint=FP_R,
        mpn="RC0805FR-07100KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        c1,
        "Device:C",
        cmiller,
        114.3,
        y0 + 25.4,
        {"1": ga, "2": out},
        footprint=FP_C,
        mpn="GRM21BR71H473KA01L" if cmiller == "47n" else "GRM21BR71H223KA01L",
        manufacturer="Murata",
        price_eur="0.05",
        note="Miller soft-start, 50 V X7R",
    )


def output(s: Sheet, c: Cell) -> None:
    """The P-FET behind its polyfuse, the freewheel diode, the optional active discharge."""
    y0, rail, fused, out = c.y0, c.rail, c.fused, c.out
    _, _, _, q4, q5 = c.fets
    rd = c.resistors[3]
    d2 = c.diodes[1]
    f1 = f"F{c.nums[12]}"
    da, _, ga, dis = c.nodes
    fuse_mpn, fuse_val = c.fuse_mpn, c.fuse_val
    s.add(
        q4,
        "Device:Q_PMOS_GDS",
        "AOD4185",
        129.54,
        y0 + 12.7,
        {"G": ga, "S": fused, "D": out},
        mirror="x",
        footprint=FP_DPAK,
        mpn="AOD4185",
        manufacturer="Alpha & Omega",
        price_eur="0.70",
    )
    s.add(
        f1,
        "Device:Polyfuse",
        fuse_val,
        132.08,
        y0 - 10.16,
        {"1": rail, "2": fused},
        footprint=FP_2920,
        mpn=fuse_mpn,
        manufacturer="Littelfuse",
        price_eur="0.45",
    )
    s.add(
        d2,
        "Device:D_Schottky",
        "B340A",
        147.32,
        y0 + 25.4,
        {"K": out, "A": "GND"},
        angle=270,
        footprint=FP_SMA,
        mpn="B340A-13-F",
        manufacturer="Diodes Inc",
        price_eur="0.12",
        note="freewheel: clamps the output below GND when cable inductance kicks at cut",
    )
    s.add(
        q5,
        "Transistor_FET:2N7002",
        "IRLML0030",
        165.1,
        y0 + 25.4,
        {"G": da, "D": dis, "S": "GND"},
        footprint=FP_SOT23,
        mpn="IRLML0030TRPBF",
        manufacturer="Infineon",
        price_eur="0.25",
        dnp=True,
        note="optional active discharge (PSU-collapse style cut)",
    )
    s.add(
        rd,
        "Device:R",
        "10R 1W",
        167.64,
        y0 + 7.62,
        {"1": out, "2": dis},
        footprint="Resistor_SMD:R_2512_6332Metric",
        mpn="CRM2512-FX-10R0ELF",
        manufacturer="Bourns",
        price_eur="0.20",
        dnp=True,
    )
