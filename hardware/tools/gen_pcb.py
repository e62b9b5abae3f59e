"""Generate the two-layer power-board layout (powerboard.kicad_pcb) from the schematic's netlist.

Run with Debian's /usr/bin/python3 (KiCad 6's `pcbnew` module):
    gen_pcb.py NETLIST.net OUT.kicad_pcb

The netlist is the one KiCad exports from powerboard.kicad_sch (`make -C hardware` does it with
KiAuto), so references, values, footprints and nets are the schematic's. Placement is fixed per
channel column (the same block four times) plus the input/MCU strip; routing is a small
deterministic grid router (router.py): widest nets first, a ground via next to every SMD ground
pad, a GND pour on both layers. Completeness is proven by KiCad's DRC (zero unconnected items).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ksch
import pcbnew
from router import Grid, Router

FPLIB = Path("/usr/share/kicad/footprints")
MM = 1_000_000

BOARD_W, BOARD_H = 196.0, 146.0
COL_W, COL_X0, COL_Y0 = 47.0, 8.0, 3.0

# Fab minimums (the board's design rules) and what the router keeps (a little more)
FAB_MIN_TRACK = 0.15
FAB_MIN_CLEARANCE = 0.15
FAB_MIN_DRILL = 0.3
ROUTE_CLEARANCE = 0.2
SIGNAL_W = 0.3
# IPC-2221 external layer: I = 0.048 * dT^0.44 * A^0.725 (A in mil^2, 1 oz = 1.378 mil)
CHANNEL_W = 1.0  # 2.39 A at 10 C rise on 1 oz: the 2 A per channel rail
TRUNK_W = 3.0  # 5.5 A at 10 C on 1 oz; 8.7 A on 2 oz (4 channels x 2 A on one rail)
TRUNK_NETS = {"+12V", "+5V", "+3V3", "+12V_IN", "+5V_IN", "+3V3_IN"}
CHANNEL_POWER = ("V12F", "V5F", "OUT12", "OUT5", "V3F", "OUT3V3", "DIS12", "DIS5")
BIG_PAD = 1.1  # pads at least this wide in both directions carry rail current
VIA_SIGNAL = (0.6, 0.3)
VIA_POWER = (1.6, 0.8)


def ipc2221_amps(width_mm: float, oz: float = 1.0, rise_c: float = 10.0) -> float:
    area_mil2 = width_mm / 0.0254 * 1.378 * oz
    return float(0.048 * rise_c**0.44 * area_mil2**0.725)


def net_width(net: str) -> float:
    if net in TRUNK_NETS:
        return TRUNK_W
    if net.split("/")[-1] in CHANNEL_POWER:
        return CHANNEL_W
    return SIGNAL_W


# ---------------------------------------------------------------------------------------------
# netlist
# ---------------------------------------------------------------------------------------------
def read_netlist(path: Path) -> tuple[dict[str, dict[str, str]], dict[str, list[tuple[str, str]]]]:
    """(components ref -> {value, footprint}, nets name -> [(ref, pin)])"""
    tree = ksch.parse(path.read_text())
    comps: dict[str, dict[str, str]] = {}
    for c in ksch.find_all(ksch.find(tree, "components"), "comp"):  # type: ignore[arg-type]
        ref = str(ksch.find(c, "ref")[1])  # type: ignore[index]
        fp = ksch.find(c, "footprint")
        sheet = ksch.find(ksch.find(c, "sheetpath"), "tstamps")  # type: ignore[arg-type]
        path = f"{sheet[1]}{ksch.find(c, 'tstamps')[1]}"  # type: ignore[index]
        comps[ref] = {
            "value": str(ksch.find(c, "value")[1]),
            "footprint": str(fp[1]) if fp else "",
            "path": path,
        }  # type: ignore[index]
    nets: dict[str, list[tuple[str, str]]] = {}
    for n in ksch.find_all(ksch.find(tree, "nets"), "net"):  # type: ignore[arg-type]
        name = str(ksch.find(n, "name")[1])  # type: ignore[index]
        nodes = [
            (str(ksch.find(x, "ref")[1]), str(ksch.find(x, "pin")[1]))
            for x in ksch.find_all(n, "node")
        ]  # type: ignore[index]
        nets[name] = nodes
    return comps, nets


# ---------------------------------------------------------------------------------------------
# placement: (x, y, rotation) per reference; channel n (0..3) uses refs with hundreds digit n+1
# ---------------------------------------------------------------------------------------------
def channel_places(n: int) -> dict[str, tuple[float, float, float]]:
    x0, y0 = COL_X0 + COL_W * n, COL_Y0
    local: dict[str, tuple[float, float, float]] = {
        "J1": (4.0, 8.0, 0),
        "R13": (3.0, 19.0, 0),
        "D7": (8.5, 19.0, 180),
        "J2": (25.0, 20.5, 90),
        "R11": (35.0, 18.0, 0),
        "R12": (35.0, 22.0, 0),
        "C6": (41.0, 18.0, 0),
        "D6": (41.0, 22.5, 0),
    }
    dy = 8.0
    for dx, parts in (
        (0.0, ("Q4", "D2", "R6", "Q5", "Q1", "Q2", "Q3", "R3", "R4", "R5", "D1", "C1", "F1")),
        (23.0, ("Q9", "D4", "R10", "Q10", "Q6", "Q7", "Q8", "R7", "R8", "R9", "D3", "C2", "F2")),
    ):
        q4, d2, r6, q5, q1, q2, q3, r3, r4, r5, d1, c1, f1 = parts
        local[d2] = (dx + 6.0, 20.0 + dy, 0)
        local[r6] = (dx + 16.5, 20.0 + dy, 0)
        local[q4] = (dx + 8.0, 32.0 + dy, 0)
        grid = ((q1, q2, q3), (r3, r4, d1), (r5, c1, q5))
        for row, names in enumerate(grid):
            for col, name in enumerate(names):
                local[name] = (dx + 3.0 + 7.0 * col, 43.0 + dy + 6.5 * row, 0)
        local[f1] = (dx + 9.0, 80.0 + dy, 0)
    # channel-wide parts: enable input and the 3.3 V option
    for name, x, y, r in (
        ("R1", 3.0, 64.0, 0),
        ("R2", 10.0, 64.0, 0),
        ("JP1", 17.0, 64.0, 0),
        ("C3", 24.0, 64.0, 0),
        ("C4", 5.0, 70.0, 0),
        ("C5", 12.0, 70.0, 0),
        ("U1", 19.0, 70.0, 0),
        ("F3", 33.0, 70.0, 90),
        ("D5", 40.0, 64.0, 90),
    ):
        local[name] = (x, y + dy, r)
    out = {}
    for ref, (x, y, r) in local.items():
        pre = "".join(c for c in ref if not c.isdigit())
        num = int("".join(c for c in ref if c.isdigit()))
        out[f"{pre}{(n + 1) * 100 + num}"] = (x0 + x, y0 + y, r)
    return out


def root_places() -> dict[str, tuple[float, float, float]]:
    y = 112.0
    return {
        "J3": (14.0, y, 270),
        "J4": (14.0, y + 24.0, 270),
        "F1": (26.0, y - 2.0, 0),
        "F2": (26.0, y + 8.0, 0),
        "F3": (26.0, y + 18.0, 0),
        "D1": (46.0, y - 2.0, 0),
        "D2": (46.0, y + 8.0, 0),
        "D3": (46.0, y + 18.0, 0),
        "C1": (56.0, y - 2.0, 0),
        "C3": (56.0, y + 10.0, 0),
        "C5": (56.0, y + 20.0, 0),
        "C2": (70.0, y - 2.0, 0),
        "C4": (70.0, y + 8.0, 0),
        "C6": (70.0, y + 18.0, 0),
        "A1": (148.0, y + 16.0, 90),  # USB end at the right board edge
        "D4": (95.0, y - 6.0, 0),
        "JP5": (134.0, y + 6.0, 90),
        "C10": (134.0, y + 14.0, 0),
    }


def place(board: pcbnew.BOARD, comps: dict[str, dict[str, str]]) -> dict[str, pcbnew.FOOTPRINT]:
    where = root_places()
    for n in range(4):
        where.update(channel_places(n))
    fps = {}
    for ref, c in sorted(comps.items()):
        if ref not in where:
            sys.exit(f"gen_pcb: no place for {ref}")
        lib, name = c["footprint"].split(":")
        fp = pcbnew.FootprintLoad(str(FPLIB / f"{lib}.pretty"), name)
        if fp is None:
            sys.exit(f"gen_pcb: footprint {c['footprint']} of {ref} not in {FPLIB}")
        fp.SetReference(ref)
        fp.SetValue(c["value"])
        fp.SetFPID(pcbnew.LIB_ID(lib, name))
        fp.SetPath(pcbnew.KIID_PATH(c["path"]))  # links it to its schematic symbol
        x, y, rot = where[ref]
        fp.SetPosition(pcbnew.wxPointMM(x, y))
        fp.SetOrientationDegrees(rot)
        board.Add(fp)
        fps[ref] = fp
    return fps


def assign_nets(
    board: pcbnew.BOARD, fps: dict[str, pcbnew.FOOTPRINT], nets: dict[str, list[tuple[str, str]]]
) -> None:
    for name, nodes in sorted(nets.items()):
        ni = pcbnew.NETINFO_ITEM(board, name)
        board.Add(ni)
        for ref, pin in nodes:
            pads = [p for p in fps[ref].Pads() if p.GetNumber() == pin]
            if not pads:
                sys.exit(
                    f"gen_pcb: {ref} ({fps[ref].GetFPID().GetUniStringLibId()}) has no pad {pin}"
                )
            for p in pads:
                p.SetNet(ni)


def outline_and_holes(board: pcbnew.BOARD) -> None:
    pts = [(0, 0), (BOARD_W, 0), (BOARD_W, BOARD_H), (0, BOARD_H)]
    for (x1, y1), (x2, y2) in zip(pts, pts[1:] + pts[:1], strict=True):
        seg = pcbnew.PCB_SHAPE(board)
        seg.SetShape(pcbnew.SHAPE_T_SEGMENT)
        seg.SetStart(pcbnew.wxPointMM(x1, y1))
        seg.SetEnd(pcbnew.wxPointMM(x2, y2))
        seg.SetLayer(pcbnew.Edge_Cuts)
        seg.SetWidth(int(0.1 * MM))
        board.Add(seg)
    for i, (x, y) in enumerate(
        ((4.0, 4.0), (BOARD_W - 4, 4.0), (4.0, BOARD_H - 4), (BOARD_W - 4, BOARD_H - 4))
    ):
        fp = pcbnew.FootprintLoad(str(FPLIB / "MountingHole.pretty"), "MountingHole_3.2mm_M3")
        fp.SetReference(f"H{i + 1}")
        fp.SetFPID(pcbnew.LIB_ID("MountingHole", "MountingHole_3.2mm_M3"))
        fp.SetPosition(pcbnew.wxPointMM(x, y))
        fp.Reference().SetVisible(False)
        board.Add(fp)


def silk_text(
    board: pcbnew.BOARD,
    text: str,
    x: float,
    y: float,
    size: float = 1.5,
    layer: int = pcbnew.F_SilkS,
) -> None:
    t = pcbnew.PCB_TEXT(board)
    t.SetText(text)
    t.SetPosition(pcbnew.wxPointMM(x, y))
    t.SetLayer(layer)
    t.SetTextSize(pcbnew.wxSizeMM(size, size))
    t.SetTextThickness(int(size * 0.15 * MM))
    if layer == pcbnew.B_SilkS:
        t.SetMirrored(True)
    board.Add(t)


def silkscreen(board: pcbnew.BOARD) -> None:
    for n in range(4):
        x0 = COL_X0 + COL_W * n
        silk_text(board, f"CH{n}", x0 + 36.0, COL_Y0 + 4.0, 2.5)
        silk_text(board, "+12V GND +5V GND +3V3", x0 + 14.2, COL_Y0 + 15.5, 1.0)
        silk_text(board, f"CH{n} EN=D{4 + n} SNS=A{n}", x0 + 36.0, COL_Y0 + 8.0, 1.0)
    silk_text(board, "J3 IN: +12V GND GND +5V  J4: +3V3 GND", 24.0, 102.5, 1.0)
    silk_text(board, "powerfault-rig 4-ch power board rev A", 108.0, 130.0, 1.2)
    silk_text(board, "EN HIGH = ON. JP1 1-2 = ON in reset", 108.0, 133.0, 1.0)
    silk_text(board, "powerfault-rig power board rev A (bottom)", 108.0, 138.0, 1.5, pcbnew.B_SilkS)


def tidy_references(board: pcbnew.BOARD) -> None:
    """move each reference where it overlaps no other footprint; hide it where there is no room"""
    boxes = [fp.GetBoundingBox(False, False) for fp in board.GetFootprints()]
    boxes += [d.GetBoundingBox() for d in board.GetDrawings() if isinstance(d, pcbnew.PCB_TEXT)]
    inside = pcbnew.EDA_RECT(
        pcbnew.wxPointMM(0.5, 0.5), pcbnew.wxSizeMM(BOARD_W - 1.0, BOARD_H - 1.0)
    )
    for fp in board.GetFootprints():
        ref = fp.Reference()
        if not ref.IsVisible():
            continue
        own = fp.GetBoundingBox(False, False)
        pos = fp.GetPosition()
        w = own.GetWidth() / 2 + 0.3 * MM
        cands = [
            ref.GetPosition(),
            pcbnew.wxPoint(pos.x, own.GetBottom() + int(0.9 * MM)),
            pcbnew.wxPoint(pos.x, own.GetTop() - int(0.9 * MM)),
        ]
        cands += [
            pcbnew.wxPoint(own.GetRight() + int(w), pos.y),
            pcbnew.wxPoint(own.GetLeft() - int(w), pos.y),
        ]
        for c in cands:
            ref.SetPosition(c)
            tb = ref.GetBoundingBox()
            if inside.Contains(tb) and not any(tb.Intersects(b) for b in boxes):
                boxes.append(tb)
                break
        else:
            ref.SetVisible(False)


def design_rules(board: pcbnew.BOARD) -> None:
    ds = board.GetDesignSettings()
    ds.m_TrackMinWidth = int(FAB_MIN_TRACK * MM)
    ds.m_MinClearance = int(FAB_MIN_CLEARANCE * MM)
    ds.m_MinThroughDrill = int(FAB_MIN_DRILL * MM)
    ds.m_ViasMinSize = int(0.6 * MM)
    ds.m_ViasMinAnnularWidth = int(0.15 * MM)
    ds.m_HoleToHoleMin = int(0.25 * MM)
    ds.m_CopperEdgeClearance = int(0.3 * MM)
    default = ds.GetNetClasses().GetDefault()
    default.SetClearance(int(FAB_MIN_CLEARANCE * MM))
    default.SetTrackWidth(int(SIGNAL_W * MM))
    default.SetViaDiameter(int(VIA_SIGNAL[0] * MM))
    default.SetViaDrill(int(VIA_SIGNAL[1] * MM))


def gnd_zones(path: str) -> None:
    """the pours on a board loaded from file (ZONE_FILLER crashes on a board built in memory)"""
    board = pcbnew.LoadBoard(path)
    gnd = board.FindNet("GND")
    for layer, prio in ((pcbnew.B_Cu, 0), (pcbnew.F_Cu, 0)):
        z = pcbnew.ZONE(board)
        z.SetLayer(layer)
        z.SetNet(gnd)
        z.SetPriority(prio)
        z.SetLocalClearance(int(0.3 * MM))
        z.SetMinThickness(int(0.25 * MM))
        z.SetPadConnection(pcbnew.ZONE_CONNECTION_THERMAL)
        z.SetThermalReliefGap(int(0.4 * MM))
        z.SetThermalReliefSpokeWidth(int(0.5 * MM))
        z.SetIsFilled(False)
        ol = z.Outline()
        ol.NewOutline()
        m = 0.5
        for x, y in ((m, m), (BOARD_W - m, m), (BOARD_W - m, BOARD_H - m), (m, BOARD_H - m)):
            ol.Append(int(x * MM), int(y * MM))
        board.Add(z)
    board.BuildConnectivity()
    pcbnew.ZONE_FILLER(board).Fill(board.Zones())
    pcbnew.SaveBoard(path, board)


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit("usage: gen_pcb.py NETLIST.net OUT.kicad_pcb")
    comps, nets = read_netlist(Path(argv[1]))
    board = pcbnew.BOARD()
    design_rules(board)
    outline_and_holes(board)
    fps = place(board, comps)
    assign_nets(board, fps, nets)
    silkscreen(board)
    tidy_references(board)
    if os.environ.get("GEN_PCB_PLACE_ONLY"):
        pcbnew.SaveBoard(argv[2], board)
        return
    grid = Grid(board, BOARD_W, BOARD_H, pitch=0.25, clearance=ROUTE_CLEARANCE)
    router = Router(
        board,
        grid,
        net_width,
        BIG_PAD,
        VIA_SIGNAL,
        VIA_POWER,
        TRUNK_NETS | {n for n in nets if n.split("/")[-1] in CHANNEL_POWER},
    )
    # nets on fine-pitch pads (the WSON load switch) first, while they can still get out
    signal = [n for n in nets if n != "GND" and len(nets[n]) > 1]
    fine = [
        n
        for n in signal
        if any(min(fps[r].FindPadByNumber(p).GetSize()) < 0.3 * MM for r, p in nets[n])
    ]
    fine_pads = {
        (r, p)
        for r, p in nets.get("GND", [])
        if min(fps[r].FindPadByNumber(p).GetSize()) < 0.3 * MM
    }
    failed = router.ground_vias("GND", only=fine_pads)
    failed += router.route_all(fine)
    failed += router.ground_vias("GND")
    failed += router.route_all([n for n in signal if n not in fine])
    print(f"gen_pcb: narrowed {router.narrowed}", file=sys.stderr)
    pro = Path(argv[2]).with_suffix(".kicad_pro")
    before = pro.read_text() if pro.exists() else None
    pcbnew.SaveBoard(argv[2], board)
    gnd_zones(argv[2])
    if before is not None:  # SaveBoard rewrote the project file: keep its schematic part
        old, new = json.loads(before), json.loads(pro.read_text())
        old["board"], old["net_settings"] = new["board"], new["net_settings"]
        pro.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")
    print(
        f"gen_pcb: {len(fps)} footprints, {len(router.tracks)} track segments, "
        f"{router.vias} vias; unrouted: {failed}"
    )


if __name__ == "__main__":
    main(sys.argv)
