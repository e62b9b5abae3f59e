"""Render a KiCad 6 schematic (.kicad_sch) to SVG without KiCad.

Debian bookworm ships KiCad 6.0, which has no command-line plotter (kicad-cli arrived in 7.0), so
this small renderer draws what the file says: library graphics embedded in the schematic, pins,
wires, junctions, labels, power symbols, sheet symbols, text notes and a title block. The
.kicad_sch stays the only source; run `make -C hardware` to refresh the images.

usage: render_sch.py IN.kicad_sch OUT.svg [--ref-note TEXT]
"""

from __future__ import annotations

import math
import sys
from html import escape
from pathlib import Path

import ksch

PAPER = {"A4": (297.0, 210.0), "A3": (420.0, 297.0), "A2": (594.0, 420.0)}
COL_BODY = "#840000"
COL_WIRE = "#008400"
COL_PIN = "#840000"
COL_TEXT = "#000084"
COL_LABEL = "#000000"
COL_FILL = "#ffffc2"
FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"
STROKE = 'stroke-linejoin="round" stroke-linecap="round"'


class Svg:
    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.out: list[str] = []

    def line(
        self, pts: list[tuple[float, float]], col: str, width: float = 0.15, fill: str = "none"
    ) -> None:
        d = " ".join(f"{x:.3f},{y:.3f}" for x, y in pts)
        tag = "polygon" if fill != "none" else "polyline"
        self.out.append(
            f'<{tag} points="{d}" fill="{fill}" stroke="{col}" stroke-width="{width}" {STROKE}/>'
        )

    def circle(
        self, x: float, y: float, r: float, col: str, width: float = 0.15, fill: str = "none"
    ) -> None:
        self.out.append(
            f'<circle cx="{x:.3f}" cy="{y:.3f}" r="{r:.3f}" fill="{fill}" '
            f'stroke="{col}" stroke-width="{width}"/>'
        )

    def path(self, d: str, col: str, width: float = 0.15, fill: str = "none") -> None:
        self.out.append(f'<path d="{d}" fill="{fill}" stroke="{col}" stroke-width="{width}"/>')

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: float,
        col: str,
        anchor: str = "start",
        valign: str = "bottom",
        angle: float = 0,
        bold: bool = False,
    ) -> None:
        lines = s.split("\n")
        fs = size * 1.45
        lh = size * 1.7
        if valign == "top":
            y0 = y + size
        elif valign == "center":
            y0 = y + size / 2 - (len(lines) - 1) * lh / 2
        else:
            y0 = y - (len(lines) - 1) * lh
        rot = f' transform="rotate({-angle:.0f} {x:.3f} {y:.3f})"' if angle else ""
        weight = ' font-weight="bold"' if bold else ""
        spans = "".join(
            f'<tspan x="{x:.3f}" y="{y0 + i * lh:.3f}">{escape(t)}</tspan>'
            for i, t in enumerate(lines)
        )
        self.out.append(
            f'<text font-family="{FONT}" font-size="{fs:.3f}" fill="{col}" '
            f'text-anchor="{anchor}"{weight} xml:space="preserve"{rot}>{spans}</text>'
        )

    def dump(self, scale: float = 4.0) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{self.w * scale:.0f}" height="{self.h * scale:.0f}" '
            f'viewBox="0 0 {self.w} {self.h}">\n<rect width="100%" height="100%" fill="white"/>\n'
        )
        return head + "\n".join(self.out) + "\n</svg>\n"


def justify(node: ksch.Sexp) -> tuple[str, str]:
    eff = ksch.find(node, "effects")
    h, v = "middle", "center"
    if eff is not None:
        j = ksch.find(eff, "justify")
        if j is not None:
            for k in j[1:]:
                h = {"left": "start", "right": "end"}.get(str(k), h)
                v = {"top": "top", "bottom": "bottom"}.get(str(k), v)
    return h, v


def font_size(node: ksch.Sexp, default: float = 1.27) -> float:
    eff = ksch.find(node, "effects")
    if eff is not None:
        f = ksch.find(eff, "font")
        if f is not None:
            sz = ksch.find(f, "size")
            if sz is not None:
                return float(sz[1])
    return default


def xy(node: ksch.Sexp, key: str) -> tuple[float, float]:
    n = ksch.find(node, key)
    assert n is not None
    return float(n[1]), float(n[2])


def stroke_w(node: ksch.Sexp) -> float:
    st = ksch.find(node, "stroke")
    if st is not None:
        w = ksch.find(st, "width")
        if w is not None and float(w[1]) > 0:
            return float(w[1])
    return 0.1524


