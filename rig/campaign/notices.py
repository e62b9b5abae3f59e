"""Which of a run's events are worth telling someone (the campaign file's `[notify]`): a drive's
first failing cut, a dead drive, a run of rig errors, a channel stopped for doubt, each drive's
verdict and the campaign's end. `cycle` runs on the drive's own thread after each recorded cycle
and only queues a notice (rig/notify/sender.py sends it on its own thread)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rig.campaign.cutcycle import cuts
from rig.campaign.observer import Observer
from rig.config.campaign import Campaign
from rig.notify import settings
from rig.notify.sender import Notifier
from rig.verdict import rule

if TYPE_CHECKING:
    from rig.campaign.drive import DriveRun
    from rig.campaign.model import CycleRecord, DriveSummary


# The verdicts the rule settles a drive with; any other answer is "not yet demonstrated".
SETTLED_VERDICTS = (rule.PASS, rule.FAIL, rule.DEAD)


OUTSIDE_WARN = 0.01  # the end notice warns when more than this share of cuts fell off the range


def _classes(counts: dict[str, int]) -> str:
    return ", ".join(f"{cls} x{n}" for cls, n in sorted(counts.items()))


def _footer(store: str) -> str:
    """The lines that say where a notice comes from: the station (host name) and its store,
    with the command that makes its report there."""
    lines = [f"station: {socket.gethostname()}"]
    if store:
        path = os.path.abspath(store)
        lines += [f"store: {path}", f"report: rig report {path}"]
    return "\n\n" + "\n".join(lines)


class CampaignNotices(Observer):
    """The campaign's observer that tells people, through `notifier`."""

    def __init__(self, campaign: Campaign, notifier: Notifier, where: str = "") -> None:
        """`where`: the campaign's store; every notice names it and this station (host)."""
        self.campaign = campaign
        self.footer = _footer(where)
        self.spec = campaign.notify
        self.notifier = notifier
        self._lock = threading.Lock()  # drive threads report at once
        self._failed: set[int] = set()  # channels whose FAIL was sent
        self._errors_in_a_row: dict[int, int] = {}
        self._plans_told: set[str] = set()  # sequential plans whose decision was sent
        self._timing = [0, 0]  # cuts with a requested range, and those that fell outside it

    def _send(self, kind: str, title: str, body: str, level: str) -> None:
        if self.spec.wants(kind):
            self.notifier.notify_event(
                kind, f"rig {self.campaign.name}: {title}", body + self.footer, level
            )

    def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None:
        """After each recorded cycle, on the drive's thread: queue what it tells, nothing more."""
        self._plan_decided(drive)
        channel, label = drive.spec.channel, drive.spec.identity.label()
        where = f"ch{channel} {label}, cycle {c.seq}"
        failing = {f.cls for f in c.findings if f.failure}
        scheduled = next((d for _, kind, d in c.events if kind == "cut_scheduled"), None)
        in_range = cuts.fidelity(self.campaign.cut, scheduled, c.edge).in_range
        with self._lock:
            if in_range is not None:
                self._timing[0] += 1
                self._timing[1] += in_range == 0
            first_fail = bool(failing) and channel not in self._failed
            if first_fail:
                self._failed.add(channel)
            errors = self._errors_in_a_row.get(channel, 0) + 1 if c.status == "error" else 0
            self._errors_in_a_row[channel] = errors
        if first_fail:
            counts = {cls: sum(1 for f in c.findings if f.cls == cls) for cls in failing}
            self._send(
                settings.FAIL,
                f"FAIL on ch{channel} {label}",
                f"{where}: first cut with failures: {_classes(counts)}",
                "failure",
            )
        if c.status == "dead":
            self._send(
                settings.DEAD, f"dead drive on ch{channel}", f"{where}: {c.error}", "failure"
            )
        elif c.stop_channel:
            self._send(
                settings.CHANNEL_STOPPED,
                f"ch{channel} stopped",
                f"{where}: channel stopped, nothing more written to it: {c.error}",
                "warning",
            )
        if errors == self.spec.rig_error_run:
            self._send(
                settings.RIG_ERRORS,
                f"{errors} rig errors in a row on ch{channel}",
                f"{where}: {c.error}",
                "warning",
            )

    def verdict_settled(self, label: str, verdict: str, detail: str) -> None:
        """A drive's verdict is settled: at the end from the fixed-sample rule, or (a sequential
        plan) when the plan decides; the runner calls this."""
        level = {"PASS": "success", "FAIL": "failure", "DEAD": "failure"}.get(verdict, "info")
        self._send(settings.VERDICT, f"{verdict}: {label}", f"{label}: {verdict}. {detail}", level)

    def end(self, summaries: Sequence[DriveSummary], stopped: bool) -> None:
        """The campaign's end: each drive's fixed-sample verdict, a FAIL not yet told (found
        before a resume), and the summary."""
        rate = self.campaign.criteria.max_failure_probability
        confidence = self.campaign.criteria.confidence
        lines, settled = [], []
        for s in summaries:
            cuts = s.cycles - s.errors
            verdict = rule.drive_verdict(s.dead, len(s.failures), cuts, rate, confidence)
            found = _classes(s.failures) or "no failure"
            line = (
                f"ch{s.channel} {s.label}: {verdict}; {s.cycles} cycles, {s.errors} rig errors,"
                f" {found}" + (f"; stopped: {s.stopped_by}" if s.stopped_by else "")
            )
            lines.append(line)
            if s.failures and s.channel not in self._failed:
                self._failed.add(s.channel)
                self._send(settings.FAIL, f"FAIL on ch{s.channel} {s.label}", line, "failure")
            if verdict in SETTLED_VERDICTS:
                settled.append((s.label, verdict))
        if settled:  # one notice for the drives the fixed-sample rule settled
            self._send(
                settings.VERDICT,
                "verdicts: " + ", ".join(f"{verdict} {label}" for label, verdict in settled),
                "\n".join(f"{label}: {verdict}" for label, verdict in settled)
                + f"\n(criteria: failure probability per cut < {rate:g} at {confidence:g})",
                "failure" if any(v != "PASS" for _, v in settled) else "success",
            )
        judged, outside = self._timing
        if judged and outside > OUTSIDE_WARN * judged:  # the plan was not kept: say so
            lines.append(
                f"warning: {outside} of {judged} cuts ({100 * outside / judged:.1f} %) fell"
                " outside the requested delay range"
            )
        status = "stopped" if stopped else "done"
        worst = "failure" if any(s.failures or s.dead for s in summaries) else "info"
        self._send(
            settings.CAMPAIGN_END,
            f"campaign {status}",
            f"campaign {self.campaign.name} {status}.\n" + "\n".join(lines),
            worst,
        )

    def _plan_decided(self, drive: DriveRun) -> None:
        """A sequential plan that this drive's cut settled is told once (docs/campaign.md)."""
        if drive.settlement is None:
            return
        done = drive.settlement.decision(drive.plan_key)
        with self._lock:
            new = done is not None and drive.plan_key not in self._plans_told
            if new:
                self._plans_told.add(drive.plan_key)
        if new and done is not None:
            self.verdict_settled(
                f"plan over {drive.plan_key}",
                done.decision,
                f"Sequential plan settled after {done.cuts} cuts ({done.failing} failing),"
                f" on ch{drive.spec.channel}'s cut: {drive.settlement.told(drive.plan_key)}.",
            )
