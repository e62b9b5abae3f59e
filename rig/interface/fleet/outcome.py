"""What a `rig run` that exited on its own achieved, judged from its store, never from its exit
status alone: exit 1 is both "a drive failed" and an uncaught error (a Python traceback), and a
run can end with status 0 while a drive's thread stopped short. The agent records a campaign as
`done` only when the store holds it ended `done` with every drive at its target or stopped for
a recorded reason (dead, stopped); anything less is `failed`, with the reason (docs/fleet.md,
"How a campaign ends"; docs/decisions.md, "The agent records done only when the store shows the
whole campaign")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rig.config import campaign_file
from rig.errors import UserError
from rig.store import Store


@dataclass(frozen=True)
class Outcome:
    result: str  # done | failed
    message: str


def of_exit(store_path: Path, code: int, last_error: str) -> Outcome:
    """The outcome of a `rig run` that exited with `code` 0 or 1; `last_error`: the last error
    line it printed (the reason given when the store cannot vouch for the campaign)."""
    said = f": {last_error}" if last_error else ""
    if not store_path.exists():
        return Outcome("failed", f"rig run exited {code} before creating its store{said}")
    try:
        store = Store(str(store_path), read_only=True)
    except UserError as error:
        return Outcome("failed", f"rig run exited {code}; {error}{said}")
    try:
        short = shortfalls(store)
    finally:
        store.close()
    if short:
        return Outcome("failed", f"rig run exited {code}; {short}{said}")
    return Outcome("done", "" if code == 0 else "a drive failed or died")


def shortfalls(store: Store) -> str:
    """Why the store's last campaign is not complete ("" when it is): no campaign, one that did
    not end `done`, or a drive short of its cycles with no recorded reason to stop."""
    head = store.latest_campaign()
    if head is None:
        return "no campaign recorded in its store"
    if head["status"] != "done":
        return f"its campaign ended '{head['status']}', not done"
    campaign = campaign_file.parse(head["config"], f"{store.path} (stored campaign)")
    short = []
    for spec in campaign.drives:
        drive = store.drive_on_channel(int(head["id"]), spec.channel)
        if drive is None:
            short.append(f"ch{spec.channel}: never started")
            continue
        if drive["status"] != "active" or campaign.endurance is not None:
            continue  # dead or stopped: a recorded reason (endurance ends by its own rules)
        counted = int(store.cycle_totals(int(drive["id"]))["counted"] or 0)
        if counted < campaign.cycles:
            short.append(f"ch{spec.channel}: {counted} of {campaign.cycles} cycles, no stop reason")
    return "; ".join(short)
