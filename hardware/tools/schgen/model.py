"""A schematic sheet described in Python: parts with their nets, stable uuids, library symbols."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import ksch
from ksch import Quoted as Q

LIBDIR = Path("/usr/share/kicad/symbols")
HARDWARE = Path(__file__).resolve().parent.parent.parent  # hardware/, beside tools/
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
            path = HARDWARE / "powerfault.kicad_sym"
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


# footprints the design uses again and again
FP_R = "Resistor_SMD:R_0805_2012Metric"
FP_R1206 = "Resistor_SMD:R_1206_3216Metric"
FP_C = "Capacitor_SMD:C_0805_2012Metric"
FP_SOT23 = "Package_TO_SOT_SMD:SOT-23"
FP_DPAK = "Package_TO_SOT_SMD:TO-252-2"
FP_SMA = "Diode_SMD:D_SMA"
FP_2920 = "Fuse:Fuse_2920_7451Metric"
