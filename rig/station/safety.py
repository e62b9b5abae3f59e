"""Interlocks of a destructive tool (docs/architecture.md, "Safety rules"): refuse a device that
anything else uses.

Each check returns reasons as short phrases; `check` turns the first into one clear error line.
Signatures and partitions may be overridden by a campaign that names this exact identity with
`allow_wipe = true`; a mounted device, holders, swap or the running system never. "The running
system" is every disk under /, /boot, /usr, /var and swap, followed down through dm/md slaves.
"""

from __future__ import annotations

import os
import subprocess

from rig.errors import UnsafeDeviceError

SYS_BLOCK = "/sys/class/block"  # a parameter below so tests can show a holder this kernel lacks


def _sys_name(devnode: str) -> str:
    return os.path.basename(os.path.realpath(devnode))


def _dev_numbers(name: str, sys_block: str = SYS_BLOCK) -> set[str]:
    """major:minor of the device and of each of its partitions."""
    numbers = set()
    base = f"{sys_block}/{name}"
    for entry in [base, *(os.path.join(base, p) for p in partitions(name, sys_block))]:
        try:
            with open(os.path.join(entry, "dev")) as handle:
                numbers.add(handle.read().strip())
        except OSError:
            continue
    return numbers


def partitions(name: str, sys_block: str = SYS_BLOCK) -> list[str]:
    base = f"{sys_block}/{name}"
    try:
        entries = os.listdir(base)
    except OSError:
        return []
    return sorted(e for e in entries if os.path.exists(os.path.join(base, e, "partition")))


def holders(name: str, sys_block: str = SYS_BLOCK) -> list[str]:
    """Devices stacked on the disk or its partitions (dm, md, bcache: LVM, RAID, crypt)."""
    found = []
    for part in [name, *partitions(name, sys_block)]:
        path = (
            f"{sys_block}/{name}/holders" if part == name else f"{sys_block}/{name}/{part}/holders"
        )
        try:
            found.extend(os.listdir(path))
        except OSError:
            continue
    return sorted(found)


def mount_points(name: str, sys_block: str = SYS_BLOCK) -> list[str]:
    numbers = _dev_numbers(name, sys_block)
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


def swap_users(name: str, sys_block: str = SYS_BLOCK) -> list[str]:
    wanted = {name, *partitions(name, sys_block)}
    try:
        with open("/proc/swaps") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return []
    return [line.split()[0] for line in lines if _sys_name(line.split()[0]) in wanted]


SYSTEM_PATHS = ("/", "/boot", "/boot/efi", "/usr", "/var")


def _whole_disks(sys_dir: str, seen: set[str]) -> set[str]:
    """The whole disks under a block device: itself (or its parent, for a partition) and,
    through dm/md `slaves`, every disk it is built on."""
    real = os.path.realpath(sys_dir)
    if real in seen:
        return set()
    seen.add(real)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    disks = {os.path.basename(real)}
    try:
        slaves = os.listdir(os.path.join(real, "slaves"))
    except OSError:
        slaves = []
    for slave in slaves:
        disks |= _whole_disks(os.path.join(real, "slaves", slave), seen)
    return disks


def system_disks(paths: tuple[str, ...] = SYSTEM_PATHS) -> dict[str, str]:
    """Whole disks that the running system lives on (root, boot, /usr, /var, swap), each with
    the first path it backs. Paths on no block device (tmpfs, overlay) back nothing."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            number = os.stat(path).st_dev
        except OSError:
            continue
        sys_dir = f"/sys/dev/block/{os.major(number)}:{os.minor(number)}"
        if os.path.exists(sys_dir):
            for disk in _whole_disks(sys_dir, set()):
                found.setdefault(disk, path)
    try:
        with open("/proc/swaps") as handle:
            swaps = [line.split()[0] for line in handle.read().splitlines()[1:] if line.strip()]
    except OSError:
        swaps = []
    for swap in swaps:
        name = _sys_name(swap)
        if os.path.exists(f"/sys/class/block/{name}"):
            for disk in _whole_disks(f"/sys/class/block/{name}", set()):
                found.setdefault(disk, f"swap {swap}")
    return found


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


def refusal_reasons(
    devnode: str, allow_wipe: bool = False, sys_block: str = SYS_BLOCK
) -> list[str]:
    name = _sys_name(devnode)
    reasons = []
    backs = system_disks().get(name)
    if backs:
        reasons.append(f"backs the running system ({backs})")
    reasons += [f"mounted at {point}" for point in mount_points(name, sys_block)]
    reasons += [f"in use as swap ({user})" for user in swap_users(name, sys_block)]
    reasons += [f"held by {holder}" for holder in holders(name, sys_block)]
    if not allow_wipe:
        parts = partitions(name, sys_block)
        if parts:
            reasons.append(f"has partitions ({', '.join(parts)})")
        reasons += [f"holds a {kind} signature" for kind in signatures(devnode)]
    return reasons


def check(devnode: str, label: str, allow_wipe: bool = False, sys_block: str = SYS_BLOCK) -> None:
    reasons = refusal_reasons(devnode, allow_wipe, sys_block)
    if reasons:
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        raise UnsafeDeviceError(f"refusing {devnode} ({label}): {reasons[0]}{more}")
