"""A whole campaign: every drive's run in its own thread, power safe however it ends."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from rig.campaign import recording, settle
from rig.campaign.drive import DriveRun
from rig.campaign.endurance import endurance
from rig.campaign.model import DriveSummary, ResumePoint
from rig.campaign.observer import Lines, Observer
from rig.campaign.preparation import Attachment
from rig.check import failures
from rig.config.campaign import Campaign
from rig.station.model import Station
from rig.store import Store
from rig.window.spec import pool_of


def run_campaign(
    campaign: Campaign,
    station: Station,
    store: Store,
    observer: Observer | None = None,
    stop: threading.Event | None = None,
    *,
    campaign_id: int | None = None,
    resume: dict[int, ResumePoint] | None = None,
    attached: Mapping[int, Attachment] | None = None,
) -> list[DriveSummary]:
    """Run every drive's cycles (an endurance campaign: its intervals) in parallel; power goes to
    the safe state however this ends. `observer` (rig/campaign/observer.py; lines printed if
    none) hears the start (every drive prepared, before their threads), messages, each recorded
    cycle, each drive stopped and the end.

    With `campaign_id` and `resume` (rig/campaign/resume.py) an existing campaign continues: each
    drive from its `ResumePoint`, keyed by channel. `attached`: drives the caller already found,
    claimed and opened (by channel; the runner does so before the campaign's store exists),
    released here if their run never starts.
    """
    observer = observer or Lines()
    stop = stop or threading.Event()
    drive_loop = endurance.drive_loop if campaign.endurance else DriveRun.run
    if campaign_id is None:
        campaign_id = recording.new_campaign(store, campaign, station)
    status = "error"
    try:
        for spec in campaign.drives:
            if not station.power.state(spec.channel):
                station.power.on(spec.channel)
        runs = _drive_runs(campaign, campaign_id, station, store, observer, resume, attached)
        threads = [
            threading.Thread(target=drive_loop, args=(r, stop), name=f"drive-ch{r.spec.channel}")
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
        summaries = [r.summary() for r in runs]
    finally:
        not_safe = ""
        try:
            station.power.safe()
        except Exception as error:  # raised as it is, and said in the store's end record too
            not_safe = str(error)
            raise
        finally:  # a switch that stopped answering still leaves the campaign's end recorded
            recording.end_campaign(store, campaign_id, status, not_safe)
    observer.end(summaries, status == "stopped")
    return summaries


def _drive_runs(
    campaign: Campaign,
    campaign_id: int,
    station: Station,
    store: Store,
    observer: Observer,
    resume: dict[int, ResumePoint] | None,
    attached: Mapping[int, Attachment] | None,
) -> list[DriveRun]:
    """Each drive's run, prepared (and told to the observer's `start`); on a failure every one
    is closed and every attachment no run took is released."""
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
                    observer,
                    (resume or {}).get(spec.channel),
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
        observer.start(runs)
        for note in settle.start_notes(campaign):
            observer.message(note)
        if settlement is not None:
            for run in runs:
                if run.tracker is None:  # no health readings: a counter anomaly cannot show
                    settlement.cannot_exercise(run.plan_key, [failures.COUNTER_ANOMALY])
                if campaign.criteria.ready_limit_s is None:  # judged only where the drive
                    # advertises its timeout (CAP.TO / CRTO): its first cut then exposes it
                    settlement.cannot_exercise(run.plan_key, [failures.SLOW_READY])
    except BaseException:
        for run in runs:
            run.close()
        for left in (attached or {}).values():
            left.release()  # (those no run took)
        raise
    return runs
