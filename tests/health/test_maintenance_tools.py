"""The maintenance interface's real implementation (rig/health/maintenance.py) on recorded
identify data and a runner that answers as the tools do: what each operation runs, what the
status log says, and the refusals."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.health import maintenance as m
from rig.health.errors import ToolFailed
from rig.health.tools import ToolResult

RECORDED = Path(__file__).parents[2] / "fixtures" / "recorded"
QEMU = (RECORDED / "qemu" / "nvme-id-ctrl.json").read_text()
INTEL = (RECORDED / "nvme" / "id-ctrl" / "nvme0.json").read_text()


class Answers:
    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.ran: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> ToolResult:
        self.ran.append(tuple(argv))
        code, out = self.answers.get(" ".join(argv[:2]), (0, "{}"))
        return ToolResult(tuple(argv), code, out, "" if code == 0 else "failed: no such thing")


def node(devnode: str = "/dev/nvme0n1", blocks: int = 1000) -> DriveNode:
    return DriveNode(DriveIdentity("M", "S"), devnode, blocks * 4096, 4096, 4096)


def test_capabilities_from_recorded_identify_data() -> None:
    """QEMU 7.2: Format NVM only (OACS 0x10a, SANICAP 0); the Intel P4510: crypto and block
    erase sanitize (SANICAP 3), format, firmware commands with one slot (OACS 0x0e, FRMW 2)."""
    assert m.nvme_capabilities(QEMU) == {m.FORMAT}
    assert m.nvme_capabilities(INTEL) == {m.SANITIZE_CRYPTO, m.SANITIZE_BLOCK, m.FORMAT, m.FIRMWARE}


@pytest.mark.parametrize(
    ("text", "state", "progress"),
    [
        ('{"nvme0": {"sprog": 32768, "sstat": 2}}', m.IN_PROGRESS, 0.5),
        ('{"sprog": 65535, "sstat": 257}', m.COMPLETED, 65535 / 65536),  # (bits 3-7: count)
        ('{"nvme0": {"sprog": 0, "sstat": 3}}', m.FAILED, 0.0),
        ('{"nvme0": {"sprog": 0, "sstat": 0}}', m.IDLE, 0.0),
        ('{"nvme0": {"sprog": 0, "sstat": 4}}', m.COMPLETED, 0.0),
    ],
)
def test_the_sanitize_status_log(text: str, state: str, progress: float) -> None:
    assert m.sanitize_status(text) == m.OpStatus(state, progress)


def test_each_operation_runs_its_tool() -> None:
    runner = Answers({"nvme id-ctrl": (0, INTEL)})
    tools = m.ToolMaintenance(runner)
    for op in (m.SANITIZE_BLOCK, m.SANITIZE_CRYPTO, m.FORMAT):
        tools.start(node(), m.MaintenanceSpec(op, (1.0, 2.0)))
    fw = m.MaintenanceSpec(m.FIRMWARE, (1.0, 2.0), "/fw/X.bin", "X")
    tools.start(node(), fw)
    tools.start(node("/dev/sdb"), m.MaintenanceSpec(m.SANITIZE_OVERWRITE, (1.0, 2.0)))
    assert runner.ran == [
        ("nvme", "sanitize", "/dev/nvme0n1", "--sanact=2"),
        ("nvme", "sanitize", "/dev/nvme0n1", "--sanact=4"),
        ("nvme", "format", "/dev/nvme0n1", "--ses=1", "--force"),
        ("nvme", "fw-download", "/dev/nvme0n1", "-f", "/fw/X.bin"),
        ("nvme", "fw-commit", "/dev/nvme0n1", "--slot=1", "--action=3"),
        ("sg_sanitize", "--quick", "--early", "--overwrite", "/dev/sdb"),
    ]
    assert tools.revision(node()) == "VDV10170"


def test_a_failing_tool_is_a_typed_error() -> None:
    tools = m.ToolMaintenance(Answers({"nvme sanitize": (1, "")}))
    with pytest.raises(ToolFailed, match="nvme sanitize failed"):
        tools.start(node(), m.MaintenanceSpec(m.SANITIZE_BLOCK, (1.0, 2.0)))


def test_refusals() -> None:
    runner = Answers(
        {
            "nvme id-ctrl": (0, QEMU),
            "nvme list-ns": (0, json.dumps({"nsid_list": [{"nsid": 1}, {"nsid": 2}]})),
        }
    )
    tools = m.ToolMaintenance(runner)
    whole = (0, 1000)
    sanitize = m.MaintenanceSpec(m.SANITIZE_BLOCK, (1.0, 2.0))
    fmt = m.MaintenanceSpec(m.FORMAT, (1.0, 2.0))
    assert "does not support sanitize_block" in m.refusal(sanitize, tools, node(), whole)
    assert m.refusal(fmt, tools, node(), whole) == ""
    assert "beyond the test region" in m.refusal(fmt, tools, node(), (0, 999))
    assert "cannot run maintenance" in m.refusal(fmt, None, node(), whole)
    runner.answers["nvme id-ctrl"] = (0, INTEL)
    assert "all its namespaces" in m.refusal(sanitize, tools, node(), whole)
    runner.answers["nvme list-ns"] = (0, json.dumps({"nsid_list": [{"nsid": 1}]}))
    assert m.refusal(sanitize, tools, node(), whole) == ""


def test_a_drive_the_tools_cannot_ask_is_refused_with_the_reason() -> None:
    tools = m.ToolMaintenance(Answers({"sg_opcodes --compact": (1, "")}))
    spec = m.MaintenanceSpec(m.FORMAT, (1.0, 2.0))
    why = m.refusal(spec, tools, node("/dev/loop7"), (0, 1000))
    assert why.startswith("drive M s/n S: cannot read which maintenance operations it supports")
