"""Generate the first revision of the power-board schematic (KiCad 6 files) from a Python netlist.

Run once to (re)create hardware/powerboard.kicad_sch and hardware/channel.kicad_sch from the
description below, using the symbols of Debian's `kicad-symbols` package. After that the .kicad_sch
files are the source of truth: edit them in KiCad (or here and regenerate, not both). The renderer
(render_sch.py) and the BOM script (bom.py) read only the .kicad_sch files.

Every pin gets a short stub and a net label (or a power symbol); pins of a net that line up are
joined by a plain wire instead. Reference designators: root sheet as written, channel sheet
instances CH0..CH3 get 1xx, 2xx, 3xx, 4xx.
"""

from __future__ import annotations

import copy
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import ksch
from ksch import Quoted as Q

LIBDIR = Path("/usr/share/kicad/symbols")
POWER_NETS = {"GND", "+12V", "+5V", "+3V3", "VCC"}
NS = uuid.UUID("6f0c3a52-7d1e-4a55-9d1b-3c0a1f5e2b10")
STUB = 2.54


def uid(*parts: object) -> str:
    return str(uuid.uuid5(NS, "/".join(str(p) for p in parts)))


_lib_cache: dict[str, ksch.Sexp] = {}


def load_lib_symbol(lib_id: str) -> ksch.Sexp:
    """A library symbol, flattened (no `extends`) and renamed to its lib_id, as KiCad embeds it."""
    lib, name = lib_id.split(":")
    if lib not in _lib_cache:
        path = LIBDIR / f"{lib}.kicad_sym"
        if lib == "powerfault":
            path = Path(__file__).resolve().parent.parent / "powerfault.kicad_sym"
        _lib_cache[lib] = ksch.parse(path.read_text())
    syms = {str(s[1]): s for s in ksch.find_all(_lib_cache[lib], "symbol")}
    sym = copy.deepcopy(syms[name])
    ext = ksch.find(sym, "extends")
    if ext is not None:
        parent = copy.deepcopy(syms[str(ext[1])])
        pname = str(parent[1])
        body = [x for x in parent if isinstance(x, list) and x[0] == "symbol"]
        for sub in body:
            sub[1] = Q(str(sub[1]).replace(pname, name, 1))
        keep = [x for x in sym if not (isinstance(x, list) and x[0] == "extends")]
        flags = [
            x
            for x in parent[2:]
            if isinstance(x, list) and x[0] in ("pin_names", "pin_numbers", "in_bom", "on_board")
        ]
        flags += [x for x in parent[2:] if x == "power"]
        own = [x for x in keep[2:] if isinstance(x, list) and x[0] == "property"]
        sym = ["symbol", Q(name), *flags, *own, *body]
    sym[1] = Q(lib_id)
    return sym


@dataclass
class Part:
    ref: str
    lib_id: str
    value: str
    x: float
    y: float
    nets: dict[str, str]
    angle: float = 0
    mirror: str = ""
    footprint: str = ""
    mpn: str = ""
    manufacturer: str = ""
    price_eur: str = ""
    dnp: bool = False
    note: str = ""
    # pins left open on purpose get KiCad's no-connect flag (else ERC reports pin_not_connected)
    no_connect: bool = False


@dataclass
class Sheet:
    name: str
    title: str
    paper: str = "A3"
    parts: list[Part] = field(default_factory=list)
    texts: list[tuple[float, float, str, float]] = field(default_factory=list)
    hier: dict[str, str] = field(default_factory=dict)  # net -> shape for hierarchical labels
    sheets: list[tuple[str, float, float, dict[str, str]]] = field(default_factory=list)

    def add(self, *args: object, **kw: object) -> Part:
        p = Part(*args, **kw)  # type: ignore[arg-type]
        self.parts.append(p)
        return p

    def text(self, x: float, y: float, s: str, size: float = 1.27) -> None:
        self.texts.append((x, y, s, size))


def eff(size: float = 1.27, justify: str = "", hide: bool = False) -> ksch.Sexp:
    e: ksch.Sexp = ["effects", ["font", ["size", size, size]]]
    if justify:
        e.append(["justify", *justify.split()])
    if hide:
        e.append("hide")
    return e


def prop(
    name: str,
    value: str,
    pid: int,
    x: float,
    y: float,
    ang: float = 0,
    hide: bool = False,
    justify: str = "",
) -> ksch.Sexp:
    return ["property", Q(name), Q(value), ["id", pid], ["at", x, y, ang], eff(1.27, justify, hide)]


