"""Rail-sense captures: a `RAIL` event (fall times after an off edge) and the `RAILS` line of its
samples that the board writes right after it, assembled into one `RailResult`."""

from __future__ import annotations

from dataclasses import dataclass

from rig.power.base import RailResult
from rig.power.clocksync import Mapping
from rig.power.relay.model import RailConfig
from rig.power.relay.wire import Line


@dataclass(frozen=True)
class RailPartial:
    line: Line  # the RAIL event
    mapping: Mapping | None  # its off edge on the host clock (None: could not be mapped)
    epoch: int


def rail_result(
    channel: int, partial: RailPartial, samples: Line | None, config: RailConfig | None
) -> RailResult:
    """The capture of `partial`, with the samples of its RAILS line if it came."""
    rail, mapping = partial.line, partial.mapping
    values = samples.fields.get("v", "") if samples is not None else ""
    return RailResult(
        channel=channel,
        edge_us=rail.num("t"),
        host_ns=mapping.host_ns if mapping else 0,
        error_ns=mapping.error_ns if mapping else -1,
        v0=rail.opt_num("v0"),
        hi_us=rail.opt_num("hi_us"),
        lo_us=rail.opt_num("lo_us"),
        minimum=rail.opt_num("min"),
        end=rail.fields.get("end", "?"),
        dt_us=samples.opt_num("dt_us") if samples is not None else None,
        samples=tuple(int(v) for v in values.split(",") if v),
        hi_threshold=config[0] if config else 0,
        lo_threshold=config[1] if config else 0,
        window_ms=config[2] if config else 0,
    )


class RailAssembler:
    """Holds a channel's RAIL event until its RAILS line. The board writes a capture's RAILS
    right after its RAIL: any other event next means the samples line was lost, and the
    capture is reported without them. Used by one thread (event delivery)."""

    def __init__(self) -> None:
        self._held: dict[int, RailPartial] = {}

    def interrupted_by(self, line: Line) -> list[tuple[int, RailPartial]]:
        """Captures that `line` is not the samples of: released, to report without samples."""
        done = []
        for channel, held in list(self._held.items()):
            if line.word != "RAILS" or line.seq != ((held.line.seq or 0) + 1) % 65536:
                del self._held[channel]
                done.append((channel, held))
        return done

    def hold(self, channel: int, partial: RailPartial) -> None:
        self._held[channel] = partial

    def take(self, channel: int, epoch: int) -> RailPartial | None:
        """The capture a RAILS line of `epoch` on `channel` completes, if one is held."""
        held = self._held.pop(channel, None)
        if held is None or held.epoch != epoch:
            return None
        return held
