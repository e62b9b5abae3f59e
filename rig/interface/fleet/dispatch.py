"""Campaigns submitted centrally and handed to the station that holds their drives, on
procrastinate: a maintained job queue that lives in the same PostgreSQL as the central store
(docs/decisions.md, "Campaigns are dispatched by procrastinate in the central PostgreSQL"). Each
station's agent works one queue, `station:<name>`; a job only hands the
campaign over (start) or asks the station to stop it (stop): the campaign itself runs under the
agent's own supervision, so it goes on while the link is down.

The drives a campaign names are claimed centrally in the same transaction that records the
submission (`CentralStore.create_submission`): a drive is in at most one queued or running campaign
across the fleet, and only the station holding the drives ever receives the job.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

import procrastinate

from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.errors import UserError
from rig.interface.fleet import freshness
from rig.interface.fleet.central import CentralStore, drive_key, with_link_options

START_TASK = "rig.interface.fleet.start_campaign"
STOP_TASK = "rig.interface.fleet.stop_campaign"

# The tasks are registered on a blueprint; the agent and the submitting side each make an App
# with their own connection. The agent passes its `Handlers` in the worker's additional context.
tasks = procrastinate.Blueprint()


@tasks.task(name=START_TASK, pass_context=True)
def start_campaign(context: procrastinate.JobContext, submission_id: int) -> None:
    context.additional_context["handlers"].start(submission_id)


@tasks.task(name=STOP_TASK, pass_context=True)
def stop_campaign(context: procrastinate.JobContext, submission_id: int) -> None:
    context.additional_context["handlers"].stop(submission_id)


def queue_of(station: str) -> str:
    return f"station:{station}"


def make_app(dsn: str) -> procrastinate.App:
    connector = procrastinate.PsycopgConnector(
        conninfo=with_link_options(dsn), min_size=1, max_size=4
    )
    app = procrastinate.App(connector=connector)
    app.add_tasks_from(tasks, namespace="")
    return app


def apply_queue_schema(dsn: str) -> bool:
    """Create procrastinate's tables in the central database if they are not there yet (it has
    its own migrations for later versions). Returns True when it created them."""
    with CentralStore(dsn, autocommit=True) as central:
        present = central.queue_schema_present()
    if present:
        return False
    app = make_app(dsn)
    with app.open():
        app.schema_manager.apply_schema()
    return True


@dataclass(frozen=True)
class Submitted:
    submission_id: int
    station: str
    job_id: int
    drives: list[str]
    warning: str = ""  # what the submitter should know (a campaign that cannot survive a crash)


def campaign_drive_keys(text: str, where: str) -> tuple[campaign_spec.Campaign, list[str]]:
    """The campaign file, checked as `rig run` checks it, and its drives' fleet-wide keys."""
    campaign = campaign_file.parse(text, where)
    keys = [drive_key(d.identity.model, d.identity.serial, d.identity.wwn) for d in campaign.drives]
    if len(set(keys)) != len(keys):
        raise UserError(f"{where}: a drive is named twice")
    return campaign, keys


def submit(dsn: str, text: str, where: str = "campaign") -> Submitted:
    """Submit a campaign file: find the station holding all its drives, claim them, queue the
    start job on that station's queue."""
    campaign, keys = campaign_drive_keys(text, where)
    with CentralStore(dsn) as central:
        station = central.station_holding(keys)
        kind = freshness.effective_kind(central.station_kind(station), text)
        warning = (
            freshness.PROCESS_BOUND_WARNING.format(station=station)
            if freshness.process_bound(kind)
            else ""
        )
        planned = campaign.cycles * len(campaign.drives)
        submission_id = central.create_submission(campaign.name, text, station, keys, planned)
        app = make_app(dsn)
        try:
            with app.open():
                job_id = app.configure_task(
                    START_TASK,
                    queue=queue_of(station),
                    queueing_lock=f"submission-{submission_id}",
                ).defer(submission_id=submission_id)
        except Exception as error:
            central.finish_submission(submission_id, "error", None, f"not queued: {error}")
            raise UserError(f"submission {submission_id} could not be queued: {error}") from error
        central.set_job(submission_id, job_id)
    return Submitted(submission_id, station, job_id, keys, warning)


def stop(dsn: str, submission_id: int) -> str:
    """Stop a campaign: one still waiting in the queue is cancelled there (its drives are free at
    once); one its station has taken gets a stop job on that station's queue (the agent stops
    `rig run` safely; its drives are freed when it has stopped). Returns what was done."""
    with CentralStore(dsn) as central:
        row = central.request_stop(submission_id)
        if row["status"] not in ("queued", "running"):
            return f"submission {submission_id} is already {row['status']}"
        app = make_app(dsn)
        with app.open():
            queued = row["status"] == "queued" and row["job_id"] is not None
            if queued and app.job_manager.cancel_job_by_id(int(row["job_id"])):
                central.finish_submission(submission_id, "stopped", None, "cancelled in queue")
                return f"submission {submission_id} cancelled before its station took it"
            app.configure_task(STOP_TASK, queue=queue_of(row["station"])).defer(
                submission_id=submission_id
            )
    return f"stop of submission {submission_id} queued for station {row['station']}"


def read_campaign_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        tomllib.loads(text)
    except OSError as error:
        raise UserError(f"{path}: {error.strerror}") from error
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{path}: not TOML ({error})") from error
    return text


def job_summary(row: dict[str, Any]) -> str:
    return f"{row['id']}: {row['name']} on {row['station']}: {row['status']}"
