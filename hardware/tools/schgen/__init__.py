"""The power-board schematic generator's parts (tools/gen_schematic.py is its entry point).

- model: a sheet described in Python (Part, Sheet), stable uuids, library symbols;
- build: a Sheet turned into a KiCad 6 .kicad_sch S-expression (stubs, labels, wires);
- channel, root: the design itself, the channel sheet (used 4x) and the root sheet.
"""
