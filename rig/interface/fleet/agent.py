"""The station agent: the fleet's hand on one station.

It works its station's procrastinate queue (rig.interface.fleet.dispatch), runs the campaigns
handed to it with `rig run`, replicates every store it holds (rig.interface.fleet.replicator), and
reports each campaign's end, freeing its drives' claims. Everything a campaign needs is local: its
folder under the agent's home holds the campaign file, its SQLite store and a small state file, so a
campaign goes on while the central database is out of reach, and the agent reports what it missed
when the link is back.

A campaign runs as a child of the agent and dies with it (PR_SET_PDEATHSIG), as it would with the
station: a `kill -9` of the agent is a station crash. When the agent starts again, every campaign
whose folder says it was running is resumed with `rig run --resume` on this station; no other
station ever holds its job or its drives.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rig.errors import UserError
from rig.interface.fleet import dispatch, freshness, outcome
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.local import LOST_IN_PROCESS, LocalCampaign, recorded_counts
from rig.interface.fleet.replicator import ReplicatorLoop, StoreSource
from rig.store import Store, StoreReader

log = logging.getLogger("rig.interface.fleet.agent")
PR_SET_PDEATHSIG = 1
MAX_CRASH_RESUMES = 5
STOPPED_BY_SIGNAL = (128 + signal.SIGTERM, 128 + signal.SIGINT)


@dataclass
class AgentConfig:
    station: str
    dsn: str
    home: Path  # one folder per campaign: sub-<submission id>/
    inventory: list[dict[str, str]]  # the drives this station holds
    station_table: str = ""  # this station's [station] table; replaces the submitted one
    rig: list[str] = field(default_factory=lambda: [sys.executable, "-m", "rig.interface.cli"])
    interval_s: float = 1.0
    ledgers: bool = False
    heartbeat_s: float = 2.0  # the view shows the station stale after 3 missed heartbeats

    @property
    def kind(self) -> str:
        """The station kind of its own [station] table ('' = each campaign's own)."""
        return freshness.effective_kind("", self.station_table) if self.station_table else ""


def load_inventory(path: str) -> list[dict[str, str]]:
    """Drives from a TOML file of [[drive]] tables (model, serial, wwn, firmware): the drives of
    a simulated station, or a fixed list for a station whose drives udev cannot tell apart."""
    try:
        with open(path, "rb") as handle:
            table = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise UserError(f"{path}: {error}") from error
    drives = table.get("drive", [])
    if not isinstance(drives, list) or not all(isinstance(d, dict) for d in drives):
        raise UserError(f"{path}: expected [[drive]] tables")
    return [{k: str(d.get(k, "")) for k in ("model", "serial", "wwn", "firmware")} for d in drives]


def udev_inventory() -> list[dict[str, str]]:
    """The drives udev sees on this host, by identity (a real station)."""
    from rig.bus.udev import UdevPresence

    return [
        {
            "model": n.identity.model,
            "serial": n.identity.serial,
            "wwn": n.identity.wwn,
            "firmware": n.identity.firmware,
        }
        for n in UdevPresence().candidates()
        if n.identity.serial or n.identity.wwn
    ]


def replace_station_table(campaign_text: str, station_table: str) -> str:
    """The campaign file with its [station] table replaced by this station's (the relay board's
    port and the twin are a station's business, not the submitter's)."""
    if not station_table.strip():
        return campaign_text
    kept: list[str] = []
    skipping = False
    for line in campaign_text.splitlines():
        header = line.strip()
        if header.startswith("[") and not header.startswith("[["):
            skipping = header.split("#", 1)[0].strip() == "[station]"
        elif header.startswith("[["):
            skipping = False
        if not skipping:
            kept.append(line)
    text = station_table.strip() + "\n\n" + "\n".join(kept) + "\n"
    tomllib.loads(text)  # still one valid file
    return text


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the agent dies, as on a station crash."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Handlers:
    """What the station's jobs do (called on the worker's thread): write down, never run."""

    def __init__(self, agent: StationAgent) -> None:
        self.agent = agent

    def start(self, submission_id: int) -> None:
        local = self.agent.local(submission_id)
        if local.folder.exists() and local.state():
            return  # taken before (a job retried after a crash): nothing to do twice
        with CentralStore(self.agent.config.dsn) as central:
            row = central.submission(submission_id)
        if row is None or row["station"] != self.agent.config.station:
            raise UserError(f"submission {submission_id} is not for this station")
        text = replace_station_table(row["config"], self.agent.config.station_table)
        local.folder.mkdir(parents=True, exist_ok=True)
        local.campaign_file.write_text(text)
        local.update(status="accepted", stop=bool(row["stop_requested"]), launches=0, crashes=0)
        self.agent.wake.set()

    def stop(self, submission_id: int) -> None:
        local = self.agent.local(submission_id)
        if not local.folder.exists():
            with CentralStore(self.agent.config.dsn) as central:
                central.finish_submission(
                    submission_id, "stopped", None, "stopped before start", (0, 0)
                )
            return
        local.update(stop=True)
        self.agent.wake.set()


class StationAgent:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.home = config.home
        self.home.mkdir(parents=True, exist_ok=True)
        self.queue = dispatch.queue_of(config.station)
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.handlers = Handlers(self)
        self.replicator = ReplicatorLoop(
            config.dsn, config.station, self.sources, ledgers=config.ledgers
        )

    def local(self, submission_id: int) -> LocalCampaign:
        return LocalCampaign(self.home / f"sub-{submission_id}")

    def campaigns(self) -> list[LocalCampaign]:
        return [
            LocalCampaign(p)
            for p in sorted(self.home.glob("sub-*"))
            if p.is_dir() and p.name.split("-", 1)[1].isdigit()
        ]

    def sources(self) -> list[StoreSource]:
        return [
            StoreSource(str(c.store), c.submission_id) for c in self.campaigns() if c.store.exists()
        ]

    # -- the worker: procrastinate, restarted after any failure (a link loss stops it) ----------

    def _work(self) -> None:
        while not self.stopping.is_set():
            try:
                dispatch.make_app(self.config.dsn).run_worker(
                    queues=[self.queue],
                    name=f"{self.config.station}@{socket.gethostname()}:{os.getpid()}",
                    install_signal_handlers=False,
                    additional_context={"handlers": self.handlers},
                    update_heartbeat_interval=2.0,
                    stalled_worker_timeout=10.0,
                    fetch_job_polling_interval=2.0,
                    delete_jobs="never",
                )
            except Exception as error:
                log.warning("worker stopped (%s); restarting", type(error).__name__)
            self.stopping.wait(3.0)

    def _retry_stalled(self) -> None:
        """Jobs of this queue a dead worker held (the agent was killed while handing a campaign
        over): run them again; the handlers do nothing twice."""

        async def retry() -> None:
            app = dispatch.make_app(self.config.dsn)
            async with app.open_async():
                for job in await app.job_manager.get_stalled_jobs(
                    queue=self.queue, seconds_since_heartbeat=15
                ):
                    await app.job_manager.retry_job(job)

        asyncio.run(retry())

    # -- campaigns ------------------------------------------------------------------------------

    def _launch(self, local: LocalCampaign) -> None:
        state = local.state()
        resumable = False
        if local.store.exists():
            resumable = _holds_a_campaign(local.store)
            if not resumable:  # killed before the campaign's first row: start it afresh
                for suffix in ("", "-wal", "-shm"):
                    Path(str(local.store) + suffix).unlink(missing_ok=True)
        if resumable:
            argv = [*self.config.rig, "run", "--resume", str(local.store), "--quiet"]
        else:
            argv = [
                *self.config.rig,
                "run",
                str(local.campaign_file),
                "--db",
                str(local.store),
                "--quiet",
            ]
        out = open(local.folder / "rig.out", "ab")  # noqa: SIM115 - the child holds it
        out.write(f"\n# agent {os.getpid()}: {' '.join(argv)}\n".encode())
        out.flush()
        child = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the agent alone decides when a campaign stops
            preexec_fn=_die_with_parent,  # only a prctl: takes no lock
        )
        out.close()
        self.children[local.submission_id] = child
        local.update(
            status="running",
            pid=child.pid,
            launches=int(state.get("launches", 0)) + 1,
            resumed=resumable or bool(state.get("resumed")),
            reported_running=False,
        )
        log.info("submission %s: %s (pid %d)", local.submission_id, argv[3], child.pid)

    def _ended(self, local: LocalCampaign, code: int) -> None:
        state = local.state()
        if code in STOPPED_BY_SIGNAL and not state.get("stop"):
            local.update(status="running")  # stopped with the agent: resumed when it is back
            return
        if code < 0 and not state.get("stop"):  # the rig crashed: resume, a few times
            crashes = int(state.get("crashes", 0)) + 1
            if crashes <= MAX_CRASH_RESUMES:
                local.update(status="running", crashes=crashes)
                return
        if code in (0, 1):  # the store decides: exit 1 is also an uncaught error
            judged = outcome.of_exit(local.store, code, _last_error(local))
            result, message = judged.result, judged.message
        elif code in STOPPED_BY_SIGNAL or (code < 0 and state.get("stop")):
            result, message = "stopped", "stopped on request"
        elif code == 2:
            result, message = "failed", _last_error(local)
        else:
            result, message = "error", _last_error(local) or f"rig exit status {code}"
        local.finish(result, code, message)

    def _supervise(self) -> None:
        for local in self.campaigns():
            state = local.state()
            child = self.children.get(local.submission_id)
            if child is not None and child.poll() is not None:
                del self.children[local.submission_id]
                self._ended(local, child.returncode)
                state = local.state()
                child = None
            status = state.get("status")
            if status in ("accepted", "running") and child is None:
                if _still_running(state.get("pid"), local.store):
                    continue  # a rig of an earlier agent is still on its way out: not twice
                if state.get("stop"):
                    local.finish("stopped", None, "stopped on request")
                elif not self.stopping.is_set() and not self.settle_lost(local):
                    self._launch(local)
            elif child is not None and state.get("stop") and not state.get("signalled"):
                child.send_signal(signal.SIGTERM)  # `rig run` stops safely at a phase boundary
                local.update(signalled=True)

    def settle_lost(self, local: LocalCampaign) -> bool:
        """A campaign on in-process drives whose rig process ended before it did cannot resume
        (its drives died with the process): it ends `failed` with the reason, in its store too
        (the source of truth: the central copy and every report follow), never left running."""
        try:
            bound = freshness.process_bound(
                freshness.effective_kind("", local.campaign_file.read_text())
            )
        except OSError:
            return False
        if not bound or recorded_counts(local.store) is None:
            return False  # no store of it yet: it starts afresh
        store = Store(str(local.store))
        try:
            head = store.latest_campaign()
            if head is None:
                return False
            ended = str(head["status"])
            if ended in ("running", "stopped"):
                store.end_campaign(int(head["id"]), "failed")
                reason = {"reason": LOST_IN_PROCESS}
                store.add_event(None, time.monotonic_ns(), "campaign_lost", reason)
        finally:
            store.close()
        if ended in ("done", "error"):  # it ended on its own while its agent was away
            local.finish(ended, None, "ended while its agent was away (exit status unknown)")
            return True
        local.finish("failed", None, LOST_IN_PROCESS)
        log.warning("submission %s: %s", local.submission_id, LOST_IN_PROCESS)
        return True

    def _report(self, central: CentralStore) -> None:
        for local in self.campaigns():
            state = local.state()
            if state.get("status") == "running" and not state.get("reported_running"):
                central.submission_started(local.submission_id)
                local.update(reported_running=True)
            elif state.get("status") == "finished" and not state.get("reported"):
                final = state.get("final")
                central.finish_submission(
                    local.submission_id,
                    str(state.get("result")),
                    state.get("exit_code"),
                    str(state.get("message", "")),
                    (int(final[0]), int(final[1])) if final else None,
                )
                local.update(reported=True)

    # -- the main loop --------------------------------------------------------------------------

    def recorded(self) -> dict[int, tuple[int, int]]:
        """What each live campaign's store holds: reported with every heartbeat."""
        counts = {}
        for local in self.campaigns():
            if local.state().get("status") in ("accepted", "running"):
                found = recorded_counts(local.store)
                if found is not None:
                    counts[local.submission_id] = found
        return counts

    def _beat(self) -> None:
        """Heartbeats on a connection of their own, every `heartbeat_s`, so a slow round of the
        main loop (a job retry, a report) never shows the station stale; a beat that fails (the
        link, the server) is simply missed."""
        central: CentralStore | None = None
        agent = f"{socket.gethostname()} pid {os.getpid()}"
        while not self.stopping.is_set():
            began = time.monotonic()
            try:
                if central is None:
                    central = CentralStore(self.config.dsn)
                central.heartbeat(
                    self.config.station,
                    agent,
                    interval_s=self.config.heartbeat_s,
                    kind=self.config.kind,
                    recorded=self.recorded(),
                )
            except Exception:  # reported by the main loop, which meets the same link
                if central is not None:
                    with contextlib.suppress(Exception):
                        central.close()
                    central = None
            self.stopping.wait(max(0.05, self.config.heartbeat_s - (time.monotonic() - began)))
        if central is not None:
            central.close()

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        threading.Thread(target=self._work, name="worker", daemon=True).start()
        threading.Thread(target=self.replicator.run, name="replicator", daemon=True).start()
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()
        central: CentralStore | None = None
        registered = False
        next_retry = 0.0
        last_error = ""
        while not self.stopping.is_set() and not until():
            self._supervise()  # first: campaigns never wait for the network
            try:
                if central is None:
                    central = CentralStore(self.config.dsn)
                if not registered:
                    central.publish_inventory(self.config.station, self.config.inventory)
                    registered = True
                now = time.monotonic()
                self._report(central)
                if last_error:
                    log.info("central database reachable again")
                    last_error = ""
                if now >= next_retry:
                    next_retry = now + 10.0
                    self._retry_stalled()
            except Exception as error:  # the link or the server: campaigns go on regardless
                why = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
                if why != last_error:
                    log.warning("central database: %s", why)
                last_error = why
                if central is not None:
                    with contextlib.suppress(Exception):
                        central.close()
                    central = None
            self.wake.wait(self.config.interval_s)
            self.wake.clear()
        self.shutdown()
        if central is not None:
            central.close()

    def shutdown(self) -> None:
        """An orderly stop of the agent: its campaigns stop safely and resume when it is back."""
        self.stopping.set()
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in self.children.values():
            try:
                child.wait(120)
            except subprocess.TimeoutExpired:
                child.kill()
        self.replicator.stop.set()


def _holds_a_campaign(path: Path) -> bool:
    """The store has a campaign row to resume (read as it is: never created or upgraded here;
    `rig run --resume` upgrades an older store)."""
    try:
        reader = StoreReader(str(path))
    except UserError:
        return False
    try:
        return any(True for _ in reader.campaigns())
    finally:
        reader.close()


def _last_error(local: LocalCampaign) -> str:
    """The last run's error line: its `rig: ...` line, else the last line it printed (an
    uncaught exception's)."""
    try:
        text = (local.folder / "rig.out").read_text(errors="replace")
    except OSError:
        return ""
    last_run = text.rsplit("\n# agent ", 1)[-1].splitlines()[1:]  # after the launch line
    errors = [line for line in last_run if line.startswith("rig: ")]
    printed = [line.strip() for line in last_run if line.strip()]
    return errors[-1] if errors else printed[-1] if printed else ""


def _still_running(pid: object, store: Path) -> bool:
    """A `rig run` of this campaign is alive (by PID, checked against its command line, so a
    reused PID is not taken for it)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    return not zombie and str(store).encode() in argv
