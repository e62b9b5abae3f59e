"""`rig station check CAMPAIGN.toml [--json]`: the station's wiring, before a campaign.

Exit status: 0 every channel is right, 1 any is wrong (each wrong thing one line), 2 bad input
(a malformed campaign, a drive not on the bus, an interlock's refusal: nothing was cut).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import TYPE_CHECKING, Any

# The parser is built for every `rig` command: what the check runs is imported when it runs
if TYPE_CHECKING:
    from rig.station.check import ChannelCheck, StationCheck


def add_parsers(sub: Any) -> None:
    station = sub.add_parser("station", help="check a station before a campaign")
    actions = station.add_subparsers(dest="station_command", required=True)
    check = actions.add_parser(
        "check",
        help="per channel: board identity, a short cut shows exactly the named drive leave the"
        " bus and return (times), rail sense on and off; writes nothing",
    )
    check.add_argument("campaign", help="campaign file (docs/campaign.md)")
    check.add_argument("--json", action="store_true", help=f"one JSON document ({SCHEMA})")
    check.set_defaults(func=cmd_station_check)


SCHEMA = "rig.station-check/1"  # = rig.station.check.SCHEMA (tests/interface/test_cli_imports.py)


def cmd_station_check(args: argparse.Namespace) -> int:
    from rig.config import campaign_file
    from rig.station import build
    from rig.station.check import run_check

    campaign = campaign_file.load(args.campaign)
    # No store: edges are not recorded. (A simulated twin keeps its ground truth beside the
    # store path it is given: a directory of the check's own, removed after it.)
    with tempfile.TemporaryDirectory(prefix="rig-station-check-") as scratch:
        station = build.build(campaign, store_path=os.path.join(scratch, "check.sqlite"))
        try:
            result = run_check(campaign, station)
        finally:
            station.power.close()
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
    else:
        print("\n".join(table(result)))
    return 0 if result.ok else 1


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _rail(check: ChannelCheck) -> str:
    if check.rail is None:
        return "-"
    r = check.rail
    return f"{r.on}/{r.off} ({r.hi}/{r.lo})"


def table(result: StationCheck) -> list[str]:
    board = result.board
    lines = [f"station: {result.station} (campaign '{result.campaign}')"]
    boards = result.boards or ({"": board} if board is not None else {})
    if not boards:
        lines.append("board: no identity (this switch cannot say what it is)")
    for name, facts in boards.items():
        lines.append(
            f"board{' ' + name if name else ''}: {facts['board']}, firmware {facts['firmware']}"
            f" (build {facts['build']}), protocol {facts['protocol']}, {facts['channels']}"
            f" channels, last reset {facts['reset_cause']}, watchdog trips"
            f" {facts['watchdog_trips']}"
        )
    rows = [("ch", "drive", "node", "left the bus", "gone", "back", "rail on/off (hi/lo)", "")]
    for c in result.channels:
        only_its_own = len(c.left) == 1 and c.departure_s is not None
        left = "its drive only" if only_its_own else ", ".join(c.left) or "nothing"
        verdict = "right" if c.ok else "WRONG"
        row = (c.wiring or str(c.channel), c.drive, c.devnode, left)
        rows.append((*row, _seconds(c.departure_s), _seconds(c.return_s), _rail(c), verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    problems = [p for c in result.channels for p in c.problems]
    lines += problems or ["every channel is wired as the campaign says"]
    lines += [
        f"note: channel {c.channel}: {', '.join(c.coincidental)} left the bus during its cut"
        " but not during a second one: not this channel's (another program's disk?)"
        for c in result.channels
        if c.coincidental
    ]
    return lines
