# PYTHON_ARGCOMPLETE_OK
"""The `rig` command: demo, run, drives, status, report, fleet, serve, clean-sim.

Shell completion comes from argcomplete (`eval "$(register-python-argcomplete rig)"`); the
marker above lets its global completion find this entry point too."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rig.errors import RigError, UserError
from rig.interface import cli_json

# Every command pays for what this module imports: each command imports its own modules inside
# its function (`rig status` needs no numpy or scipy: docs/decisions.md, "A command imports
# only what it runs"); these only for the types
if TYPE_CHECKING:
    from rig.campaign.model import DriveSummary
    from rig.config.criteria import Criteria


def _print_summaries(summaries: list[DriveSummary], criteria: Criteria) -> None:
    """Each drive's counts and its verdict by the report's per-drive rule (rig/verdict/rule.py):
    failure-free cuts are PASS only once they demonstrate the campaign's criteria."""
    from rig.verdict import rule as verdicts

    rate, confidence = criteria.max_failure_probability, criteria.confidence
    print()
    print(f"{'ch':>2}  {'drive':<48} {'cycles':>6} {'errors':>6}  verdict / failures")
    for s in summaries:
        failures = ", ".join(f"{cls} x{n}" for cls, n in sorted(s.failures.items()))
        cuts = s.cycles - s.errors
        verdict = verdicts.drive_verdict(s.dead, len(s.failures), cuts, rate, confidence)
        settled = s.stopped_by.startswith("plan settled: ")
        if settled and verdict not in (verdicts.FAIL, verdicts.DEAD):  # (a failure stays)
            # one verdict: the sequential plan's, not the fixed-sample bound's beside it
            decision, _, after = s.stopped_by.removeprefix("plan settled: ").partition(" after ")
            verdict = f"{decision} (sequential plan, after {after})"
        elif verdict == verdicts.NOT_YET:
            needed = verdicts.cuts_still_needed(cuts, rate, confidence)
            verdict += f" (no failure; {needed} more failure-free cuts for p < {rate:g})"
        print(
            f"{s.channel:>2}  {s.label:<48} {s.cycles:>6} {s.errors:>6}  {verdict}"
            f"{': ' + failures if failures else ''}"
            f"  (allowed losses of unflushed writes: {s.allowed_losses})"
        )


