"""Break a copy of the power-board layout in one named way (for
tests/hardware/test_hardware_board.py).

Run with Debian's /usr/bin/python3 (KiCad 6's pcbnew): board_mutations.py KIND BOARD.kicad_pcb
  cut-rail    delete the widest track of CH0's switched 12 V output
  overlap     move CH0's 12 V P-FET onto its 5 V neighbour
  swap-nets   swap the nets of two pads (R111 pins 1 and 2: the sense divider reversed)
  narrow-rail make CH1's 5 V output tracks signal-width
"""

from __future__ import annotations

import sys

import pcbnew


def main(kind: str, path: str) -> None:
    board = pcbnew.LoadBoard(path)
    tracks = [t for t in board.GetTracks() if t.GetClass() == "PCB_TRACK"]
    if kind == "cut-rail":
        rail = [t for t in tracks if t.GetNetname() == "/CH0/OUT12"]
        board.Delete(max(rail, key=lambda t: (t.GetWidth(), t.GetLength())))
    elif kind == "overlap":
        board.FindFootprintByReference("Q104").SetPosition(
            board.FindFootprintByReference("Q109").GetPosition()
        )
    elif kind == "swap-nets":
        fp = board.FindFootprintByReference("R111")
        a, b = fp.FindPadByNumber("1"), fp.FindPadByNumber("2")
        na, nb = a.GetNetCode(), b.GetNetCode()
        a.SetNetCode(nb)
        b.SetNetCode(na)
    elif kind == "narrow-rail":
        for t in tracks:
            if t.GetNetname() == "/CH1/OUT5":
                t.SetWidth(300_000)
    else:
        sys.exit(f"unknown mutation {kind}")
    pcbnew.SaveBoard(path, board)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
