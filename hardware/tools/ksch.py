"""Minimal KiCad 6 schematic reader: s-expressions, symbol geometry and pin positions.

Shared by render_sch.py (drawing) and bom.py (parts list). Pure Python, no KiCad needed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

Sexp = list[Any]

_TOKEN = re.compile(r'\s*(?:(\()|(\))|"((?:[^"\\]|\\.)*)"|([^\s()"]+))')


def parse(text: str) -> Sexp:
    """Parse one s-expression; strings stay str, atoms stay str (callers convert)."""
    stack: list[Sexp] = [[]]
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            raise ValueError(f"bad s-expression at {pos}")
        pos = m.end()
        if m.group(1):
            stack.append([])
        elif m.group(2):
            done = stack.pop()
            stack[-1].append(done)
        elif m.group(3) is not None:
            stack[-1].append(Quoted(_unescape(m.group(3))))
        elif m.group(4) is not None:
            stack[-1].append(m.group(4))
    return stack[0][0]


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


class Quoted(str):
    """A string that was quoted in the file (kept distinct so it is re-quoted on output)."""


def dump(node: Any, indent: int = 0) -> str:
    """Serialise back to KiCad-style text (nested lists on their own lines)."""
    if isinstance(node, Quoted):
        esc = node.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return '"' + esc + '"'
    if isinstance(node, str):
        return node
    if isinstance(node, (int, float)):
        return fmt_num(node)
    parts = [dump(x, indent + 1) for x in node]
    flat = "(" + " ".join(parts) + ")"
    if len(flat) < 100 and not any(isinstance(x, list) and _depth(x) > 2 for x in node):
        return flat
    head = []
    rest = []
    for x in node:
        (rest if isinstance(x, list) or rest else head).append(x)
    pad = "  " * (indent + 1)
    out = "(" + " ".join(dump(x, indent + 1) for x in head)
    for x in rest:
        out += "\n" + pad + dump(x, indent + 1)
    return out + "\n" + "  " * indent + ")"


def _depth(node: Any) -> int:
    if not isinstance(node, list):
        return 0
    return 1 + max((_depth(x) for x in node), default=0)


def fmt_num(v: float) -> str:
    s = f"{v:.4f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def find(node: Sexp, key: str) -> Sexp | None:
    for x in node:
        if isinstance(x, list) and x and x[0] == key:
            return x
    return None


def find_all(node: Sexp, key: str) -> list[Sexp]:
    return [x for x in node if isinstance(x, list) and x and x[0] == key]


def props(node: Sexp) -> dict[str, Sexp]:
    return {str(p[1]): p for p in find_all(node, "property")}


def at(node: Sexp) -> tuple[float, float, float]:
    a = find(node, "at")
    if a is None:
        return (0.0, 0.0, 0.0)
    ang = float(a[3]) if len(a) > 3 else 0.0
    return (float(a[1]), float(a[2]), ang)


def hidden(node: Sexp) -> bool:
    eff = find(node, "effects")
    return eff is not None and "hide" in eff


@dataclass
class Transform:
    """Library (y up) to sheet (y down) placement of one symbol instance."""

    x: float
    y: float
    angle: float = 0.0
    mirror: str = ""

    def apply(self, lx: float, ly: float) -> tuple[float, float]:
        # KiCad: library y axis points up; the sheet's points down.
        px, py = lx, -ly
        if self.mirror == "x":  # mirror about the X axis (flip vertically)
            py = -py
        elif self.mirror == "y":  # mirror about the Y axis (flip horizontally)
            px = -px
        t = math.radians(self.angle)
        c, s = round(math.cos(t)), round(math.sin(t))
        rx = px * c + py * s
        ry = -px * s + py * c
        return (self.x + rx, self.y + ry)

    def direction(self, lib_angle: float) -> float:
        """Sheet angle (degrees, y down, counter-clockwise on screen) of a library direction."""
        dx = math.cos(math.radians(lib_angle))
        dy = math.sin(math.radians(lib_angle))
        x0, y0 = self.apply(0, 0)
        x1, y1 = self.apply(dx, dy)
        return math.degrees(math.atan2(-(y1 - y0), x1 - x0)) % 360


@dataclass
class Pin:
    number: str
    name: str
    x: float  # library coordinates of the connection point
    y: float
    angle: float
    length: float
    etype: str
    hide: bool = False


@dataclass
class LibSymbol:
    name: str
    node: Sexp
    pins: list[Pin] = field(default_factory=list)


def lib_symbols(sch: Sexp) -> dict[str, LibSymbol]:
    out: dict[str, LibSymbol] = {}
    ls = find(sch, "lib_symbols")
    if ls is None:
        return out
    for sym in find_all(ls, "symbol"):
        entry = LibSymbol(str(sym[1]), sym)
        for sub in find_all(sym, "symbol"):
            for p in find_all(sub, "pin"):
                x, y, ang = at(p)
                length = float((find(p, "length") or [0, 0])[1])
                name = find(p, "name")
                number = find(p, "number")
                entry.pins.append(
                    Pin(
                        number=str(number[1]) if number else "",
                        name=str(name[1]) if name else "",
                        x=x,
                        y=y,
                        angle=ang,
                        length=length,
                        etype=str(p[1]),
                        hide="hide" in p,
                    )
                )
        out[entry.name] = entry
    return out


def instance_transform(sym: Sexp) -> Transform:
    x, y, ang = at(sym)
    m = find(sym, "mirror")
    return Transform(x, y, ang, str(m[1]) if m else "")