def fill_of(node: ksch.Sexp) -> str:
    f = ksch.find(node, "fill")
    if f is not None:
        t = ksch.find(f, "type")
        if t is not None:
            return {"outline": COL_BODY, "background": COL_FILL}.get(str(t[1]), "none")
    return "none"


def draw_symbol(svg: Svg, lib: ksch.LibSymbol, t: ksch.Transform, unit: int, power: bool) -> None:
    node = lib.node
    pn = ksch.find(node, "pin_names")
    names_hidden = pn is not None and "hide" in pn
    name_off = 0.508
    if pn is not None:
        off = ksch.find(pn, "offset")
        if off is not None:
            name_off = float(off[1])
    pnum = ksch.find(node, "pin_numbers")
    numbers_hidden = (pnum is not None and "hide" in pnum) or power
    for sub in ksch.find_all(node, "symbol"):
        parts = str(sub[1]).rsplit("_", 2)
        su, sc = int(parts[-2]), int(parts[-1])
        if su not in (0, unit) or sc not in (0, 1):
            continue
        for g in sub[2:]:
            if not isinstance(g, list):
                continue
            kind = g[0]
            col = COL_BODY
            if kind == "rectangle":
                (x1, y1), (x2, y2) = xy(g, "start"), xy(g, "end")
                pts = [
                    t.apply(x1, y1),
                    t.apply(x2, y1),
                    t.apply(x2, y2),
                    t.apply(x1, y2),
                    t.apply(x1, y1),
                ]
                svg.line(pts, col, stroke_w(g), fill_of(g))
            elif kind == "polyline":
                pts = [t.apply(float(p[1]), float(p[2])) for p in ksch.find(g, "pts")[1:]]  # type: ignore[index]
                svg.line(pts, col, stroke_w(g), fill_of(g))
            elif kind == "circle":
                cx, cy = t.apply(*xy(g, "center"))
                r = float(ksch.find(g, "radius")[1])  # type: ignore[index]
                svg.circle(cx, cy, r, col, stroke_w(g), fill_of(g))
            elif kind == "arc":
                a, m, b = (t.apply(*xy(g, k)) for k in ("start", "mid", "end"))
                draw_arc(svg, a, m, b, col, stroke_w(g), fill_of(g))
            elif kind == "text":
                x, y, _ = ksch.at(g)
                sx, sy = t.apply(x, y)
                svg.text(sx, sy, str(g[1]), font_size(g), col, "middle", "center")
            elif kind == "pin":
                draw_pin(svg, g, t, names_hidden, name_off, numbers_hidden)


def draw_arc(
    svg: Svg,
    a: tuple[float, float],
    m: tuple[float, float],
    b: tuple[float, float],
    col: str,
    w: float,
    fill: str,
) -> None:
    ax, ay = a
    bx, by = b
    mx, my = m
    d = 2 * (ax * (my - by) + mx * (by - ay) + bx * (ay - my))
    if abs(d) < 1e-9:
        svg.line([a, b], col, w)
        return
    ux = (
        (ax**2 + ay**2) * (my - by) + (mx**2 + my**2) * (by - ay) + (bx**2 + by**2) * (ay - my)
    ) / d
    uy = (
        (ax**2 + ay**2) * (bx - mx) + (mx**2 + my**2) * (ax - bx) + (bx**2 + by**2) * (mx - ax)
    ) / d
    r = math.hypot(ax - ux, ay - uy)
    cross = (mx - ax) * (by - ay) - (my - ay) * (bx - ax)
    sweep = 1 if cross > 0 else 0
    ang = lambda p: math.atan2(p[1] - uy, p[0] - ux)  # noqa: E731
    span = (ang(b) - ang(a)) % (2 * math.pi)
    if not sweep:
        span = 2 * math.pi - span
    large = 1 if span > math.pi else 0
    svg.path(
        f"M {ax:.3f} {ay:.3f} A {r:.3f} {r:.3f} 0 {large} {sweep} {bx:.3f} {by:.3f}", col, w, fill
    )


