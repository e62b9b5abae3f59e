"""`rig fleet ...` and `rig serve`: the fleet's commands (wired into rig/interface/cli.py)."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from rig.errors import UserError

CENTRAL_ENV = "RIG_CENTRAL"


def _dsn(args: argparse.Namespace) -> str:
    dsn = args.central or os.environ.get(CENTRAL_ENV, "")
    if not dsn:
        raise UserError(f"name the central database: --central DSN or ${CENTRAL_ENV}")
    return dsn


def cmd_init_db(args: argparse.Namespace) -> int:
    from rig.interface.fleet import dispatch
    from rig.interface.fleet.central import CentralStore

    dsn = _dsn(args)
    created = dispatch.apply_queue_schema(dsn)
    with CentralStore(dsn) as central:
        version = central.migrate()
    queue = "created" if created else "present"
    print(f"central database: schema v{version}; procrastinate queue {queue}")
    return 0


def cmd_add_station(args: argparse.Namespace) -> int:
    from rig.interface.fleet.central import CentralStore

    password = args.password or secrets.token_urlsafe(18)
    with CentralStore(_dsn(args)) as central:
        role = central.add_station(args.name, password)
    print(f"station {args.name}: role {role} password {password}")
    return 0


def cmd_add_user(args: argparse.Namespace) -> int:
    from rig.interface.fleet.central import CentralStore

    password = args.password or secrets.token_urlsafe(18)
    with CentralStore(_dsn(args)) as central:
        central.add_user(args.name, password, args.kind)
    print(f"user {args.name} ({args.kind}): password {password}")
    return 0


def cmd_agent(args: argparse.Namespace) -> int:
    from rig.interface.fleet.agent import AgentConfig, StationAgent, load_inventory, udev_inventory

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr
    )
    inventory = load_inventory(args.inventory) if args.inventory else udev_inventory()
    station_table = Path(args.station_table).read_text() if args.station_table else ""
    agent = StationAgent(
        AgentConfig(
            station=args.station,
            dsn=_dsn(args),
            home=Path(args.home),
            inventory=inventory,
            station_table=station_table,
            ledgers=args.ledgers,
            heartbeat_s=args.heartbeat_s,
        )
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        agent.stopping.set()
        agent.wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.metrics_port:
        _agent_metrics(agent, args.station, args.metrics_host, args.metrics_port)
    print(
        f"agent of station {args.station}: {len(inventory)} drives, home {args.home}",
        flush=True,
    )
    agent.run()
    return 0


def _agent_metrics(agent: Any, station: str, host: str, port: int) -> None:
    """`/metrics` of the agent's campaign stores (named again at each scrape) on host:port."""
    from rig.interface.fleet import metrics

    def stores() -> list[str]:
        return [str(c.store) for c in agent.campaigns() if c.store.exists()]

    try:
        metrics.serve_stores(stores, station, host, port)
    except OSError as error:
        raise UserError(f"--metrics-port {port} on {host}: {error.strerror or error}") from error
    print(f"metrics on http://{host}:{port}/metrics", flush=True)


def cmd_replicate(args: argparse.Namespace) -> int:
    from rig.interface.fleet.central import CentralStore
    from rig.interface.fleet.replicator import replicate_store
    from rig.store import open_read_only

    with CentralStore(_dsn(args)) as central:
        station = central.my_station()
        for path in args.db:
            store = open_read_only(path)  # a replicator never creates or upgrades a store
            try:
                shipped = replicate_store(store, central, station, ledgers=args.ledgers)
            finally:
                store.close()
            print(f"{path}: {shipped} cycles shipped to station {station}")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from rig.interface.fleet import dispatch

    text = dispatch.read_campaign_file(args.campaign)
    done = dispatch.submit(_dsn(args), text, args.campaign)
    if done.warning:
        print(f"rig: warning: {done.warning}", file=sys.stderr)
    print(
        f"submission {done.submission_id}: {len(done.drives)} drives on station {done.station}"
        f" (job {done.job_id})"
    )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from rig.interface.fleet import dispatch

    print(dispatch.stop(_dsn(args), args.submission))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from rig.interface import cli_json
    from rig.interface.fleet.status import overview_text
    from rig.interface.fleet.views import CentralView

    view = CentralView(_dsn(args))
    try:
        overview = view.overview()
    finally:
        view.close()
    if args.json:
        print(cli_json.dumps(cli_json.fleet_status(overview)))
    else:
        print(overview_text(overview))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from fixtures import fleet_demo  # the simulated fleet, wired in explicitly

    return fleet_demo.run(Path(args.out), args.cycles, args.port, args.until_done)


