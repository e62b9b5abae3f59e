"""A Sheet turned into a KiCad 6 .kicad_sch S-expression.

Every pin gets a short stub and a net label (or a power symbol); pins of a net that line up are
joined by a plain wire instead. The order things are appended in is the order of the file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import ksch
from ksch import Quoted as Q

from schgen.model import POWER_NETS, STUB, Part, Sheet, eff, load_lib_symbol, prop, uid

Point = tuple[float, float, float]  # x, y, and the direction out of the pin


@dataclass
class Drawing:
    """What one sheet's file collects while it is built, each list in file order."""

    sheet: Sheet
    libs: dict[str, ksch.Sexp] = field(default_factory=dict)
    body: list[ksch.Sexp] = field(default_factory=list)
    pinpts: dict[str, list[Point]] = field(default_factory=dict)
    allpins: set[tuple[float, float]] = field(default_factory=set)
    symbol_nodes: list[ksch.Sexp] = field(default_factory=list)
    power_count: int = 0

    def lib(self, lib_id: str) -> ksch.Sexp:
        if lib_id not in self.libs:
            self.libs[lib_id] = load_lib_symbol(lib_id)
        return self.libs[lib_id]


def wire(ax: float, ay: float, bx: float, by: float, uuid: str) -> ksch.Sexp:
    return [
        "wire",
        ["pts", ["xy", ax, ay], ["xy", bx, by]],
        ["stroke", ["width", 0], ["type", "default"], ["color", 0, 0, 0, 0]],
        ["uuid", uuid],
    ]


# -- the parts --------------------------------------------------------------------------------


def place_part(d: Drawing, p: Part) -> None:
    """The part's pins into the net map (or no-connect flags), its symbol into the file."""
    sheet = d.sheet
    lib = ksch.lib_symbols(["x", ["lib_symbols", d.lib(p.lib_id)]])[p.lib_id]
    t = ksch.Transform(p.x, p.y, p.angle, p.mirror)
    known = {pin.name for pin in lib.pins} | {pin.number for pin in lib.pins}
    for key in p.nets:
        if key not in known:
            sys.exit(f"{sheet.name}:{p.ref}: no pin {key!r} in {p.lib_id}")
    for pin in lib.pins:
        net = p.nets.get(pin.number, p.nets.get(pin.name))
        px, py = t.apply(pin.x, pin.y)
        d.allpins.add((round(px, 2), round(py, 2)))
        if net is None:
            if p.no_connect:
                d.body.append(
                    [
                        "no_connect",
                        ["at", px, py],
                        ["uuid", uid(sheet.name, p.ref, "nc", pin.number)],
                    ]
                )
            continue
        outward = (t.direction(pin.angle) + 180) % 360
        d.pinpts.setdefault(net, []).append((px, py, outward))
    d.symbol_nodes.append(part_symbol(sheet, p, lib))


def part_symbol(sheet: Sheet, p: Part, lib: ksch.LibSymbol) -> ksch.Sexp:
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
    return node


# -- the wiring: pins of one net that line up (same x or y, no foreign pin in between) are joined
# by a wire; each joined group then needs one label (or none if it holds the whole net) ---------


