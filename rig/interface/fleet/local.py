"""A campaign's folder on a station (the agent's home holds one per submission), and what the
agent reports of it: the cycles its store holds."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rig.errors import UserError
from rig.store import Store


class LocalCampaign:
    """A campaign's folder on the station: campaign.toml, store.sqlite, state.json."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.submission_id = int(folder.name.split("-", 1)[1])

    @property
    def campaign_file(self) -> Path:
        return self.folder / "campaign.toml"

    @property
    def store(self) -> Path:
        return self.folder / "store.sqlite"

    def state(self) -> dict[str, Any]:
        try:
            value = json.loads((self.folder / "state.json").read_text())
            return value if isinstance(value, dict) else {}
        except (OSError, json.JSONDecodeError):
            return {}

    def finish(self, result: str, exit_code: int | None, message: str) -> None:
        """Ended: to be reported, with the cycles its store holds (the centre says `done` once
        it holds them all)."""
        final = recorded_counts(self.store)
        self.update(
            status="finished",
            result=result,
            exit_code=exit_code,
            message=message,
            reported=False,
            final=list(final) if final is not None else None,
        )

    def update(self, **changes: Any) -> dict[str, Any]:
        state = {**self.state(), **changes}
        tmp = self.folder / "state.json.tmp"
        tmp.write_text(json.dumps(state, sort_keys=True))
        os.replace(tmp, self.folder / "state.json")
        return state


def recorded_counts(path: Path) -> tuple[int, int] | None:
    """(cycle rows, cycles less interrupted ones) of a campaign's store; None while it has none
    (not made yet, or its schema not written yet)."""
    if not path.exists():
        return None
    try:
        store = Store(str(path), read_only=True)
    except UserError:
        return None
    try:
        return store.cycle_counts()
    finally:
        store.close()


LOST_IN_PROCESS = (
    "the rig process ended before the campaign (killed, crashed or stopped with its agent); the"
    " station's in-process simulated drives died with it and cannot resume"
)