def cmd_serve(args: argparse.Namespace) -> int:
    from rig.interface.fleet import dashboard

    if bool(args.central) == bool(args.db):
        raise UserError("rig serve: --central DSN (the fleet) or --db STORE... (one station)")
    token = ""
    if args.token_file:
        token = Path(args.token_file).read_text().strip()
        if len(token) < 16:
            raise UserError(f"{args.token_file}: a token of at least 16 characters")
    dashboard.serve(
        central=args.central or "",
        stores=args.db or [],
        dispatch_dsn=args.dispatch or "",
        token=token,
        host=args.host,
        port=args.port,
        notify_urls=tuple(args.notify or ()),
    )
    return 0


def _one_line(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A database refusal (a role without the right, a constraint) is one line and exit 2."""

    def run(args: argparse.Namespace) -> int:
        import psycopg

        try:
            return func(args)
        except psycopg.Error as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise UserError(f"central database: {first}") from error

    return run


def _heartbeat(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.2 <= value <= 60.0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds between 0.2 and 60")
    return value


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fleet = sub.add_parser("fleet", help="many stations: central database, agents, dispatch")
    commands = fleet.add_subparsers(dest="fleet_command", required=True)

    def central(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--central", help=f"central PostgreSQL (libpq DSN; default ${CENTRAL_ENV})"
        )
        return parser

    p = central(commands.add_parser("init-db", help="create or upgrade the central schema"))
    p.set_defaults(func=_one_line(cmd_init_db))
    p = central(commands.add_parser("add-station", help="a station and its database role"))
    p.add_argument("name")
    p.add_argument("--password", help="default: a random one, printed")
    p.set_defaults(func=_one_line(cmd_add_station))
    p = central(commands.add_parser("add-user", help="a reader or dispatch login role"))
    p.add_argument("name")
    p.add_argument("--kind", choices=("reader", "dispatch"), default="reader")
    p.add_argument("--password", help="default: a random one, printed")
    p.set_defaults(func=_one_line(cmd_add_user))
    p = central(commands.add_parser("agent", help="run this station's agent"))
    p.add_argument("--station", required=True)
    p.add_argument("--home", required=True, help="folder for the station's campaigns")
    p.add_argument("--inventory", help="TOML [[drive]] list (default: the drives udev sees)")
    p.add_argument("--station-table", help="TOML file with this station's [station] table")
    p.add_argument("--ledgers", action="store_true", help="replicate ledger blobs too")
    p.add_argument(
        "--metrics-port", type=int, default=0, help="serve /metrics on this port (default: off)"
    )
    p.add_argument("--metrics-host", default="127.0.0.1", help="its address (default 127.0.0.1)")
    p.add_argument(
        "--heartbeat-s",
        type=_heartbeat,
        default=2.0,
        help="seconds between heartbeats (default 2; shown stale after 3 missed)",
    )
    p.set_defaults(func=_one_line(cmd_agent))
    p = central(commands.add_parser("replicate", help="ship stores to the central database"))
    p.add_argument("db", nargs="+")
    p.add_argument("--ledgers", action="store_true", help="replicate ledger blobs too")
    p.set_defaults(func=_one_line(cmd_replicate))
    p = central(commands.add_parser("submit", help="submit a campaign file to the fleet"))
    p.add_argument("campaign")
    p.set_defaults(func=_one_line(cmd_submit))
    p = central(commands.add_parser("stop", help="stop a submitted campaign"))
    p.add_argument("submission", type=int)
    p.set_defaults(func=_one_line(cmd_stop))
    p = central(commands.add_parser("status", help="stations, campaigns and their progress"))
    p.add_argument("--json", action="store_true", help="schema rig.fleet-status/1 (docs/json.md)")
    p.set_defaults(func=_one_line(cmd_status))

    p = commands.add_parser(
        "demo", help="a fleet on this machine: PostgreSQL, three simulated stations, dashboard"
    )
    p.add_argument("--out", default="fleet-demo-out", help="folder for the stations' files")
    p.add_argument("--cycles", type=int, default=400, help="cuts per drive (default 400)")
    p.add_argument("--port", type=int, default=8080, help="the dashboard's port")
    p.add_argument("--until-done", action="store_true", help="stop when the campaigns end")
    p.set_defaults(func=_one_line(cmd_demo))

    _add_serve(sub)


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="the live dashboard (fleet or one station's store)")
    serve.add_argument("--central", help="central PostgreSQL to read (a reader role)")
    serve.add_argument(
        "--db",
        nargs="+",
        action="extend",
        metavar="STORE",
        help="or one station's SQLite stores (--db A B, or --db A --db B: all are served)",
    )
    serve.add_argument("--dispatch", help="DSN of a dispatch role, for submit and stop")
    serve.add_argument("--token-file", help="the token that submit and stop requests must carry")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--notify",
        action="append",
        metavar="URL",
        help="Apprise URL told when a station falls silent (repeatable; with --central)",
    )
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.set_defaults(func=_one_line(cmd_serve))