class Joined:
    """Which pins of a net are joined already (union-find over their indices)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def root(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i


def wire_net(d: Drawing, net: str, pts: list[Point]) -> None:
    joined = Joined(len(pts))
    if net not in POWER_NETS:
        join_aligned(d, net, pts, joined)
    groups: dict[int, list[int]] = {}
    for i in range(len(pts)):
        groups.setdefault(joined.root(i), []).append(i)
    junctions(d, net, pts, groups)
    need = []
    for members in groups.values():
        if net in POWER_NETS:
            need += members
        elif len(groups) > 1 or len(pts) == 1 or net in d.sheet.hier:
            need.append(min(members, key=lambda k: (pts[k][1], pts[k][0])))
    for i, (x, y, out) in enumerate([pts[k] for k in need]):
        stub(d, net, i, x, y, out)


def join_aligned(d: Drawing, net: str, pts: list[Point], joined: Joined) -> None:
    root = joined.root
    own = {(round(x, 2), round(y, 2)) for x, y, _ in pts}
    for i in range(len(pts)):
        for j in range(i + 1, len(pts)):
            a, b = pts[i], pts[j]
            if abs(a[0] - b[0]) > 0.01 and abs(a[1] - b[1]) > 0.01:
                continue
            lo_x, hi_x = sorted((a[0], b[0]))
            lo_y, hi_y = sorted((a[1], b[1]))
            between = [
                q
                for q in d.allpins
                if lo_x - 0.01 <= q[0] <= hi_x + 0.01 and lo_y - 0.01 <= q[1] <= hi_y + 0.01
            ]
            if any(q not in own for q in between) or root(i) == root(j):
                continue
            if any(abs(hi_x - lo_x) + abs(hi_y - lo_y) > 40 for _ in [0]):
                continue
            joined.parent[root(i)] = root(j)
            d.body.append(wire(a[0], a[1], b[0], b[1], uid(d.sheet.name, "w", net, i, j)))


def junctions(d: Drawing, net: str, pts: list[Point], groups: dict[int, list[int]]) -> None:
    """A dot where more than one wire meets a pin, in groups of more than two pins."""
    for members in groups.values():
        if len(members) > 2:
            for i in members:
                deg = sum(
                    1 for w in d.body if w[0] == "wire" and ["xy", pts[i][0], pts[i][1]] in w[1][1:]
                )
                if deg > 1:
                    d.body.append(
                        [
                            "junction",
                            ["at", pts[i][0], pts[i][1]],
                            ["diameter", 0],
                            ["color", 0, 0, 0, 0],
                            ["uuid", uid(d.sheet.name, "j", net, i)],
                        ]
                    )


def stub(d: Drawing, net: str, i: int, x: float, y: float, out: float) -> None:
    """A short wire out of the pin, ended by a power symbol or a net label."""
    dx = {0: STUB, 90: 0, 180: -STUB, 270: 0}[round(out) % 360]
    dy = {0: 0, 90: -STUB, 180: 0, 270: STUB}[round(out) % 360]
    ex, ey = x + dx, y + dy
    d.body.append(wire(x, y, ex, ey, uid(d.sheet.name, "s", net, i, x, y)))
    if net in POWER_NETS:
        power_symbol(d, net, i, (x, y, out), ex, ey)
    else:
        net_label(d, net, i, (x, y, out), ex, ey)


def power_symbol(d: Drawing, net: str, i: int, pin: Point, ex: float, ey: float) -> None:
    x, y, out = pin
    name = d.sheet.name
    d.power_count += 1
    lib_id = f"power:{net}"
    d.lib(lib_id)
    base = 270 if net == "GND" else 90
    rot = (round(out) - base) % 360
    ref = f"#PWR{d.power_count:03d}"
    off = 5.5 if net == "GND" else -4.5
    node: ksch.Sexp = [
        "symbol",
        ["lib_id", Q(lib_id)],
        ["at", ex, ey, rot],
        ["unit", 1],
        ["in_bom", "yes"],
        ["on_board", "yes"],
        ["uuid", uid(name, "pwr", net, i, x, y)],
    ]
    vx, vy = ksch.Transform(ex, ey, rot).apply(0, -off if round(out) % 180 == 90 else -off * 0.6)
    node.append(prop("Reference", ref, 0, ex, ey, 0, hide=True))
    node.append(
        prop(
            "Value",
            net,
            1,
            vx,
            vy,
            0,
            justify={0: "left", 180: "right"}.get(round(out) % 360, ""),
        )
    )
    node.append(prop("Footprint", "", 2, ex, ey, 0, hide=True))
    node.append(prop("Datasheet", "", 3, ex, ey, 0, hide=True))
    node.append(["pin", Q("1"), ["uuid", uid(name, "pwrpin", net, i, x, y)]])
    d.symbol_nodes.append(node)


def net_label(d: Drawing, net: str, i: int, pin: Point, ex: float, ey: float) -> None:
    x, y, out = pin
    sheet = d.sheet
    ang = round(out) % 360
    justify = {0: "left", 90: "left", 180: "right", 270: "right"}[ang]
    kind = "hierarchical_label" if net in sheet.hier else "label"
    node: ksch.Sexp = [kind, Q(net.lstrip("~"))]
    if kind == "hierarchical_label":
        node.append(["shape", sheet.hier[net]])
    node += [
        ["at", ex, ey, ang],
        eff(1.27, justify + " bottom" if kind == "label" else justify),
        ["uuid", uid(sheet.name, "l", net, i, x, y)],
    ]
    d.body.append(node)


# -- notes and sheet symbols ------------------------------------------------------------------


def text_note(sheet: Sheet, x: float, y: float, s: str, size: float) -> ksch.Sexp:
    return [
        "text",
        Q(s),
        ["at", x, y, 0],
        eff(size, "left top"),
        ["uuid", uid(sheet.name, "t", x, y)],
    ]


def sheet_symbol(d: Drawing, name: str, x: float, y: float, pins: dict[str, str]) -> ksch.Sexp:
    """The symbol of one channel-sheet instance; its pins' stubs and labels go into the body."""
    w, h = 30.48, 12.7
    node: ksch.Sexp = [
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
        d.body.append(wire(x, py, x - 5.08, py, uid("sw", name, pname)))
        d.body.append(
            [
                "label",
                Q(net),
                ["at", x - 5.08, py, 180],
                eff(1.27, "right bottom"),
                ["uuid", uid("sl", name, pname)],
            ]
        )
    return node


# -- the file ---------------------------------------------------------------------------------


def header(sheet: Sheet) -> ksch.Sexp:
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
    return sch


def build(sheet: Sheet, instances: list[tuple[str, int]] | None = None) -> ksch.Sexp:
    """instances: for the channel sheet, (sheet path uuid, ref offset) of each use."""
    d = Drawing(sheet)
    for p in sheet.parts:
        place_part(d, p)
    for net, pts in sorted(d.pinpts.items()):
        wire_net(d, net, pts)
    for x, y, s, size in sheet.texts:
        d.body.append(text_note(sheet, x, y, s, size))
    sheet_nodes = [sheet_symbol(d, name, x, y, pins) for name, x, y, pins in sheet.sheets]
    sch = header(sheet)
    sch.append(["lib_symbols", *d.libs.values()])
    sch += d.body
    sch += d.symbol_nodes
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