def draw_pin(
    svg: Svg,
    g: ksch.Sexp,
    t: ksch.Transform,
    names_hidden: bool,
    name_off: float,
    numbers_hidden: bool,
) -> None:
    if "hide" in g:
        return
    x, y, a = ksch.at(g)
    length = float(ksch.find(g, "length")[1])  # type: ignore[index]
    dx, dy = math.cos(math.radians(a)), math.sin(math.radians(a))
    p0 = t.apply(x, y)
    p1 = t.apply(x + dx * length, y + dy * length)
    svg.line([p0, p1], COL_PIN, 0.1524)
    shape = str(g[2]) if len(g) > 2 else "line"
    if shape == "inverted":
        svg.circle(
            p1[0] + (p0[0] - p1[0]) * 0.5 / max(length, 0.01),
            p1[1] + (p0[1] - p1[1]) * 0.5 / max(length, 0.01),
            0.5,
            COL_PIN,
        )
    sdir = t.direction(a)  # sheet direction from connection point into the body
    vertical = round(sdir) % 180 == 90
    name = str(ksch.find(g, "name")[1])  # type: ignore[index]
    number = str(ksch.find(g, "number")[1])  # type: ignore[index]
    ux, uy = (p1[0] - p0[0]) / max(length, 1e-6), (p1[1] - p0[1]) / max(length, 1e-6)
    size = 1.27
    if not names_hidden and name not in ("~", ""):
        label = name.replace("~{", "/").replace("}", "")
        if name_off > 0:
            tx, ty = p1[0] + ux * name_off, p1[1] + uy * name_off
            if vertical:
                anchor = "start" if uy < 0 else "end"
                svg.text(tx, ty, label, size, COL_TEXT, anchor, "center", angle=90)
            else:
                anchor = "start" if ux > 0 else "end"
                svg.text(tx, ty, label, size, COL_TEXT, anchor, "center")
        else:
            mx, my = (p0[0] + p1[0]) / 2, (p0[1] + p1[1]) / 2
            svg.text(
                mx, my - 0.4, label, size, COL_TEXT, "middle", "bottom", angle=90 if vertical else 0
            )
    if not numbers_hidden:
        mx, my = (p0[0] + p1[0]) / 2, (p0[1] + p1[1]) / 2
        if vertical:
            svg.text(mx - 0.4, my, number, size * 0.9, COL_PIN, "middle", "bottom", angle=90)
        else:
            svg.text(mx, my - 0.4, number, size * 0.9, COL_PIN, "middle", "bottom")


def render(path: Path, ref_note: str = "") -> str:
    sch = ksch.parse(path.read_text())
    paper = str(ksch.find(sch, "paper")[1])  # type: ignore[index]
    w, h = PAPER.get(paper, PAPER["A3"])
    svg = Svg(w, h)
    draw_frame(svg, sch, path, ref_note)
    libs = ksch.lib_symbols(sch)
    draw_wiring(svg, sch)
    for kind in ("label", "hierarchical_label", "global_label"):
        for lab in ksch.find_all(sch, kind):
            if kind == "label":
                draw_label(svg, lab)
            else:
                draw_port_label(svg, lab)
    for tnode in ksch.find_all(sch, "text"):
        x, y, a = ksch.at(tnode)
        anchor, valign = justify(tnode)
        svg.text(x, y, str(tnode[1]), font_size(tnode), COL_TEXT, anchor, valign, angle=a)
    for sym in ksch.find_all(sch, "symbol"):
        lib_id = str(ksch.find(sym, "lib_id")[1])  # type: ignore[index]
        lib = libs.get(lib_id)
        if lib is not None:
            draw_instance(svg, sym, lib)
    for sh in ksch.find_all(sch, "sheet"):
        draw_sheet(svg, sh)
    return svg.dump()


def draw_frame(svg: Svg, sch: ksch.Sexp, path: Path, ref_note: str) -> None:
    """The page frame and the title block."""
    w, h = svg.w, svg.h
    svg.line([(5, 5), (w - 5, 5), (w - 5, h - 5), (5, h - 5), (5, 5)], "#840000", 0.25)
    tb = ksch.find(sch, "title_block")
    title = str(ksch.find(tb, "title")[1]) if tb is not None else path.stem  # type: ignore[index]
    bx, by = w - 115, h - 25
    svg.line([(bx, h - 5), (bx, by), (w - 5, by)], "#840000", 0.25)
    svg.text(bx + 2, by + 2, title, 2.0, COL_TEXT, "start", "top", bold=True)
    svg.text(
        bx + 2,
        by + 8,
        f"file: {path.name}   rev A   powerfault-rig, hardware/",
        1.4,
        COL_TEXT,
        "start",
        "top",
    )
    note = ref_note or "rendered from the .kicad_sch by hardware/tools/render_sch.py"
    svg.text(bx + 2, by + 12, note, 1.2, COL_TEXT, "start", "top")


