"""The start of a new campaign, before its store exists: every check that can refuse it runs
first (the station's capabilities; each drive found on the bus, claimed, opened through the
interlocks, its region checked), so a refusal leaves no file behind. The station's switching
edges meanwhile wait in an `EdgeSink` for the store (docs/campaign.md, "What a refusal leaves";
docs/decisions.md, "A new campaign's checks run before its store exists")."""

from __future__ import annotations

import contextlib
import glob
import os
import threading
from typing import Any, Protocol

from rig.campaign.preparation import Attachment, check_station
from rig.config.campaign import Campaign
from rig.errors import UserError
from rig.station.model import Station
from rig.store import creation


class EdgeQueue(Protocol):
    """Where a station's edges go (a Store, or an EdgeSink until the store is open)."""

    path: str

    def queue_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None: ...


class EdgeSink:
    """The store-to-be of a new campaign: its path, and the events queued for it, handed to the
    store once it is open (then passed straight on)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._waiting: list[tuple[int | None, int, str, dict[str, Any]]] = []
        self._store: EdgeQueue | None = None

    def queue_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None:
        with self._lock:
            if self._store is None:
                self._waiting.append((drive_id, host_ns, kind, detail))
                return
        self._store.queue_event(drive_id, host_ns, kind, detail)

    def attach(self, store: EdgeQueue) -> None:
        with self._lock:
            self._store = store
            waiting, self._waiting = self._waiting, []
        for event in waiting:
            store.queue_event(*event)


def acquire_drives(campaign: Campaign, station: Station) -> dict[int, Attachment]:
    """Every drive of the campaign powered, found, claimed, opened and its region checked (by
    channel); all released again if one is refused."""
    check_station(campaign, station)
    for spec in campaign.drives:
        if not station.power.state(spec.channel):
            station.power.on(spec.channel)
    attached: dict[int, Attachment] = {}
    try:
        for spec in campaign.drives:
            attached[spec.channel] = Attachment(campaign, spec, station)
    except BaseException:
        for attachment in attached.values():
            attachment.release()
        raise
    return attached


def refuse_a_used_store(db: str) -> None:
    """A new campaign goes into a store of its own: one that already holds a campaign is
    refused, read-only, before anything is written (docs/decisions.md, "A new campaign's checks
    run before its store exists")."""
    held = creation.held_campaign(db)
    if held is not None:
        name, seed = held
        raise UserError(
            f"{db}: already holds campaign '{name}' (seed {seed}); a new campaign needs a"
            f" store of its own (--db NEW.sqlite), or continue it: rig run --resume {db}"
        )


class Unmade:
    """The files a new campaign's start created (its store, beside-files, run log), removed
    again if the start is refused after the store was made (a refusal the checks above cannot
    make early: a drive's health baseline, its write-cache setting). Files that were there
    before are never touched, nor what a simulated station keeps of its own hardware beside
    the store (the twin's truth files: the simulator's evidence, not the rig's record)."""

    def __init__(self, db: str, log_path: str) -> None:
        for path in (db, log_path):  # folders that exist and take files: said before any
            creation.check_folder(path, write=True)
        beside = [f"{db}-wal", f"{db}-shm"]
        self.new = [p for p in (db, *beside, log_path) if not os.path.lexists(p)]
        self.db = db if db in self.new else ""

    def remove(self) -> None:
        for path in self.new:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        if self.db:  # the store was new: so are its drives' intent logs
            for path in glob.glob(glob.escape(self.db) + ".intent-*"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
