"""Purge before a PTS-style endurance run: put the drive back in a fresh-out-of-box state.

Which purge a drive can take is asked of the drive itself through the health tools (the same
Runner, so tests put fake tools on PATH):
- NVMe: `nvme id-ctrl` says whether Sanitize (SANICAP: block erase, crypto erase) and Format
  NVM (OACS bit 1) are supported; sanitize is preferred (it covers every namespace's media);
- ATA: `smartctl -g security` says whether the security feature set is there and not frozen
  (a frozen drive refuses SECURITY ERASE UNIT until a power cycle); hdparm runs the erase;
- SCSI: `sg_opcodes` says whether SANITIZE (0x48) is supported; sg_sanitize runs a block erase;
- otherwise, a device whose queue takes discard (sysfs discard_max_bytes > 0) is purged by
  discarding the test region (the caller does that through its open target).
Anything else is refused with the reason. A purge by tool erases the WHOLE device, not only the
test region (docs/campaign.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rig.drive.node import DriveNode
from rig.errors import RigError
from rig.health.counters import load_json_object
from rig.health.errors import HealthToolError
from rig.health.tools import Runner
from rig.io import blockio

METHODS = ("auto", "discard", "nvme_sanitize", "nvme_format", "ata_secure_erase", "scsi_sanitize")
PASSWORD = "rig-pts"  # set only for the erase; SECURITY ERASE UNIT clears it again
OACS_FORMAT = 1 << 1
SANICAP_CRYPTO = 1 << 0
SANICAP_BLOCK = 1 << 1
SANITIZE_OPCODE = "0x48"
PURGE_TIMEOUT_S = 4 * 3600.0  # a sanitize or secure erase of a large drive takes hours


class PurgeRefused(RigError):
    """No purge applies to this drive (or the one asked for is not supported)."""


@dataclass(frozen=True)
class Capabilities:
    """What the drive says it supports."""

    kind: str  # nvme | ata | scsi | other
    nvme_sanitize: bool = False
    nvme_format: bool = False
    ata_security: bool = False
    ata_frozen: bool = False
    ata_password_set: bool = False  # security enabled (or locked): someone else's password
    scsi_sanitize: bool = False
    discard: bool = False


def choose(wanted: str, caps: Capabilities) -> str:
    """The purge to run for `wanted` (a METHODS name); raises PurgeRefused with the reason."""
    supported = {
        "nvme_sanitize": caps.nvme_sanitize,
        "nvme_format": caps.nvme_format,
        "ata_secure_erase": caps.ata_security and not caps.ata_frozen and not caps.ata_password_set,
        "scsi_sanitize": caps.scsi_sanitize,
        "discard": caps.discard,
    }
    if wanted == "auto":
        for method in ("nvme_sanitize", "nvme_format", "ata_secure_erase", "scsi_sanitize"):
            if supported[method]:
                return method
        if caps.discard:
            return "discard"
        frozen = " (its security feature set is frozen: power-cycle it)" if caps.ata_frozen else ""
        if caps.ata_password_set:
            frozen = " (a security password is already set on it)"
        raise PurgeRefused(
            f"no purge applies to this {caps.kind} device{frozen}: it supports no sanitize,"
            " format or secure erase, and its queue takes no discard"
        )
    if wanted not in supported:
        raise ValueError(f"unknown purge {wanted!r}")
    if not supported[wanted]:
        why = "the drive does not support it"
        if wanted == "ata_secure_erase" and caps.ata_frozen:
            why = "its security feature set is frozen"
        elif wanted == "ata_secure_erase" and caps.ata_password_set:
            why = "a security password is already set on it (the rig does not know it)"
        raise PurgeRefused(f"purge {wanted} refused on this {caps.kind} device: {why}")
    return wanted


def commands(method: str, devnode: str) -> list[list[str]]:
    """The tool invocations of a purge by tool (discard is run by the caller)."""
    if method == "nvme_sanitize":
        return [["nvme", "sanitize", devnode, "--sanact=2"]]  # block erase
    if method == "nvme_format":
        return [["nvme", "format", devnode, "--ses=1", "--force"]]  # user data erase
    if method == "ata_secure_erase":
        return [
            ["hdparm", "--user-master", "u", "--security-set-pass", PASSWORD, devnode],
            ["hdparm", "--user-master", "u", "--security-erase", PASSWORD, devnode],
        ]
    if method == "scsi_sanitize":
        return [["sg_sanitize", "--block", "--quick", "--wait", devnode]]
    raise ValueError(f"no tool purge {method!r}")


def _ok(runner: Runner, argv: list[str]) -> str | None:
    """The tool's output, or None when it could not answer."""
    try:
        result = runner.run(argv)
    except HealthToolError:
        return None
    return result.stdout if result.exit_code == 0 else None


def _flag(text: str | None, key: str, mask: int) -> bool:
    if text is None:
        return False
    try:
        value = load_json_object(text, key).get(key)
    except HealthToolError:
        return False
    return isinstance(value, int) and not isinstance(value, bool) and bool(value & mask)


