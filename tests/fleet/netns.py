"""Network namespaces and veth links for fleet tests: a database namespace, and one link from it to
each station (a station in a namespace of its own, or in the host's namespace). Names carry a
per-run tag, so other test runs on this machine never meet them; everything is removed at the end
even when the test fails. The addresses live only inside these namespaces and on the links."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def requirements() -> str:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    probe = f"rigprobe{os.getpid()}"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create network namespaces: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return ""


@dataclass
class Link:
    station: str
    netns: str  # the station's namespace; "" = the host's
    station_if: str
    db_if: str
    station_addr: str
    db_addr: str

    def down(self) -> None:
        """Cut the station's link (both ends down: nothing passes either way)."""
        self._set("down")

    def up(self) -> None:
        self._set("up")

    def _set(self, state: str) -> None:
        ip(*(["-n", self.netns] if self.netns else []), "link", "set", self.station_if, state)


@dataclass
class Lab:
    tag: str
    db_netns: str
    links: dict[str, Link] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    host_ifs: list[str] = field(default_factory=list)

    def exec_prefix(self, station: str) -> list[str]:
        netns = self.links[station].netns
        return ["ip", "netns", "exec", netns] if netns else []


@contextmanager
def lab(stations: dict[str, bool]) -> Iterator[Lab]:
    """`stations`: name -> True for a namespace of its own, False for the host's namespace (a
    station that needs udev, whose events reach only the host's namespace)."""
    tag = f"{os.getpid() % 100000:05d}{random.randrange(16**3):03x}"
    net = f"10.{random.randrange(200, 250)}.{random.randrange(1, 250)}"
    made = Lab(tag, f"rigdb{tag}")
    try:
        ip("netns", "add", made.db_netns)
        made.namespaces.append(made.db_netns)
        ip("-n", made.db_netns, "link", "set", "lo", "up")
        for index, (name, own) in enumerate(stations.items()):
            netns = f"rig{name[:3]}{tag}" if own else ""
            station_if, db_if = f"rs{tag}{index}", f"rd{tag}{index}"
            if own:
                ip("netns", "add", netns)
                made.namespaces.append(netns)
                ip("-n", netns, "link", "set", "lo", "up")
                ip(
                    "link",
                    "add",
                    station_if,
                    "netns",
                    netns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    db_if,
                    "netns",
                    made.db_netns,
                )
            else:
                ip(
                    "link",
                    "add",
                    station_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    db_if,
                    "netns",
                    made.db_netns,
                )
                made.host_ifs.append(station_if)
            base = 4 * index
            link = Link(name, netns, station_if, db_if, f"{net}.{base + 2}", f"{net}.{base + 1}")
            side = ["-n", netns] if netns else []
            ip(*side, "addr", "add", f"{link.station_addr}/30", "dev", station_if)
            ip("-n", made.db_netns, "addr", "add", f"{link.db_addr}/30", "dev", db_if)
            ip(*side, "link", "set", station_if, "up")
            ip("-n", made.db_netns, "link", "set", db_if, "up")
            made.links[name] = link
        yield made
    finally:
        for name in made.host_ifs:
            ip("link", "del", name, check=False)
        for netns in reversed(made.namespaces):
            with contextlib.suppress(Exception):
                ip("netns", "del", netns, check=False)