def cmd_demo(args: argparse.Namespace) -> int:
    import reports
    from rig.campaign import runner
    from rig.campaign.progress import Progress
    from rig.interface import demo
    from rig.station.build import build as build_station
    from rig.station.kinds.simulated import truth_path

    out = Path(args.out)
    db = out / "demo.sqlite"
    log = runner.default_log_path(str(db))
    earlier = [p for p in (db, Path(log), truth_path(str(db)), out / "report.html") if p.exists()]
    # An earlier demo's record is never replaced:
    # docs/decisions.md, "rig demo is a campaign run like any other".
    if earlier:
        raise UserError(
            f"rig demo --out {out}: holds an earlier demo ({earlier[0].name}); give another"
            " --out, or remove that folder first"
        )
    campaign = demo.campaign(args.cycles, args.in_process)
    out.mkdir(parents=True, exist_ok=True)
    print(demo.headline(campaign))
    result = runner.run(
        build_station,
        campaign=campaign,
        db=str(db),
        log_path=log,
        progress=Progress(live=False if args.quiet else None),
    )
    _print_summaries(result.summaries, result.criteria)
    if result.signal:
        print(f"stopped by {signal.Signals(result.signal).name}")
        return 128 + result.signal
    report = reports.write_report([str(db)], str(out))
    truth = truth_path(str(db))
    if truth.exists():
        print(f"\ntruth:  {truth}  (what the simulated drives really did, per cut)", end="")
    print(f"\nstore:  {db}\nlog:    {log}\nreport: {report}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from rig.campaign import runner
    from rig.campaign.progress import Progress
    from rig.station.build import build as build_station

    if bool(args.campaign) == bool(args.resume):
        raise UserError("rig run: give a campaign file, or --resume STORE (not both)")
    if args.resume and args.db:
        raise UserError("rig run: --db is for a new campaign; --resume names the store")
    progress = Progress(live=False if args.quiet else None)
    result = runner.run(
        build_station,
        campaign_path=args.campaign or "",
        resume_db=args.resume or "",
        db=args.db or "",
        log_path=args.log or "",
        progress=progress,
    )
    for line in result.finished_before:
        print(f"already finished: {line}")
    _print_summaries(result.summaries, result.criteria)
    print(f"\nstore: {result.db}\nlog:   {result.log}")
    if result.signal:
        name = signal.Signals(result.signal).name
        if result.resumable:
            print(f"stopped by {name}; continue with: rig run --resume {result.db}")
        else:  # a simulated station's drives died with the rig: nothing to continue
            print(f"stopped by {name}; a simulated campaign cannot be resumed")
        return 128 + result.signal
    return 1 if any(s.failures or s.dead for s in result.summaries) else 0


def cmd_drives(args: argparse.Namespace) -> int:
    from rig.bus.udev import UdevPresence
    from rig.health.tools import ToolRunner
    from rig.station import drives

    if args.stanza and args.json:
        raise UserError("rig drives: --stanza prints a campaign block; it has no --json")
    nodes = UdevPresence().candidates()
    if args.stanza:
        node = next((n for n in nodes if n.devnode == args.stanza), None)
        if node is None:
            raise UserError(f"{args.stanza}: no such drive")
        print(drives.stanza(node))
        return 0
    if args.json:
        print(cli_json.dumps(cli_json.drives(drives.rows(nodes, ToolRunner(timeout_s=10.0)))))
        return 0
    print("\n".join(drives.table(nodes, ToolRunner(timeout_s=10.0))))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import reports
    from rig.store import open_read_only
    from rig.verdict import rule as verdicts

    store = open_read_only(args.db)  # never created, upgraded or written
    try:
        report = reports.load_summary(store)
    finally:
        store.close()
    failing = any(d.verdict in (verdicts.FAIL, verdicts.DEAD) for d in report.drives)
    if args.json:
        print(cli_json.dumps(cli_json.status(args.db, report, failing)))
    else:
        print(reports.summary_text(report))
    return 1 if failing else 0


def cmd_report(args: argparse.Namespace) -> int:
    import reports

    if not 0.5 <= args.confidence < 1.0:
        raise UserError(f"--confidence {args.confidence}: must lie in [0.5, 1)")
    if not args.db and not args.central:
        raise UserError("rig report: give stores, --central DSN, or both")
    if args.cut_rows and not args.central:
        raise UserError("rig report: --cut-rows is for --central (a store's cuts are listed)")
    if not args.central:
        out = args.out or os.path.splitext(args.db[0])[0] + "-report"
        print(reports.write_report(args.db, out, args.confidence, args.junit or "", args.markdown))
        return 0
    from rig.interface.fleet.central import CentralStore

    with CentralStore(args.central) as store:
        parts = [reports.read_central(store, cut_rows=args.cut_rows)]
        parts += [reports.load_dataset(args.db)] if args.db else []
        out = args.out or "fleet-report"
        data = reports.merge_datasets(
            parts
        )  # (written while the store is open: --cut-rows reads it)
        made = reports.write_dataset_report(
            data, out, args.confidence, args.junit or "", args.markdown
        )
    print(made)
    return 0


def cmd_clean_sim(args: argparse.Namespace) -> int:
    from fixtures.simssd import cleanup

    done = cleanup.clean(everything=args.all)
    print("\n".join(done) if done else "nothing to clean")
    return 0


EXIT_STATUS = """exit status:
  0    done; no drive failed
  1    a drive FAILed or is DEAD (rig run, rig status)
  2    bad input (a malformed file, an unknown drive or store, a refused device), before any
       write
  3    a fault of the rig itself (serial link, host error)
  128+N  stopped by signal N (130: Ctrl-C), power restored"""

STATUS_EXIT = (
    "exit status: 0 when no drive FAILed and none is DEAD (each PASS or NOT YET DEMONSTRATED),"
    " 1 when any drive FAILed or is DEAD, 2 on bad input (not a rig store, a missing file)."
)


def version_text() -> str:
    """The package's version (its metadata) and the board protocol this host speaks."""
    from importlib import metadata

    from rig.power.relay.wire import FIRMWARE_VERSION, PROTOCOL_VERSION

    try:
        version = metadata.version("powerfault-rig")
    except metadata.PackageNotFoundError:
        version = "(not installed: run make setup or make station)"
    return (
        f"rig {version} (relay board protocol v{PROTOCOL_VERSION},"
        f" firmware {FIRMWARE_VERSION} speaks it)"
    )


class VersionAction(argparse.Action):
    """--version, computed only when asked (completion builds the parser on every <Tab>)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rig",
        description="SSD power-fault test rig",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action=VersionAction, help="the rig's version and its board protocol"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="a short campaign on the simulated rig, then its report")
    demo.add_argument("--out", default="demo-out", help="folder for the store and the report")
    demo.add_argument("--cycles", type=int, default=0, help="cuts per drive (default: 60)")
    demo.add_argument("--quiet", action="store_true", help="plain progress lines, no live table")
    demo.add_argument(
        "--in-process",
        action="store_true",
        help="in-process virtual drives instead of the full-system twin (fast, no root needed)",
    )
    demo.set_defaults(func=cmd_demo)
    run = sub.add_parser("run", help="run a campaign file, or resume one from its store")
    run.add_argument("campaign", nargs="?", help="campaign file (docs/campaign.md)")
    run.add_argument("--resume", metavar="STORE", help="continue the store's last campaign")
    run.add_argument("--db", help="SQLite store (default: <campaign name>.sqlite)")
    run.add_argument("--log", help="JSON-lines run log (default: <store>.log.jsonl)")
    run.add_argument("--quiet", action="store_true", help="plain progress lines, no live table")
    run.set_defaults(func=cmd_run)
    drives = sub.add_parser("drives", help="candidate drives, their identity and whether safe")
    drives.add_argument("--stanza", metavar="NODE", help="print the campaign stanza for NODE")
    drives.add_argument("--json", action="store_true", help="schema rig.drives/1 (docs/json.md)")
    drives.set_defaults(func=cmd_drives)
    status = sub.add_parser(
        "status", help="per-drive summary of a store; exit 1 if a drive failed", epilog=STATUS_EXIT
    )
    status.add_argument("db", metavar="STORE", help="the SQLite store to read (never written)")
    status.add_argument("--json", action="store_true", help="schema rig.status/1 (docs/json.md)")
    status.set_defaults(func=cmd_status)
    report = sub.add_parser(
        "report", help="per-model report (HTML, JSON, CSV) of one or more stores, merged"
    )
    report.add_argument("db", nargs="*", help="SQLite stores, e.g. one per station")
    report.add_argument(
        "--central", help="the fleet's central PostgreSQL (libpq DSN), merged with any stores"
    )
    report.add_argument("--out", help="report folder (default: <first store>-report)")
    report.add_argument("--confidence", type=float, default=0.95, help="default 0.95")
    report.add_argument(
        "--junit", metavar="FILE", help="the verdicts as JUnit XML (default: junit.xml in --out)"
    )
    report.add_argument("--markdown", metavar="FILE", help="a Markdown summary of the verdicts")
    report.add_argument(
        "--cut-rows",
        action="store_true",
        help="with --central: cuts.csv lists the central database's cycles too, streamed from"
        " the server (time and file grow with the cuts; without it the report reads none)",
    )
    report.set_defaults(func=cmd_report)
    from rig.interface import station_check as check_cli
    from rig.interface.fleet import cli as fleet_cli

    fleet_cli.add_parsers(sub)
    check_cli.add_parsers(sub)
    clean = sub.add_parser(
        "clean-sim", help="remove loop devices, mounts, rules and processes a simulator left"
    )
    clean.add_argument("--all", action="store_true", help="also simulators whose rig still runs")
    clean.set_defaults(func=cmd_clean_sim)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a completing shell asks (argcomplete's own variable)
        import argcomplete

        argcomplete.autocomplete(parser)  # answers the shell and exits
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except UserError as error:
        print(f"rig: error: {error}", file=sys.stderr)
        return 2
    except RigError as error:
        print(f"rig: rig fault: {error}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("rig: interrupted; power restored to the safe state", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
