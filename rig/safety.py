"""Interlocks of a destructive tool (ARCHITECTURE §6): refuse a device that anything else uses.

Each check returns reasons as short phrases; `check` turns the first into one clear error line.
Signatures and partitions may be overridden by a campaign that names this exact identity with
`allow_wipe = true`; a mounted device, holders, swap or the running system never.
"""

from __future__ import annotations

import os
import subprocess

from rig.errors import UnsafeDeviceError


def _sys_name(devnode: str) -> str:
    return os.path.basename(os.path.realpath(devnode))


def _dev_numbers(name: str) -> set[str]:
    """major:minor of the device and of each of its partitions."""
    numbers = set()
    base = f"/sys/class/block/{name}"
    for entry in [base, *(os.path.join(base, p) for p in partitions(name))]:
        try:
            with open(os.path.join(entry, "dev")) as handle:
                numbers.add(handle.read().strip())
        except OSError:
            continue
    return numbers


def partitions(name: str) -> list[str]:
    base = f"/sys/class/block/{name}"
    try:
        entries = os.listdir(base)
    except OSError:
        return []
    return sorted(e for e in entries if os.path.exists(os.path.join(base, e, "partition")))


def holders(name: str) -> list[str]:
    found = []
    for part in [name, *partitions(name)]:
        path = (
            f"/sys/class/block/{name}/holders"
            if part == name
            else (f"/sys/class/block/{name}/{part}/holders")
        )
        try:
            found.extend(os.listdir(path))
        except OSError:
            continue
    return sorted(found)


def mount_points(name: str) -> list[str]:
    numbers = _dev_numbers(name)
    points = []
    try:
        with open("/proc/self/mountinfo") as handle:
            for line in handle:
                fields = line.split()
                if fields[2] in numbers:
                    points.append(fields[4])
    except OSError:
        pass
    return points


def swap_users(name: str) -> list[str]:
    wanted = {name, *partitions(name)}
    try:
        with open("/proc/swaps") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return []
    return [line.split()[0] for line in lines if _sys_name(line.split()[0]) in wanted]


def signatures(devnode: str) -> list[str]:
    """Filesystem, RAID, LVM and partition-table signatures found by blkid's low-level probe."""
    try:
        probe = subprocess.run(
            ["blkid", "-p", "-o", "export", devnode],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"could not probe for signatures ({error})"]
    if probe.returncode == 2:  # nothing found
        return []
    if probe.returncode != 0:
        return [f"could not probe for signatures (blkid exit {probe.returncode})"]
    values = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
    kinds = [values[key] for key in ("TYPE", "PTTYPE") if key in values]
    return kinds or ["an unrecognised signature"]


def refusal_reasons(devnode: str, allow_wipe: bool = False) -> list[str]:
    name = _sys_name(devnode)
    reasons = [f"mounted at {point}" for point in mount_points(name)]
    reasons += [f"in use as swap ({user})" for user in swap_users(name)]
    reasons += [f"held by {holder}" for holder in holders(name)]
    if not allow_wipe:
        parts = partitions(name)
        if parts:
            reasons.append(f"has partitions ({', '.join(parts)})")
        reasons += [f"holds a {kind} signature" for kind in signatures(devnode)]
    return reasons


def check(devnode: str, label: str, allow_wipe: bool = False) -> None:
    reasons = refusal_reasons(devnode, allow_wipe)
    if reasons:
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        raise UnsafeDeviceError(f"refusing {devnode} ({label}): {reasons[0]}{more}")