def build(sheet: Sheet, instances: list[tuple[str, int]] | None = None) -> ksch.Sexp:
    """instances: for the channel sheet, (sheet path uuid, ref offset) of each use."""
    libs: dict[str, ksch.Sexp] = {}
    body: list[ksch.Sexp] = []
    pinpts: dict[str, list[tuple[float, float, float]]] = {}
    allpins: set[tuple[float, float]] = set()
    symbol_nodes: list[ksch.Sexp] = []
    power_count = 0

    for p in sheet.parts:
        if p.lib_id not in libs:
            libs[p.lib_id] = load_lib_symbol(p.lib_id)
        lib = ksch.lib_symbols(["x", ["lib_symbols", libs[p.lib_id]]])[p.lib_id]
        t = ksch.Transform(p.x, p.y, p.angle, p.mirror)
        known = {pin.name for pin in lib.pins} | {pin.number for pin in lib.pins}
        for key in p.nets:
            if key not in known:
                sys.exit(f"{sheet.name}:{p.ref}: no pin {key!r} in {p.lib_id}")
        for pin in lib.pins:
            net = p.nets.get(pin.number, p.nets.get(pin.name))
            px, py = t.apply(pin.x, pin.y)
            allpins.add((round(px, 2), round(py, 2)))
            if net is None:
                if p.no_connect:
                    body.append(
                        [
                            "no_connect",
                            ["at", px, py],
                            ["uuid", uid(sheet.name, p.ref, "nc", pin.number)],
                        ]
                    )
                continue
            outward = (t.direction(pin.angle) + 180) % 360
            pinpts.setdefault(net, []).append((px, py, outward))
        ref_y = -4.5 if p.lib_id.startswith(("Device:R", "Device:C", "Device:Polyfuse")) else -6.5
        rx = (
            2.5
            if p.lib_id in ("Device:R", "Device:C", "Device:Polyfuse", "Device:C_Polarized")
            and p.angle == 0
            else 0
        )
        node: ksch.Sexp = ["symbol", ["lib_id", Q(p.lib_id)], ["at", p.x, p.y, p.angle]]
        if p.mirror:
            node.append(["mirror", p.mirror])
        node += [
            ["unit", 1],
            ["in_bom", "yes"],
            ["on_board", "yes"],
            ["fields_autoplaced"],
            ["uuid", uid(sheet.name, p.ref)],
        ]
        value = p.value + (" (DNP)" if p.dnp else "")
        just = "left" if rx else ""
        flag = p.lib_id.startswith("power:")  # PWR_FLAG: no visible reference, value on top
        node.append(
            prop(
                "Reference",
                p.ref,
                0,
                p.x + rx,
                p.y + (-1.27 if rx else ref_y),
                0,
                hide=flag,
                justify=just,
            )
        )
        value_y = p.y + ref_y if flag else p.y + (1.27 if rx else -ref_y)
        node.append(prop("Value", value, 1, p.x + rx, value_y, 0, justify=just))
        node.append(prop("Footprint", p.footprint, 2, p.x, p.y, 0, hide=True))
        node.append(prop("Datasheet", "~", 3, p.x, p.y, 0, hide=True))
        extra = [("MPN", p.mpn), ("Manufacturer", p.manufacturer), ("Price_EUR", p.price_eur)]
        if p.dnp:
            extra.append(("DNP", "yes"))
        if p.note:
            extra.append(("Note", p.note))
        for i, (k, v) in enumerate(extra):
            if v:
                node.append(prop(k, v, 4 + i, p.x, p.y, 0, hide=True))
        for pin in lib.pins:
            node.append(["pin", Q(pin.number), ["uuid", uid(sheet.name, p.ref, "pin", pin.number)]])
        symbol_nodes.append(node)

    # wiring: pins of one net that line up (same x or y, no foreign pin in between) are joined by
    # a wire; each joined group then needs one label (or none if it holds the whole net)
    for net, pts in sorted(pinpts.items()):
        parent = list(range(len(pts)))

        def root(i: int, parent: list[int] = parent) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        own = {(round(x, 2), round(y, 2)) for x, y, _ in pts}
        if net not in POWER_NETS:
            for i in range(len(pts)):
                for j in range(i + 1, len(pts)):
                    a, b = pts[i], pts[j]
                    if abs(a[0] - b[0]) > 0.01 and abs(a[1] - b[1]) > 0.01:
                        continue
                    lo_x, hi_x = sorted((a[0], b[0]))
                    lo_y, hi_y = sorted((a[1], b[1]))
                    between = [
                        q
                        for q in allpins
                        if lo_x - 0.01 <= q[0] <= hi_x + 0.01 and lo_y - 0.01 <= q[1] <= hi_y + 0.01
                    ]
                    if any(q not in own for q in between) or root(i) == root(j):
                        continue
                    if any(abs(hi_x - lo_x) + abs(hi_y - lo_y) > 40 for _ in [0]):
                        continue
                    parent[root(i)] = root(j)
                    body.append(
                        [
                            "wire",
                            ["pts", ["xy", a[0], a[1]], ["xy", b[0], b[1]]],
                            ["stroke", ["width", 0], ["type", "default"], ["color", 0, 0, 0, 0]],
                            ["uuid", uid(sheet.name, "w", net, i, j)],
                        ]
                    )
        groups: dict[int, list[int]] = {}
        for i in range(len(pts)):
            groups.setdefault(root(i), []).append(i)
        for members in groups.values():
            if len(members) > 2:
                for i in members:
                    deg = sum(
                        1
                        for w in body
                        if w[0] == "wire" and ["xy", pts[i][0], pts[i][1]] in w[1][1:]
                    )
                    if deg > 1:
                        body.append(
                            [
                                "junction",
                                ["at", pts[i][0], pts[i][1]],
                                ["diameter", 0],
                                ["color", 0, 0, 0, 0],
                                ["uuid", uid(sheet.name, "j", net, i)],
                            ]
                        )
        need = []
        for members in groups.values():
            if net in POWER_NETS:
                need += members
            elif len(groups) > 1 or len(pts) == 1 or net in sheet.hier:
                need.append(min(members, key=lambda k: (pts[k][1], pts[k][0])))
        pts_all = pts
        pts = [pts_all[k] for k in need]
        for i, (x, y, d) in enumerate(pts):
            dx = {0: STUB, 90: 0, 180: -STUB, 270: 0}[round(d) % 360]
            dy = {0: 0, 90: -STUB, 180: 0, 270: STUB}[round(d) % 360]
            ex, ey = x + dx, y + dy
            body.append(
                [
                    "wire",
                    ["pts", ["xy", x, y], ["xy", ex, ey]],
                    ["stroke", ["width", 0], ["type", "default"], ["color", 0, 0, 0, 0]],
                    ["uuid", uid(sheet.name, "s", net, i, x, y)],
                ]
            )
            if net in POWER_NETS:
                power_count += 1
                lib_id = f"power:{net}"
                if lib_id not in libs:
                    libs[lib_id] = load_lib_symbol(lib_id)
                base = 270 if net == "GND" else 90
                rot = (round(d) - base) % 360
                ref = f"#PWR{power_count:03d}"
                off = 5.5 if net == "GND" else -4.5
                node = [
                    "symbol",
                    ["lib_id", Q(lib_id)],
                    ["at", ex, ey, rot],
                    ["unit", 1],
                    ["in_bom", "yes"],
                    ["on_board", "yes"],
                    ["uuid", uid(sheet.name, "pwr", net, i, x, y)],
                ]
                vx, vy = ksch.Transform(ex, ey, rot).apply(
                    0, -off if round(d) % 180 == 90 else -off * 0.6
                )
                node.append(prop("Reference", ref, 0, ex, ey, 0, hide=True))
                node.append(
                    prop(
                        "Value",
                        net,
                        1,
                        vx,
                        vy,
                        0,
                        justify={0: "left", 180: "right"}.get(round(d) % 360, ""),
                    )
                )
                node.append(prop("Footprint", "", 2, ex, ey, 0, hide=True))
                node.append(prop("Datasheet", "", 3, ex, ey, 0, hide=True))
                node.append(["pin", Q("1"), ["uuid", uid(sheet.name, "pwrpin", net, i, x, y)]])
                symbol_nodes.append(node)
            else:
                ang = round(d) % 360
                justify = {0: "left", 90: "left", 180: "right", 270: "right"}[ang]
                kind = "hierarchical_label" if net in sheet.hier else "label"
                node = [kind, Q(net.lstrip("~"))]
                if kind == "hierarchical_label":
                    node.append(["shape", sheet.hier[net]])
                node += [
                    ["at", ex, ey, ang],
                    eff(1.27, justify + " bottom" if kind == "label" else justify),
                    ["uuid", uid(sheet.name, "l", net, i, x, y)],
                ]
                body.append(node)

    for x, y, s, size in sheet.texts:
        body.append(
            [
                "text",
                Q(s),
                ["at", x, y, 0],
                eff(size, "left top"),
                ["uuid", uid(sheet.name, "t", x, y)],
            ]
        )

    sheet_nodes = []
    for name, x, y, pins in sheet.sheets:
        w, h = 30.48, 12.7
        node = [
            "sheet",
            ["at", x, y],
            ["size", w, h],
            ["fields_autoplaced"],
            ["stroke", ["width", 0.1524], ["type", "solid"], ["color", 0, 0, 0, 0]],
            ["fill", ["color", 0, 0, 0, 0.0]],
            ["uuid", uid("sheet", name)],
        ]
        node.append(
            [
                "property",
                Q("Sheet name"),
                Q(name),
                ["id", 0],
                ["at", x, y - 0.7, 0],
                eff(1.27, "left bottom"),
            ]
        )
        node.append(
            [
                "property",
                Q("Sheet file"),
                Q("channel.kicad_sch"),
                ["id", 1],
                ["at", x, y + h + 0.6, 0],
                eff(1.27, "left top"),
            ]
        )
        for i, (pname, net) in enumerate(pins.items()):
            py = y + 3.81 + 5.08 * i
            node.append(
                [
                    "pin",
                    Q(pname),
                    "input" if pname == "EN" else "output",
                    ["at", x, py, 180],
                    eff(1.27, "left"),
                    ["uuid", uid("sheetpin", name, pname)],
                ]
            )
            body.append(
                [
                    "wire",
                    ["pts", ["xy", x, py], ["xy", x - 5.08, py]],
                    ["stroke", ["width", 0], ["type", "default"], ["color", 0, 0, 0, 0]],
                    ["uuid", uid("sw", name, pname)],
                ]
            )
            body.append(
                [
                    "label",
                    Q(net),
                    ["at", x - 5.08, py, 180],
                    eff(1.27, "right bottom"),
                    ["uuid", uid("sl", name, pname)],
                ]
            )
        sheet_nodes.append(node)

    sch: ksch.Sexp = [
        "kicad_sch",
        ["version", 20211123],
        ["generator", "eeschema"],
        ["uuid", uid("file", sheet.name)],
        ["paper", Q(sheet.paper)],
    ]
    sch.append(
        [
            "title_block",
            ["title", Q(sheet.title)],
            ["rev", Q("A")],
            ["company", Q("powerfault-rig (open hardware)")],
            [
                "comment",
                1,
                Q("Generated by hardware/tools/gen_schematic.py, then the source of truth"),
            ],
        ]
    )
    sch.append(["lib_symbols", *libs.values()])
    sch += body
    sch += symbol_nodes
    sch += sheet_nodes
    if instances is not None:  # root sheet: instance data for itself and the channel sheets
        sch.append(
            ["sheet_instances", ["path", Q("/"), ["page", Q("1")]]]
            + [
                ["path", Q(f"/{uid('sheet', n)}"), ["page", Q(str(i + 2))]]
                for i, (n, *_r) in enumerate(sheet.sheets)
            ]
        )
    return sch