def draw_wiring(svg: Svg, sch: ksch.Sexp) -> None:
    """Wires, junction dots and no-connect crosses."""
    for wnode in ksch.find_all(sch, "wire"):
        pts = [(float(p[1]), float(p[2])) for p in ksch.find(wnode, "pts")[1:]]  # type: ignore[index]
        svg.line(pts, COL_WIRE, 0.1524)
    for j in ksch.find_all(sch, "junction"):
        x, y, _ = ksch.at(j)
        svg.circle(x, y, 0.5, COL_WIRE, 0.1, COL_WIRE)
    for nc in ksch.find_all(sch, "no_connect"):
        x, y, _ = ksch.at(nc)
        svg.line([(x - 0.6, y - 0.6), (x + 0.6, y + 0.6)], "#0000c8", 0.15)
        svg.line([(x - 0.6, y + 0.6), (x + 0.6, y - 0.6)], "#0000c8", 0.15)


def draw_label(svg: Svg, lab: ksch.Sexp) -> None:
    """A local net label: its text only."""
    x, y, a = ksch.at(lab)
    text = str(lab[1])
    size = font_size(lab)
    vertical = round(a) % 180 == 90
    anchor = "start" if round(a) in (0, 90) else "end"
    if vertical:
        svg.text(x - 0.3, y, text, size, COL_LABEL, anchor, "bottom", angle=90)
    else:
        svg.text(x, y - 0.3, text, size, COL_LABEL, anchor, "bottom")


def draw_port_label(svg: Svg, lab: ksch.Sexp) -> None:
    """A hierarchical or global label: the port shape and its text beside it."""
    x, y, a = ksch.at(lab)
    text = str(lab[1])
    size = font_size(lab)
    d = 1 if round(a) in (0, 90) else -1
    sgn = -1 if round(a) in (90, 270) else 0
    if sgn:
        svg.text(
            x,
            y - d * 2.0,
            text,
            size,
            "#840084",
            "end" if d > 0 else "start",
            "center",
            angle=90,
        )
    else:
        svg.line(
            [
                (x, y),
                (x + d * 1.0, y - 0.8),
                (x + d * 2.0, y - 0.8),
                (x + d * 2.0, y + 0.8),
                (x + d * 1.0, y + 0.8),
                (x, y),
            ],
            "#840084",
            0.15,
        )
        svg.text(
            x + d * 2.6,
            y,
            text,
            size,
            "#840084",
            "start" if d > 0 else "end",
            "center",
            bold=True,
        )


def draw_instance(svg: Svg, sym: ksch.Sexp, lib: ksch.LibSymbol) -> None:
    """A placed symbol: its graphics, visible Reference and Value, and a cross if DNP."""
    t = ksch.instance_transform(sym)
    unit_n = ksch.find(sym, "unit")
    power = "power" in lib.node
    draw_symbol(svg, lib, t, int(unit_n[1]) if unit_n else 1, power)
    for name, p in ksch.props(sym).items():
        if ksch.hidden(p) or name not in ("Reference", "Value"):
            continue
        x, y, a = ksch.at(p)
        anchor, valign = justify(p)
        svg.text(
            x,
            y,
            str(p[2]),
            font_size(p),
            COL_TEXT if name == "Reference" else "#006464",
            anchor,
            valign,
            angle=a,
        )
    dnp = ksch.props(sym).get("DNP")
    if dnp is not None:
        x0, y0 = t.x, t.y
        svg.line([(x0 - 3, y0 - 3), (x0 + 3, y0 + 3)], "#c80000", 0.25)
        svg.line([(x0 - 3, y0 + 3), (x0 + 3, y0 - 3)], "#c80000", 0.25)


def draw_sheet(svg: Svg, sh: ksch.Sexp) -> None:
    """A sheet symbol: its box, name, file and pins."""
    x, y, _ = ksch.at(sh)
    sw, shh = xy(sh, "size")
    svg.line(
        [(x, y), (x + sw, y), (x + sw, y + shh), (x, y + shh), (x, y)],
        "#840084",
        0.3,
        "#fffff0",
    )
    pr = ksch.props(sh)
    svg.text(x, y - 0.7, str(pr["Sheet name"][2]), 1.5, "#840084", "start", "bottom", bold=True)
    svg.text(x, y + shh + 0.6, "file: " + str(pr["Sheet file"][2]), 1.2, "#840084", "start", "top")
    for pin in ksch.find_all(sh, "pin"):
        px, py, _ = ksch.at(pin)
        svg.line([(px, py), (px + 1.5, py - 0.8), (px + 1.5, py + 0.8), (px, py)], "#840084", 0.15)
        svg.text(px + 2.2, py, str(pin[1]), 1.27, "#840084", "start", "center")


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit(__doc__)
    note = argv[argv.index("--ref-note") + 1] if "--ref-note" in argv else ""
    Path(argv[2]).write_text(render(Path(argv[1]), note))


if __name__ == "__main__":
    main(sys.argv)
