"""report.json: every figure of the record (`record.Report`, field for field), with each model's
per-cut lists (return times, delays, lost-after times) written a chunk at a time as they are made
(reports/render/deferred.py), never held whole."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from reports.analysis.record import Report
from reports.load.binned import BinnedReturns
from reports.load.counted import Counted
from reports.load.cuts import DelayPoints, StoredReturns
from reports.render import deferred

CHUNK = 8192  # list items made at a time

FORMAT = "rig-report/1"


def _clean(value: Any) -> Any:
    """JSON has no inf/nan: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, bytes):
        return None  # raw blobs stay in the store
    return value


def to_json(report: Report, generated_at: float) -> str:
    return deferred.join(json_text(report, generated_at))


def json_text(report: Report, generated_at: float, extra: dict[str, Any] | None = None) -> str:
    """report.json with each model's per-cut lists (return_ms, delays) as tokens
    (reports/render/deferred.py): written as they are made, never held whole. `extra`: keys of
    sections of their own modules (the window of vulnerability), absent when empty."""
    big: dict[str, Callable[[int], Iterator[str]]] = {}
    models = []
    for m in report.models:
        marks = {name: f"@@per-cut:{len(big) + i}@@" for i, name in enumerate(PER_CUT)}
        big[marks["return_ms"]] = functools.partial(_float_items, m.return_ms)
        big[marks["delays"]] = functools.partial(_delay_items, m.delays)
        big[marks["lost_after_ack_ms"]] = functools.partial(_counted_items, m.lost_after_ack_ms)
        big[marks["lost_after_flush_ms"]] = functools.partial(_counted_items, m.lost_after_flush_ms)
        models.append(dataclasses.replace(m, **marks))  # type: ignore[arg-type]
    plain = dataclasses.replace(report, models=models)
    body = {"format": FORMAT, "generated_at": generated_at, **dataclasses.asdict(plain)}
    for model, m in zip(body["models"], report.models, strict=True):
        if model.get("sequential") is None:  # a model without a sequential plan: no key
            model.pop("sequential", None)
        if isinstance(m.return_ms, BinnedReturns):  # the central report: bins, no list
            model["return_histogram"] = m.return_ms.histogram.as_json()
    body.update(extra or {})
    text = json.dumps(_clean(body), indent=1, sort_keys=False)
    out, at = [], 0
    for match in re.finditer('"(@@per-cut:[0-9]+@@)"', text):
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        depth = len(line) - len(line.lstrip(" "))
        out.append(text[at : match.start()])
        out.append(deferred.defer(functools.partial(_json_list, big[match.group(1)], depth)))
        at = match.end()
    out.append(text[at:])
    return "".join(out)


PER_CUT = ("return_ms", "delays", "lost_after_ack_ms", "lost_after_flush_ms")


def _json_list(items: Callable[[int], Iterator[str]], depth: int) -> Iterator[str]:
    """A JSON list as json.dumps(indent=1) writes it at `depth`, its items from `items(depth)`."""
    first = True
    for piece in items(depth + 1):
        yield ("[\n" if first else ",\n") + piece
        first = False
    yield "[]" if first else "\n" + " " * depth + "]"


def _float_items(values: npt.NDArray[np.float64] | StoredReturns, depth: int) -> Iterator[str]:
    pad = " " * depth
    pieces = values.pieces() if isinstance(values, StoredReturns) else [values]
    for piece in pieces:  # (an empty piece: nothing, no separator)
        for start in range(0, len(piece), CHUNK):
            yield ",\n".join(pad + _number(v) for v in piece[start : start + CHUNK].tolist())


def _counted_items(values: Counted, depth: int) -> Iterator[str]:
    """Each distinct value with its count, as the list [value, count] (docs/decisions.md,
    "Per-cut outputs are streamed, aggregates come from columns")."""
    pad, inner = " " * depth, " " * (depth + 1)
    pairs = list(zip(values.values, values.counts, strict=True))
    for start in range(0, len(pairs), CHUNK):
        yield ",\n".join(
            f"{pad}[\n{inner}{_number(v)},\n{inner}{n}\n{pad}]"
            for v, n in pairs[start : start + CHUNK]
        )


def _number(v: float | None) -> str:
    if v is None or v != v or v in (math.inf, -math.inf):
        return "null"  # JSON has no NaN or inf (_clean)
    return float.__repr__(v)


def _delay_items(points: DelayPoints, depth: int) -> Iterator[str]:
    """Each cut as dataclasses.asdict(DelayPoint) would be written."""
    pad, inner = " " * depth, " " * (depth + 1)
    listed = [_json_strings(c, depth + 1) for c in points.class_lists]
    head = f'{pad}{{\n{inner}"ack_to_cut_ms": '
    for piece in points.chunks():  # a piece of a run's table at a time
        for start in range(0, len(piece), CHUNK):  # (an empty piece: nothing, no separator)
            end = start + CHUNK
            rows = zip(
                piece.ack_to_cut_ms[start:end].tolist(),
                piece.flush_to_cut_ms[start:end].tolist(),
                piece.cut_delay_ms[start:end].tolist(),
                piece.classes[start:end].tolist(),
                strict=True,
            )
            yield ",\n".join(
                f'{head}{_number(a)},\n{inner}"flush_to_cut_ms": {_number(f)},\n'
                f'{inner}"cut_delay_ms": {_number(d)},\n'
                f'{inner}"failed": {"true" if c else "false"},'
                f'\n{inner}"classes": {listed[c]}\n{pad}}}'
                for a, f, d, c in rows
            )


def _json_strings(values: list[str], depth: int) -> str:
    if not values:
        return "[]"
    pad = " " * (depth + 1)
    items = ",\n".join(pad + json.dumps(v) for v in values)
    return f"[\n{items}\n{' ' * depth}]"