def symbol_instances(root: Sheet, channel: Sheet) -> ksch.Sexp:
    out: ksch.Sexp = ["symbol_instances"]
    rows = []
    for p in root.parts:
        rows.append((f"/{uid(root.name, p.ref)}", p.ref, p))
    for ci, (name, *_r) in enumerate(root.sheets):
        for p in channel.parts:
            num = int("".join(c for c in p.ref if c.isdigit()))
            pre = "".join(c for c in p.ref if not c.isdigit())
            rows.append(
                (
                    f"/{uid('sheet', name)}/{uid(channel.name, p.ref)}",
                    f"{pre}{(ci + 1) * 100 + num}",
                    p,
                )
            )
    for path, ref, p in sorted(rows, key=lambda r: r[0]):
        out.append(
            [
                "path",
                Q(path),
                ["reference", Q(ref)],
                ["unit", 1],
                ["value", Q(p.value + (" (DNP)" if p.dnp else ""))],
                ["footprint", Q(p.footprint)],
            ]
        )
    return out


# --------------------------------------------------------------------------------------------
# The design
# --------------------------------------------------------------------------------------------
FP_R = "Resistor_SMD:R_0805_2012Metric"
FP_R1206 = "Resistor_SMD:R_1206_3216Metric"
FP_C = "Capacitor_SMD:C_0805_2012Metric"
FP_SOT23 = "Package_TO_SOT_SMD:SOT-23"
FP_DPAK = "Package_TO_SOT_SMD:TO-252-2"
FP_SMA = "Diode_SMD:D_SMA"
FP_2920 = "Fuse:Fuse_2920_7451Metric"


