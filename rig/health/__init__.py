"""Health layer: SMART and identity through smartctl --json, nvme-cli and sg3_utils.

Modules: snapshot (typed results), smart (smartctl JSON parser), ata (its ATA attribute
mapping), delta (before/after and the counter-anomaly rules), tools (runner and smartctl
invocation), nvme, scsi, wcache.
Nothing is registered or run at import; callers wire a Runner in explicitly.
"""

from rig.health.delta import CounterAnomaly, CounterChange, HealthDelta, diff_snapshots
from rig.health.errors import (
    HealthToolError,
    ToolFailed,
    ToolMissing,
    ToolOutputError,
    ToolTimeout,
    ToolUsageError,
)
from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot, SmartctlExit, SmartIdentity
from rig.health.tools import (
    Runner,
    SmartctlReading,
    ToolResult,
    ToolRunner,
    smartctl_identity,
    smartctl_snapshot,
)

__all__ = [
    "CounterAnomaly",
    "CounterChange",
    "HealthDelta",
    "HealthSnapshot",
    "HealthToolError",
    "Runner",
    "SmartIdentity",
    "SmartctlExit",
    "SmartctlReading",
    "ToolFailed",
    "ToolMissing",
    "ToolOutputError",
    "ToolResult",
    "ToolRunner",
    "ToolTimeout",
    "ToolUsageError",
    "diff_snapshots",
    "parse_smartctl_json",
    "smartctl_identity",
    "smartctl_snapshot",
]
