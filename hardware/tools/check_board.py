"""Checks of the layout, run with Debian's /usr/bin/python3 (KiCad 6's pcbnew module).

check_board.py drc BOARD.kicad_pcb REPORT.rpt   KiCad's DRC with the board's rules: exit 1 on
                                                any violation or unconnected item
check_board.py lvs NETLIST.net BOARD.kicad_pcb  layout vs schematic: every footprint, value,
                                                footprint name and pad-to-net of the netlist
                                                exported from the schematic; exit 1 on any
                                                difference
check_board.py widths BOARD.kicad_pcb REPORT    the rail-current paths: with every power-net
                                                track narrower than its class removed, the
                                                current-carrying pads of each power net must
                                                still be connected (KiCad's connectivity)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pcbnew

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_pcb import BIG_PAD, CHANNEL_W, TRUNK_W, ipc2221_amps, net_width, read_netlist


def drc(board_path: str, report: str) -> int:
    board = pcbnew.LoadBoard(board_path)
    if not pcbnew.WriteDRCReport(board, report, pcbnew.EDA_UNITS_MILLIMETRES, True):
        print(f"drc: KiCad could not write {report}", file=sys.stderr)
        return 2
    text = Path(report).read_text()
    counts = {
        k: int(v)
        for v, k in re.findall(
            r"\*\* Found (\d+) (DRC violations|unconnected pads|Footprint errors) \*\*", text
        )
    }
    ds = board.GetDesignSettings()
    print(
        f"drc: {counts} (rules: track >= {ds.m_TrackMinWidth / 1e6} mm, clearance >= "
        f"{ds.m_MinClearance / 1e6} mm, drill >= {ds.m_MinThroughDrill / 1e6} mm)"
    )
    if len(counts) != 3 or any(counts.values()):
        for line in text.splitlines():
            if line.startswith("[") or line.lstrip().startswith("@"):
                print("  " + line.strip())
        return 1
    return 0


def board_pads(
    board: pcbnew.BOARD,
) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, str], str]]:
    fps = {}
    pads = {}
    for fp in board.GetFootprints():
        ref = fp.GetReference()
        if ref.startswith("H") and fp.GetFPID().GetLibNickname() == "MountingHole":
            continue
        fps[ref] = (
            fp.GetValue(),
            f"{fp.GetFPID().GetLibNickname()}:{fp.GetFPID().GetLibItemName()}",
        )
        for p in fp.Pads():
            if p.GetNumber():
                pads[(ref, p.GetNumber())] = p.GetNetname()
    return fps, pads


def lvs(netlist: str, board_path: str) -> int:
    comps, nets = read_netlist(Path(netlist))
    fps, pads = board_pads(pcbnew.LoadBoard(board_path))
    errors = []
    for ref in sorted(set(comps) | set(fps)):
        if ref not in fps:
            errors.append(f"{ref}: in the schematic, not on the board")
        elif ref not in comps:
            errors.append(f"{ref}: on the board, not in the schematic")
        elif (comps[ref]["value"], comps[ref]["footprint"]) != fps[ref]:
            errors.append(
                f"{ref}: schematic {comps[ref]['value']} {comps[ref]['footprint']}, "
                f"board {fps[ref][0]} {fps[ref][1]}"
            )
    want = {}
    for name, nodes in nets.items():
        for ref, pin in nodes:
            want[(ref, pin)] = name
    for key in sorted(set(want) | set(pads)):
        if key[0] not in comps or key[0] not in fps:
            continue
        w, h = want.get(key, ""), pads.get(key)
        if h is None:
            errors.append(
                f"{key[0]} pad {key[1]}: net {w} in the schematic, no such pad on the board"
            )
        elif w != h:
            errors.append(
                f"{key[0]} pad {key[1]}: schematic net {w or '(none)'}, board net {h or '(none)'}"
            )
    print(
        f"lvs: {len(comps)} components, {len(want)} schematic pins, {len(pads)} board pads, "
        f"{len(errors)} differences"
    )
    for e in errors[:50]:
        print("  " + e)
    return 1 if errors else 0


def widths(board_path: str, report: str) -> int:
    """Keep of each power net only its wide tracks, the vias on them and its current-carrying pads
    (at least BIG_PAD wide); KiCad's connectivity must still join them all."""
    board = pcbnew.LoadBoard(board_path)
    power = lambda net: net_width(net) > 0.5  # noqa: E731
    for fp in board.GetFootprints():
        for p in fp.Pads():
            if power(p.GetNetname()) and min(p.GetSize().x, p.GetSize().y) / 1e6 < BIG_PAD:
                p.SetNetCode(0)
    removed = 0
    ends: set[tuple[str, int, int]] = set()
    for t in list(board.GetTracks()):
        net = t.GetNetname()
        if t.GetClass() != "PCB_TRACK" or not power(net):
            continue
        if t.GetWidth() < net_width(net) * 1e6 - 1:
            board.Delete(t)
            removed += 1
        else:
            for pt in (t.GetStart(), t.GetEnd()):
                ends.add((net, pt.x, pt.y))
    for v in list(board.GetTracks()):
        at = (v.GetNetname(), v.GetPosition().x, v.GetPosition().y)
        if v.GetClass() == "PCB_VIA" and power(v.GetNetname()) and at not in ends:
            board.Delete(v)
    pcbnew.WriteDRCReport(board, report, pcbnew.EDA_UNITS_MILLIMETRES, True)
    lines = Path(report).read_text().splitlines()
    broken = []
    for i, line in enumerate(lines):
        if line.startswith("[unconnected_items]"):
            items = [x.strip() for x in lines[i + 1 : i + 4] if x.strip().startswith("@")]
            nets = re.findall(r"\[([^\]]+)\]", " ".join(items))
            if any(power(n) for n in nets):
                broken.append(" / ".join(items))
    print(
        f"widths: trunk {TRUNK_W} mm ({ipc2221_amps(TRUNK_W):.1f} A at 10 C on 1 oz, "
        f"{ipc2221_amps(TRUNK_W, 2):.1f} A on 2 oz), channel rails {CHANNEL_W} mm "
        f"({ipc2221_amps(CHANNEL_W):.2f} A at 10 C on 1 oz); {removed} narrower branches to "
        f"small pads set aside; {len(broken)} rail paths broken"
    )
    for b in broken[:30]:
        print("  " + b)
    return 1 if broken or ipc2221_amps(CHANNEL_W) < 2.0 else 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "widths":
        return widths(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "drc":
        return drc(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "lvs":
        return lvs(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