def channel_sheet() -> Sheet:
    s = Sheet("channel", "Power board: one drive channel (used 4x: CH0..CH3)")
    s.hier = {"EN": "input", "SENSE": "output"}
    # enable input, default state while the MCU is in reset
    s.add(
        "R1",
        "Device:R",
        "100",
        30.48,
        50.8,
        {"1": "EN", "2": "ENF"},
        angle=90,
        footprint=FP_R,
        mpn="RC0805FR-07100RL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "R2",
        "Device:R",
        "10k",
        22.86,
        35.56,
        {"1": "PULL", "2": "EN"},
        footprint=FP_R,
        mpn="RC0805FR-0710KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "JP1",
        "Jumper:SolderJumper_3_Bridged12",
        "DEFAULT ON|OFF",
        22.86,
        22.86,
        {"A": "VCC", "C": "PULL", "B": "GND"},
        footprint="Jumper:SolderJumper-3_P1.3mm_Bridged12_RoundedPad1.0x1.5mm",
        note="1-2 bridged: channel ON while MCU in reset (default); cut and bridge 2-3 for OFF",
    )

    def cell(
        y0: float,
        rail: str,
        fused: str,
        out: str,
        tag: str,
        nums: list[int],
        cmiller: str,
        fuse_mpn: str,
        fuse_val: str,
    ) -> None:
        r = lambda i: f"R{i}"  # noqa: E731
        q1, q2, q3, q4, q5 = (f"Q{n}" for n in nums[:5])
        ra, rb, rc, rd = (r(n) for n in nums[5:9])
        d1, d2, c1, f1 = f"D{nums[9]}", f"D{nums[10]}", f"C{nums[11]}", f"F{nums[12]}"
        da, ea, ga, dis = f"D{tag}", f"E{tag}", f"G{tag}", f"DIS{tag}"
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

    cell(
        60.96,
        "+12V",
        "V12F",
        "OUT12",
        "12",
        [1, 2, 3, 4, 5, 3, 4, 5, 6, 1, 2, 1, 1],
        "47n",
        "2920L330/24MR",
        "3.3A/24V",
    )
    cell(
        137.16,
        "+5V",
        "V5F",
        "OUT5",
        "5",
        [6, 7, 8, 9, 10, 7, 8, 9, 10, 3, 4, 2, 2],
        "22n",
        "2920L300/15MR",
        "3A/15V",
    )

    # 3.3 V (M.2 only): load switch with slew control, populated on channels that need it
    y0 = 213.36
    s.add(
        "U1",
        "powerfault:TPS22965N",
        "TPS22965N",
        104.14,
        y0,
        {"VIN": "V3F", "VBIAS": "+5V", "ON": "ENF", "CT": "CT3", "VOUT": "OUT3V3", "GND": "GND"},
        footprint="Package_SON:WSON-8-1EP_2x2mm_P0.5mm_EP0.9x1.6mm",
        mpn="TPS22965NDSGR",
        manufacturer="Texas Instruments",
        price_eur="0.90",
        dnp=True,
        note="3.3 V option (M.2 direct); no quick-output-discharge variant",
    )
    s.add(
        "F3",
        "Device:Polyfuse",
        "4A/15V",
        83.82,
        y0 - 10.16,
        {"1": "+3V3", "2": "V3F"},
        footprint=FP_2920,
        mpn="2920L400/15MR",
        manufacturer="Littelfuse",
        price_eur="0.50",
        dnp=True,
    )
    # V3F is fed through the polyfuse (a passive pin) and feeds the load switch's VIN power pins
    s.add("#FLG1", "power:PWR_FLAG", "PWR_FLAG", 63.5, y0 - 2.54, {"1": "V3F"})
    s.add(
        "C3",
        "Device:C",
        "1n",
        96.52,
        y0 + 17.78,
        {"1": "CT3", "2": "GND"},
        footprint=FP_C,
        mpn="GRM2165C1H102JA01D",
        manufacturer="Murata",
        price_eur="0.03",
        dnp=True,
        note="rise time about 1.3 ms at 3.3 V",
    )
    s.add(
        "C4",
        "Device:C",
        "100n",
        124.46,
        y0 + 17.78,
        {"1": "+5V", "2": "GND"},
        footprint=FP_C,
        mpn="GRM21BR71H104KA01L",
        manufacturer="Murata",
        price_eur="0.02",
        dnp=True,
    )
    s.add(
        "C5",
        "Device:C",
        "1u",
        76.2,
        y0 + 7.62,
        {"1": "V3F", "2": "GND"},
        footprint=FP_C,
        mpn="GRM21BR71E105KA99L",
        manufacturer="Murata",
        price_eur="0.05",
        dnp=True,
    )
    s.add(
        "D5",
        "Device:D_Schottky",
        "B340A",
        147.32,
        y0 + 12.7,
        {"K": "OUT3V3", "A": "GND"},
        angle=270,
        footprint=FP_SMA,
        mpn="B340A-13-F",
        manufacturer="Diodes Inc",
        price_eur="0.12",
        dnp=True,
    )

    # rail sense: jumper picks the rail, divider 1/3 (15 V full scale), clamp to the MCU rail
    s.add(
        "J2",
        "Connector_Generic:Conn_02x03_Odd_Even",
        "SENSE SEL",
        215.9,
        83.82,
        {"1": "OUT12", "3": "OUT5", "5": "OUT3V3", "2": "SEL", "4": "SEL", "6": "SEL"},
        footprint="Connector_PinHeader_2.54mm:PinHeader_2x03_P2.54mm_Vertical",
        mpn="61300621121",
        manufacturer="Wurth",
        price_eur="0.20",
        note="jumper 1-2: 12 V, 3-4: 5 V, 5-6: 3.3 V",
    )
    s.add(
        "R11",
        "Device:R",
        "20k",
        243.84,
        83.82,
        {"1": "SEL", "2": "SENSE"},
        angle=90,
        footprint=FP_R,
        mpn="RC0805FR-0720KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "R12",
        "Device:R",
        "10k",
        254.0,
        96.52,
        {"1": "SENSE", "2": "GND"},
        footprint=FP_R,
        mpn="RC0805FR-0710KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "C6",
        "Device:C",
        "1n",
        264.16,
        96.52,
        {"1": "SENSE", "2": "GND"},
        footprint=FP_C,
        mpn="GRM2165C1H102JA01D",
        manufacturer="Murata",
        price_eur="0.03",
        note="tau 6.7 us with the divider",
    )
    s.add(
        "D6",
        "Diode:BAT54S",
        "BAT54S",
        276.86,
        101.6,
        {"1": "GND", "2": "VCC", "3": "SENSE"},
        angle=270,
        footprint=FP_SOT23,
        mpn="BAT54S,215",
        manufacturer="Nexperia",
        price_eur="0.05",
        note="clamps SENSE to GND..VCC",
    )
    # indicator: lit while the switched 12 V output is up (shows the real rail, including its decay)
    s.add(
        "R13",
        "Device:R",
        "4k7",
        218.44,
        147.32,
        {"1": "OUT12", "2": "LEDA"},
        footprint=FP_R,
        mpn="RC0805FR-074K7L",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "D7",
        "Device:LED",
        "green",
        218.44,
        160.02,
        {"A": "LEDA", "K": "GND"},
        angle=90,
        footprint="LED_SMD:LED_0805_2012Metric",
        mpn="150080GS75000",
        manufacturer="Wurth",
        price_eur="0.10",
    )
    # drive connector
    s.add(
        "J1",
        "Connector:Screw_Terminal_01x05",
        "TO DRIVE",
        340.36,
        55.88,
        {"1": "OUT12", "2": "GND", "3": "OUT5", "4": "GND", "5": "OUT3V3"},
        footprint="TerminalBlock_Phoenix:TerminalBlock_Phoenix_MKDS-1,5-5-5.08_1x05_P5.08mm_Horizontal",
        mpn="1935190",
        manufacturer="Phoenix Contact",
        price_eur="1.60",
        note="1: +12V  2: GND  3: +5V  4: GND  5: +3V3 (M.2 only, never to SATA P1-P3)",
    )
    s.text(
        190.5,
        20.32,
        (
            "CHANNEL (x4).  EN high = rail ON.  EN low = OFF.\n"
            "EN floats while the MCU is in reset: R2 + JP1 set the state then "
            "(default ON = firmware default safe state).\n"
            "\n"
            "P-FET high-side cells (12 V and 5 V):\n"
            "- Q1 level shifter pulls node D low -> Q3 (PNP) pulls the gate down "
            "through R22k: soft-start,\n"
            "  Miller cap C1/C2 limits dV/dt to ~8 V/ms (12 V) / ~3 V/ms (5 V): "
            "inrush into 100 uF < 1 A.\n"
            "- EN low: R4k7 pulls D up, Q2 (NPN) slams the gate up through the "
            "BAT54: MOSFET off in < 5 us.\n"
            "- R100k keeps the gate at its source when everything is idle.\n"
            "- No capacitance on the switched side on purpose: the drive's own "
            "hold-up sets the fall.\n"
            "- B340A clamps the output when the cable inductance kicks at the cut.\n"
            "- Q5/R6, Q10/R10 (DNP): active discharge = PSU-collapse-style cut "
            "instead of cable-pull-style.\n"
            "3.3 V (M.2 only, DNP otherwise): TPS22965N load switch, CT 1 nF ~1.3 ms rise.\n"
            "SENSE: J2 jumper picks the rail; 20k/10k = 1/3 (15 V full scale at 5 V AVcc)."
        ),
        1.27,
    )
    return s