def probe(devnode: str, kind: str, runner: Runner, discard_max_bytes: int) -> Capabilities:
    """Ask the drive (kind: nvme | ata | scsi | other) what purge it supports."""
    if kind == "nvme":
        ctrl = _ok(runner, ["nvme", "id-ctrl", devnode, "--output-format=json"])
        return Capabilities(
            kind,
            nvme_sanitize=_flag(ctrl, "sanicap", SANICAP_BLOCK | SANICAP_CRYPTO),
            nvme_format=_flag(ctrl, "oacs", OACS_FORMAT),
            discard=discard_max_bytes > 0,
        )
    if kind == "ata":
        text = _ok(runner, ["smartctl", "-g", "security", "--json", devnode])
        security: object = None
        if text is not None:
            try:
                security = load_json_object(text, "smartctl").get("ata_security")
            except HealthToolError:
                security = None
        supported, password_set, frozen = _ata_security(security)
        return Capabilities(
            kind,
            ata_security=supported,
            ata_frozen=frozen,
            ata_password_set=password_set,
            discard=discard_max_bytes > 0,
        )
    if kind == "scsi":
        answer = _ok(runner, ["sg_opcodes", f"--opcode={SANITIZE_OPCODE}", devnode])
        return Capabilities(kind, scsi_sanitize=answer is not None, discard=discard_max_bytes > 0)
    return Capabilities(kind, discard=discard_max_bytes > 0)


ATA_SEC_SUPPORTED, ATA_SEC_ENABLED, ATA_SEC_LOCKED, ATA_SEC_FROZEN = 0x1, 0x2, 0x4, 0x8


def _ata_security(security: object) -> tuple[bool, bool, bool]:
    """(supported, a password is set, frozen) from smartctl's `ata_security`: its `state` is
    IDENTIFY word 128 (ACS-2 table 6: bit 0 supported, 1 enabled, 2 locked, 3 frozen), given
    with `enabled` and `frozen` where the feature set is there. No object: not supported."""
    if not isinstance(security, dict):
        return False, False, False
    state = security.get("state")
    if isinstance(state, int) and not isinstance(state, bool):
        return (
            bool(state & ATA_SEC_SUPPORTED),
            bool(state & (ATA_SEC_ENABLED | ATA_SEC_LOCKED)),
            bool(state & ATA_SEC_FROZEN),
        )
    return True, security.get("enabled") is True, security.get("frozen") is True


SANITIZE_POLL_S = 5.0
SSTAT_DONE = (1, 4)  # SSTAT bits 2:0: completed (4: completed without deallocation)
SSTAT_FAILED = 3


def wait_sanitized(
    devnode: str,
    runner: Runner,
    timeout_s: float = PURGE_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """`nvme sanitize` returns once the operation has started; it runs in the background and
    the drive refuses I/O until it ends. Poll the sanitize log (SSTAT) until it completed."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = _ok(runner, ["nvme", "sanitize-log", devnode, "--output-format=json"])
        if text is None:
            raise RigError(f"purge nvme_sanitize: {devnode}: the sanitize log cannot be read")
        status = None
        if text:
            try:
                doc = load_json_object(text, "sanitize-log")
            except HealthToolError:
                doc = {}
            # nvme-cli keys the log by device name in some versions
            entry = next((v for v in doc.values() if isinstance(v, dict)), doc)
            sstat = entry.get("sstat")
            status = sstat & 0x7 if isinstance(sstat, int) and not isinstance(sstat, bool) else None
        if status in SSTAT_DONE:
            return
        if status == SSTAT_FAILED:
            raise RigError(f"purge nvme_sanitize: {devnode} reports the sanitize failed")
        if time.monotonic() > deadline:
            raise RigError(f"purge nvme_sanitize: {devnode} not done within {timeout_s:g} s")
        sleep(SANITIZE_POLL_S)


def run(
    method: str, devnode: str, runner: Runner, sleep: Callable[[float], None] = time.sleep
) -> None:
    for argv in commands(method, devnode):
        try:
            result = runner.run(argv, PURGE_TIMEOUT_S)
        except HealthToolError as error:
            raise PurgeRefused(f"purge {method}: {error}") from error
        if result.exit_code != 0:
            lines = (result.stderr or result.stdout).strip().splitlines()
            raise RigError(
                f"purge {method}: {' '.join(argv[:2])} failed (exit {result.exit_code})"
                f"{': ' + lines[-1] if lines else ''}"
            )
    if method == "nvme_sanitize":
        wait_sanitized(devnode, runner, sleep=sleep)


def sysfs_discard_max_bytes(devnode: str) -> int:
    """The block queue's discard limit; 0 when it takes no discard (or is not a block device)."""
    return blockio.queue_bytes(devnode, "discard_max_bytes")


# A station's purge capability: (the drive's node, the purge wanted) -> the method it ran;
# "discard" means the caller discards the test region through its open target.
DrivePurge = Callable[[DriveNode, str], str]
