"""Generate the first revision of the power-board schematic (KiCad 6 files) from a Python netlist.

Run once to (re)create hardware/powerboard.kicad_sch and hardware/channel.kicad_sch from the
description in schgen/ (channel.py, cell.py, root.py), using the symbols of Debian's
`kicad-symbols` package. After that the .kicad_sch files are the source of truth: edit them in
KiCad (or here and regenerate, not both). The renderer (render_sch.py) and the BOM script
(bom.py) read only the .kicad_sch files.

Every pin gets a short stub and a net label (or a power symbol); pins of a net that line up are
joined by a plain wire instead. Reference designators: root sheet as written, channel sheet
instances CH0..CH3 get 1xx, 2xx, 3xx, 4xx. schgen/__init__.py lists the generator's modules.
"""

from __future__ import annotations

from pathlib import Path

import ksch
from schgen.build import build, symbol_instances
from schgen.channel import channel_sheet
from schgen.root import root_sheet


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