def root_sheet() -> Sheet:
    s = Sheet("powerboard", "SSD power-fault rig: 4-channel power switch board")
    s.add(
        "A1",
        "MCU_Module:Arduino_Nano_v3.x",
        "Arduino Nano (ATmega328P 16 MHz)",
        93.98,
        93.98,
        {
            "D4": "EN0",
            "D5": "EN1",
            "D6": "EN2",
            "D7": "EN3",
            "A0": "SNS0",
            "A1": "SNS1",
            "A2": "SNS2",
            "A3": "SNS3",
            "+5V": "VCC",
            "4": "GND",
            "29": "GND",
            "3": "NORST",
        },
        footprint="Module:Arduino_Nano",
        mpn="A000005",
        manufacturer="Arduino",
        price_eur="22.00",
        note="a clone (CH340) at ~5 EUR works the same",
        no_connect=True,
    )
    s.add(
        "D4",
        "Device:D_Schottky",
        "B340A",
        58.42,
        35.56,
        {"A": "+5V", "K": "VCC"},
        angle=180,
        footprint=FP_SMA,
        mpn="B340A-13-F",
        manufacturer="Diodes Inc",
        price_eur="0.12",
        note="board 5 V feeds the Nano; USB can never back-feed the drive rail",
    )
    s.add(
        "JP5",
        "Connector_Generic:Conn_01x02",
        "NO-AUTORESET",
        137.16,
        78.74,
        {"1": "NORST", "2": "NR"},
        angle=180,
        footprint="Connector_PinHeader_2.54mm:PinHeader_1x02_P2.54mm_Vertical",
        mpn="61300211121",
        manufacturer="Wurth",
        price_eur="0.10",
        note="fit jumper in service: opening the port does not reset the MCU; remove to flash",
    )
    s.add(
        "C10",
        "Device:C_Polarized",
        "10u",
        149.86,
        88.9,
        {"1": "NR", "2": "GND"},
        footprint="Capacitor_Tantalum_SMD:CP_EIA-3528-21_Kemet-B",
        mpn="T491B106K016AT",
        manufacturer="KEMET",
        price_eur="0.30",
    )
    # power input
    s.add(
        "J3",
        "Connector:Screw_Terminal_01x04",
        "12V/5V IN",
        25.4,
        177.8,
        {"1": "+12V_IN", "2": "GND", "3": "GND", "4": "+5V_IN"},
        footprint="TerminalBlock_Phoenix:TerminalBlock_Phoenix_MKDS-1,5-4-5.08_1x04_P5.08mm_Horizontal",
        mpn="1935187",
        manufacturer="Phoenix Contact",
        price_eur="1.30",
        note="from an ATX PSU (yellow 12 V, red 5 V) or bench supplies",
    )
    s.add(
        "J4",
        "Connector:Screw_Terminal_01x02",
        "3V3 IN",
        25.4,
        218.44,
        {"1": "+3V3_IN", "2": "GND"},
        footprint="TerminalBlock_Phoenix:TerminalBlock_Phoenix_MKDS-1,5-2-5.08_1x02_P5.08mm_Horizontal",
        mpn="1935161",
        manufacturer="Phoenix Contact",
        price_eur="0.70",
        note="only for the M.2 3.3 V option (ATX orange)",
    )
    s.add(
        "F1",
        "Device:Fuse",
        "10A",
        50.8,
        165.1,
        {"1": "+12V_IN", "2": "+12V"},
        angle=90,
        footprint="Fuse:Fuseholder_Blade_ATO_Littelfuse_Pudenz_2_Pin",
        mpn="0287010.PXCN",
        manufacturer="Littelfuse",
        price_eur="0.30",
        note="ATO blade; holder Keystone 3557-2",
    )
    s.add(
        "F2",
        "Device:Fuse",
        "10A",
        50.8,
        190.5,
        {"1": "+5V_IN", "2": "+5V"},
        angle=90,
        footprint="Fuse:Fuseholder_Blade_ATO_Littelfuse_Pudenz_2_Pin",
        mpn="0287010.PXCN",
        manufacturer="Littelfuse",
        price_eur="0.30",
    )
    s.add(
        "F3",
        "Device:Fuse",
        "10A",
        50.8,
        226.06,
        {"1": "+3V3_IN", "2": "+3V3"},
        angle=90,
        footprint="Fuse:Fuseholder_Blade_ATO_Littelfuse_Pudenz_2_Pin",
        mpn="0287010.PXCN",
        manufacturer="Littelfuse",
        price_eur="0.30",
        dnp=True,
    )
    s.add(
        "D1",
        "Device:D_TVS",
        "SMAJ15A",
        76.2,
        172.72,
        {"A2": "+12V", "A1": "GND"},
        angle=90,
        footprint=FP_SMA,
        mpn="SMAJ15A",
        manufacturer="Littelfuse",
        price_eur="0.20",
        note="unidirectional: A1=anode to GND",
    )
    s.add(
        "D2",
        "Device:D_TVS",
        "SMAJ6.0A",
        76.2,
        198.12,
        {"A2": "+5V", "A1": "GND"},
        angle=90,
        footprint=FP_SMA,
        mpn="SMAJ6.0A",
        manufacturer="Littelfuse",
        price_eur="0.20",
    )
    s.add(
        "D3",
        "Device:D_TVS",
        "SMAJ5.0A",
        76.2,
        233.68,
        {"A2": "+3V3", "A1": "GND"},
        angle=90,
        footprint=FP_SMA,
        mpn="SMAJ5.0A",
        manufacturer="Littelfuse",
        price_eur="0.20",
        dnp=True,
    )
    s.add(
        "C1",
        "Device:C_Polarized",
        "470u 25V",
        93.98,
        172.72,
        {"1": "+12V", "2": "GND"},
        footprint="Capacitor_THT:CP_Radial_D10.0mm_P5.00mm",
        mpn="EEU-FR1E471",
        manufacturer="Panasonic",
        price_eur="0.60",
    )
    s.add(
        "C2",
        "Device:C",
        "10u 25V",
        106.68,
        172.72,
        {"1": "+12V", "2": "GND"},
        footprint="Capacitor_SMD:C_1206_3216Metric",
        mpn="GRM31CR61E106KA12L",
        manufacturer="Murata",
        price_eur="0.15",
    )
    s.add(
        "C3",
        "Device:C_Polarized",
        "470u 16V",
        93.98,
        198.12,
        {"1": "+5V", "2": "GND"},
        footprint="Capacitor_THT:CP_Radial_D8.0mm_P3.50mm",
        mpn="EEU-FR1C471",
        manufacturer="Panasonic",
        price_eur="0.50",
    )
    s.add(
        "C4",
        "Device:C",
        "10u 25V",
        106.68,
        198.12,
        {"1": "+5V", "2": "GND"},
        footprint="Capacitor_SMD:C_1206_3216Metric",
        mpn="GRM31CR61E106KA12L",
        manufacturer="Murata",
        price_eur="0.15",
    )
    s.add(
        "C5",
        "Device:C_Polarized",
        "470u 10V",
        93.98,
        233.68,
        {"1": "+3V3", "2": "GND"},
        footprint="Capacitor_THT:CP_Radial_D8.0mm_P3.50mm",
        mpn="EEU-FR1A471",
        manufacturer="Panasonic",
        price_eur="0.45",
        dnp=True,
    )
    s.add(
        "C6",
        "Device:C",
        "10u 25V",
        106.68,
        233.68,
        {"1": "+3V3", "2": "GND"},
        footprint="Capacitor_SMD:C_1206_3216Metric",
        mpn="GRM31CR61E106KA12L",
        manufacturer="Murata",
        price_eur="0.15",
        dnp=True,
    )
    # rails enter through connectors and fuses (passive pins): PWR_FLAGs tell ERC they are driven
    for i, net in enumerate(("+12V", "+5V", "+3V3", "GND")):
        s.add(f"#FLG0{i + 1}", "power:PWR_FLAG", "PWR_FLAG", 127.0 + 12.7 * i, 160.02, {"1": net})
    s.sheets = [
        (f"CH{i}", 241.3, 50.8 + 30.48 * i, {"EN": f"EN{i}", "SENSE": f"SNS{i}"}) for i in range(4)
    ]
    s.text(
        200.66,
        175.26,
        (
            "PIN MAP (firmware must match, see hardware/README.md)\n"
            "  CH0: EN = D4 (PD4)   SENSE = A0 (ADC0)\n"
            "  CH1: EN = D5 (PD5)   SENSE = A1 (ADC1)\n"
            "  CH2: EN = D6 (PD6)   SENSE = A2 (ADC2)\n"
            "  CH3: EN = D7 (PD7)   SENSE = A3 (ADC3)\n"
            "  EN HIGH = channel powered, LOW = cut.\n"
            "  UART: Nano USB serial (D0/D1), 115200 8N1.\n"
            "  ADC reference: AVcc = VCC (about 4.7 V behind D4), divider 1/3:\n"
            "    counts = Vrail / 3 / VCC * 1024  (12 V ~ 871, 5 V ~ 363, 3.3 V ~ 240)\n"
            "\n"
            "Hardware default while the MCU is in reset / unprogrammed:\n"
            "  channel ON (JP1 of each channel, 1-2 bridged). Cut JP1 and bridge 2-3 for OFF.\n"
            "TVS on each input rail also crowbars a reversed supply into its fuse."
        ),
        1.27,
    )
    return s


def main() -> None:
    out = Path(__file__).resolve().parent.parent
    channel = channel_sheet()
    root = root_sheet()
    ch = build(channel)
    rt = build(root, instances=[])
    rt.append(symbol_instances(root, channel))
    # project library with the one symbol KiCad 6 does not ship
    (out / "channel.kicad_sch").write_text(ksch.dump(ch) + "\n")
    (out / "powerboard.kicad_sch").write_text(ksch.dump(rt) + "\n")
    print("wrote", out / "powerboard.kicad_sch", out / "channel.kicad_sch")


if __name__ == "__main__":
    main()
