"""A PostgreSQL server of the test's own: Debian's binaries, `initdb` in a temporary folder, its
own port and socket folder, run as the `postgres` user (the server refuses root), optionally inside
a network namespace; stopped by its PID and removed even when the test fails."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "rig_admin"


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def requirements() -> str:
    """Empty when this machine can run a test server, else why not."""
    if pg_bin() is None:
        return "PostgreSQL server binaries missing (Debian package postgresql)"
    if os.geteuid() != 0:
        return "needs root (runs the server as the postgres user)"
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user (Debian package postgresql creates it)"
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    root: Path
    port: int
    socket_dir: Path
    proc: subprocess.Popen[bytes]
    listen: str

    def dsn(self, user: str = SUPERUSER, password: str = "", host: str = "") -> str:
        where = host or str(self.socket_dir)
        auth = f" password={password}" if password else ""
        return f"host={where} port={self.port} dbname=rig user={user}{auth}"

    def psql(self, command: str) -> str:
        done = subprocess.run(
            [
                str(pg_bin() / "psql"),
                "-X",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                self.dsn(),
                "-c",
                command,
            ],  # type: ignore[operator]
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout


def _as_postgres(argv: list[str], netns: str = "") -> list[str]:
    """Run argv as the postgres user (setpriv execs: the PID stays the server's)."""
    drop = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
    return (["ip", "netns", "exec", netns] if netns else []) + drop + argv


@contextmanager
def cluster(listen: str = "", netns: str = "", *, fsync: bool = False) -> Iterator[Cluster]:
    """A running server with a database `rig` owned by superuser `rig_admin` (trusted on the
    socket; TCP clients on `listen` addresses log in with passwords)."""
    why = requirements()
    if why:
        raise RuntimeError(why)
    binaries = pg_bin()
    assert binaries is not None
    root = Path(tempfile.mkdtemp(prefix="rig-pg-"))
    os.chmod(root, 0o755)
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    shutil.chown(root, "postgres", "postgres")
    shutil.chown(sockets, "postgres", "postgres")
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            _as_postgres(
                [
                    str(binaries / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    SUPERUSER,
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
        )
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write("host all all 0.0.0.0/0 scram-sha-256\n")
        port = free_port()
        log = open(root / "server.log", "wb")  # noqa: SIM115 - closed below
        options = [
            "-c",
            f"listen_addresses={listen}",
            "-c",
            f"unix_socket_directories={sockets}",
            "-p",
            str(port),
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=64MB",
        ]
        if not fsync:  # tests only: the bench runs with the server's defaults
            options += ["-c", "fsync=off", "-c", "synchronous_commit=off"]
        proc = subprocess.Popen(
            _as_postgres([str(binaries / "postgres"), "-D", str(data), *options], netns),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(root / 'server.log').read_text()[-2000:]}")
            ready = subprocess.run(
                [str(binaries / "pg_isready"), "-h", str(sockets), "-p", str(port)],
                capture_output=True,
                check=False,
            )
            if ready.returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("postgres did not start in 60 s")
        subprocess.run(
            [
                str(binaries / "createdb"),
                "-h",
                str(sockets),
                "-p",
                str(port),
                "-U",
                SUPERUSER,
                "rig",
            ],
            check=True,
            capture_output=True,
        )
        yield Cluster(root, port, sockets, proc, listen)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(2)  # SIGINT: fast shutdown, this PID only
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        with contextlib.suppress(OSError):
            shutil.rmtree(root)
