"""Volatile write cache: read and set it with hdparm (ATA), sdparm (SCSI/SAT) or nvme-cli.

Output formats, from the tools' sources:
- hdparm -W: " write-caching =  1 (on)" (or "not supported").
- sdparm --get=WCE: "WCE           1  [cha: y, def:  1, sav:  1]" (bracket part varies).
- nvme get-feature -f 6 (2.3): "get-feature:0x06 (Volatile Write Cache), Current value:0x00000001";
  printf "%#0*x" drops the 0x for zero, so "off" prints as "Current value:00000000".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rig.health.errors import ToolOutputError, total_parser
from rig.health.tools import Runner, run_checked

CacheTool = Literal["hdparm", "sdparm", "nvme"]
NVME_FEATURE_VWC = 6


@dataclass(frozen=True)
class WriteCacheState:
    enabled: bool
    tool: CacheTool
    changeable: bool | None = None  # sdparm: the mode page bit may be changed
    saved: bool | None = None  # sdparm: value that survives a power cycle
    default: bool | None = None


def get_argv(tool: CacheTool, dev: str) -> list[str]:
    if tool == "hdparm":
        return ["hdparm", "-W", dev]
    if tool == "sdparm":
        return ["sdparm", "--get=WCE", dev]
    return ["nvme", "get-feature", dev, f"--feature-id={NVME_FEATURE_VWC}", "--sel=0"]


def set_argv(tool: CacheTool, dev: str, enabled: bool, save: bool = False) -> list[str]:
    """Arguments that set the cache. `save`: also the saved value (sdparm) / feature (nvme).

    hdparm has no separate save: ATA SET FEATURES lasts until the next power-on or reset
    unless the drive's own default is changed, so after a cut the campaign re-applies it.
    """
    bit = "1" if enabled else "0"
    if tool == "hdparm":
        return ["hdparm", f"-W{bit}", dev]
    if tool == "sdparm":
        return ["sdparm", f"--set=WCE={bit}", *(["--save"] if save else []), dev]
    return [
        "nvme",
        "set-feature",
        dev,
        f"--feature-id={NVME_FEATURE_VWC}",
        f"--value={bit}",
        *(["--save"] if save else []),
    ]


# ASCII digits only (\d also matches other scripts' digits), and never more than a flag needs.
_HDPARM = re.compile(r"write-caching\s*=\s*([0-9]{1,10}|not supported)", re.ASCII)
_SDPARM = re.compile(r"^WCE\s+(-?[0-9]{1,10})(?:\s+\[(.*)\])?", re.MULTILINE | re.ASCII)
_NVME_GET = re.compile(
    r"get-feature:0x0*6 \([^)]*\),\s*Current value:\s*(?:0x)?([0-9a-fA-F]{1,16})", re.ASCII
)
_FLAG = re.compile(r"-?[0-9]{1,10}", re.ASCII)


@total_parser("hdparm -W")
def parse_hdparm_w(text: str) -> WriteCacheState:
    matches = _HDPARM.findall(text)
    if not matches:
        raise ToolOutputError("hdparm -W: no 'write-caching =' line")
    value = matches[-1]  # when setting, the last line is the re-read state
    if value == "not supported":
        raise ToolOutputError("hdparm -W: write-caching not supported by this device")
    return WriteCacheState(enabled=int(value) != 0, tool="hdparm")


@total_parser("sdparm --get=WCE")
def parse_sdparm_wce(text: str) -> WriteCacheState:
    match = _SDPARM.search(text)
    if match is None:
        raise ToolOutputError("sdparm --get=WCE: no WCE line")
    extras: dict[str, str] = {}
    for part in (match.group(2) or "").split(","):
        if ":" in part:
            key, value = part.split(":", 1)
            extras[key.strip()] = value.strip()

    def flag(key: str) -> bool | None:
        value = extras.get(key)
        if value is None:
            return None
        if value in ("y", "n"):
            return value == "y"
        return bool(_FLAG.fullmatch(value)) and int(value) > 0

    return WriteCacheState(
        enabled=int(match.group(1)) > 0,
        tool="sdparm",
        changeable=flag("cha"),
        default=flag("def"),
        saved=flag("sav"),
    )


@total_parser("nvme get-feature")
def parse_nvme_vwc(text: str) -> WriteCacheState:
    match = _NVME_GET.search(text)
    if match is None:
        raise ToolOutputError("nvme get-feature: no 'Current value' line for feature 0x06")
    return WriteCacheState(enabled=bool(int(match.group(1), 16) & 1), tool="nvme")


_PARSERS = {"hdparm": parse_hdparm_w, "sdparm": parse_sdparm_wce, "nvme": parse_nvme_vwc}


def _run(argv: list[str], runner: Runner, timeout_s: float | None) -> str:
    return run_checked(argv, runner, timeout_s).stdout


def read_write_cache(
    tool: CacheTool, dev: str, runner: Runner, timeout_s: float | None = None
) -> WriteCacheState:
    return _PARSERS[tool](_run(get_argv(tool, dev), runner, timeout_s))


def set_write_cache(
    tool: CacheTool,
    dev: str,
    enabled: bool,
    runner: Runner,
    *,
    save: bool = False,
    timeout_s: float | None = None,
) -> WriteCacheState:
    """Set the cache, then read it back: the recorded state is what the drive reports."""
    _run(set_argv(tool, dev, enabled, save), runner, timeout_s)
    state = read_write_cache(tool, dev, runner, timeout_s)
    if state.enabled != enabled:
        raise ToolOutputError(
            f"{tool}: asked for write cache {'on' if enabled else 'off'}, drive reports "
            f"{'on' if state.enabled else 'off'}"
        )
    return state
