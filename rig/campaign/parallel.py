"""A whole campaign: every drive's run in its own thread, power safe however it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from rig.campaign import recording, settle
from rig.campaign.drive import DriveRun
from rig.campaign.model import Cycle, DriveSummary, ResumePoint
from rig.campaign.preparation import Attachment
from rig.config import Campaign
from rig.station.model import Station
from rig.store import Store
from rig.window.spec import pool_of


def run_campaign(
    campaign: Campaign,
    station: Station,
    store: Store,
    progress: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    *,
    campaign_id: int | None = None,
    resume: dict[int, ResumePoint] | None = None,
    on_cycle: Callable[[DriveRun, Cycle], None] | None = None,
    on_start: Callable[[list[DriveRun]], None] | None = None,
    drive_loop: Callable[[DriveRun, threading.Event], None] | None = None,
    attached: Mapping[int, Attachment] | None = None,
) -> list[DriveSummary]:
    """Run every drive's cycles in parallel; power goes to the safe state however this ends.

    With `campaign_id` and `resume` (rig/campaign/resume.py) an existing campaign continues: each
    drive from its `ResumePoint`, keyed by channel. `on_start` gets the drive runs before their
    threads start (after resume's read-back of each region), `on_cycle` every recorded cycle.
    `attached`: drives the caller already found, claimed and opened (by channel; the runner does
    so before the campaign's store exists), released here if their run never starts.
    """
    stop = stop or threading.Event()
    if campaign_id is None:
        campaign_id = recording.new_campaign(store, campaign, station)
    status = "error"
    try:
        for spec in campaign.drives:
            if not station.power.state(spec.channel):
                station.power.on(spec.channel)
        runs = _drive_runs(
            campaign, campaign_id, station, store, progress, resume, on_cycle, on_start, attached
        )
        threads = [
            threading.Thread(
                target=drive_loop or DriveRun.run, args=(r, stop), name=f"drive-ch{r.spec.channel}"
            )
            for r in runs
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            stop.set()
            for thread in threads:
                thread.join()
            status = "stopped"
            raise
        status = "stopped" if stop.is_set() else "done"
        return [r.summary() for r in runs]
    finally:
        station.power.safe()
        recording.end_campaign(store, campaign_id, status)


def _drive_runs(
    campaign: Campaign,
    campaign_id: int,
    station: Station,
    store: Store,
    progress: Callable[[str], None],
    resume: dict[int, ResumePoint] | None,
    on_cycle: Callable[[DriveRun, Cycle], None] | None,
    on_start: Callable[[list[DriveRun]], None] | None,
    attached: Mapping[int, Attachment] | None,
) -> list[DriveRun]:
    """Each drive's run, prepared (and handed to `on_start`); on a failure every one is closed
    and every attachment no run took is released."""
    runs: list[DriveRun] = []
    # a resumed campaign's plans continue from the cuts already recorded, in their order
    resumed_plan = resume is not None and campaign.criteria.sequential is not None
    recorded = recording.cut_outcomes(store, campaign_id) if resumed_plan else []
    settlement = settle.for_campaign(campaign, recorded)
    try:
        for spec in campaign.drives:
            runs.append(
                DriveRun(
                    campaign,
                    campaign_id,
                    spec,
                    station,
                    store,
                    progress,
                    (resume or {}).get(spec.channel),
                    on_cycle,
                    settlement=settlement,
                    attachment=(attached or {}).get(spec.channel),
                )
            )
        if campaign.cut.window is not None:  # one planner: a model's drives pool their cuts
            # imported here: its statistics (scipy) load only for a window campaign
            from rig.window.planner import WindowPlanner

            planner = WindowPlanner(campaign.cut.window, (pool_of(r.spec.identity) for r in runs))
            for run in runs:
                run.window = planner
        if on_start is not None:
            on_start(runs)
    except BaseException:
        for run in runs:
            run.close()
        for left in (attached or {}).values():
            left.release()  # (those no run took)
        raise
    return runs
