"""[cut] kind = off | sag | ramp | glitch: the keys of each kind, the per-cut draws over their
ranges, and a station whose switch cannot make the kind refusing the campaign before any write."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.errors import UserError
from rig.power import shapes
from rig.station.backends import StationKind
from tests.cli_runner import rig


def campaign_text(cut_lines: str, station: str = 'kind = "simulated"') -> str:
    return f"""
[campaign]
name = "kinds"
cycles = 1
[station]
{station}
[cut]
{cut_lines}
[[drive]]
channel = 0
model = "M"
serial = "S0"
profile = "honest"
"""


def test_each_kind_reads_its_own_keys() -> None:
    sag = campaign_spec.parse(
        campaign_text('kind = "sag"\ndepth_pct = [40, 80]\nduration_ms = [1, 20]'),
        kinds=_all_kinds(),
    )
    assert sag.cut.shape == shapes.ShapeSpec("sag", None, (40.0, 80.0), (1.0, 20.0), None)
    ramp = campaign_spec.parse(
        campaign_text('kind = "ramp"\nslew_v_per_ms = 0.5'), kinds=_all_kinds()
    )
    assert ramp.cut.shape == shapes.ShapeSpec("ramp", slew_v_per_ms=(0.5, 0.5))
    glitch = campaign_file.parse(campaign_text('kind = "glitch"\nduration_ms = [0.1, 2]'))
    assert glitch.cut.shape.kind == "glitch" and glitch.cut.shape.duration_ms == (0.1, 2.0)
    assert campaign_file.parse(campaign_text("")).cut.shape == shapes.ShapeSpec()


def _all_kinds() -> dict[str, StationKind]:
    """The simulated kind as if its switch made every kind (the parser's check alone)."""
    import dataclasses

    from rig.station import backends

    kinds = dict(backends.STATION_KINDS)
    kinds["simulated"] = dataclasses.replace(kinds["simulated"], cut_kinds=shapes.CUT_KINDS)
    return kinds


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('kind = "brownout"', r"\[cut\]\.kind must be one of off, sag, ramp, glitch"),
        ('kind = "sag"\nduration_ms = 5', "needs depth_v or depth_pct"),
        ('kind = "sag"\ndepth_v = 5', "needs duration_ms"),
        (
            'kind = "sag"\ndepth_v = 5\ndepth_pct = 50\nduration_ms = 1',
            "both depth_v and depth_pct",
        ),
        ('kind = "sag"\ndepth_pct = [50, 120]\nduration_ms = 1', "depth_pct must lie in 0..100"),
        ('kind = "ramp"', "needs slew_v_per_ms"),
        ('kind = "ramp"\nslew_v_per_ms = 0', "slew_v_per_ms must be above 0"),
        (
            'kind = "glitch"\nduration_ms = 1\ndepth_v = 3',
            'depth_v does not apply to kind = "glitch"',
        ),
        ("depth_v = 3", 'depth_v does not apply to kind = "off"'),
        ('kind = "sag"\ndepth_v = [9, 3]\nduration_ms = 1', r"depth_v must be a number or \[low"),
    ],
)
def test_bad_kind_keys_are_refused_in_one_line(lines: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as error:
        campaign_spec.parse(campaign_text(lines), kinds=_all_kinds())
    assert "\n" not in str(error.value)


def test_draws_fall_in_their_ranges_and_off_draws_nothing() -> None:
    spec = shapes.ShapeSpec("sag", (2.0, 9.0), None, (1.0, 30.0), (0.1, 4.0))
    rng = random.Random(5)
    drawn = [shapes.draw(spec, rng) for _ in range(2000)]
    assert all(2 <= s.depth <= 9 and s.unit == "V" for s in drawn)
    assert all(0.001 <= s.duration_s <= 0.030 for s in drawn)
    assert all(100 <= s.slew_v_per_s <= 4000 for s in drawn)
    # uniform: each half of a range takes about half the draws (2000 draws: sd 22)
    assert 900 < sum(s.depth < 5.5 for s in drawn) < 1100
    before = rng.getstate()
    assert shapes.draw(shapes.ShapeSpec(), rng) is shapes.OFF
    assert rng.getstate() == before  # campaigns without kinds draw their cuts as before
    pct = shapes.draw(shapes.ShapeSpec("sag", None, (50.0, 50.0), (1.0, 1.0)), rng)
    assert pct.unit == "%" and pct.volts(12.0) == pytest.approx(6.0)


@pytest.mark.parametrize(
    ("station", "kind", "makes"),
    [
        ('kind = "relay-board"\nport = "/dev/null"', "sag", "off, glitch"),
        ('kind = "relay-board"\nport = "/dev/null"', "ramp", "off, glitch"),
        ('kind = "manual"', "glitch", "off"),
    ],
)
def test_a_station_that_cannot_make_the_kind_refuses_it(
    station: str, kind: str, makes: str
) -> None:
    keys = {"sag": "depth_v = 5\nduration_ms = 2", "ramp": "slew_v_per_ms = 1"}.get(
        kind, "duration_ms = 1"
    )
    text = campaign_text(f'kind = "{kind}"\n{keys}', station).replace('profile = "honest"\n', "")
    with pytest.raises(UserError, match=f"makes {makes}"):
        campaign_file.parse(text)


def test_rig_run_refuses_a_sag_on_the_relay_board_before_any_write(tmp_path: Path) -> None:
    text = campaign_text(
        'kind = "sag"\ndepth_v = 5\nduration_ms = 2', 'kind = "relay-board"\nport = "/dev/null"'
    ).replace('profile = "honest"\n', "")
    (tmp_path / "c.toml").write_text(text)
    result = rig("run", "c.toml", "--db", "s.sqlite", cwd=tmp_path, timeout_s=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and '[cut].kind = "sag"' in lines[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # no store, no run log


def test_a_glitch_campaign_runs_and_records_each_cut_shape(tmp_path: Path) -> None:
    text = campaign_text(
        'kind = "glitch"\nduration_ms = [1, 5]\ndelay_ms = [2, 10]\noff_ms = 5\nsample_blocks = 8'
    ).replace("cycles = 1", "cycles = 4\nregion_mib = 2")
    (tmp_path / "c.toml").write_text(text)
    result = rig("run", "c.toml", "--db", "s.sqlite", cwd=tmp_path, timeout_s=300)
    assert result.returncode == 0, result.stderr
    import json
    import sqlite3

    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        statuses = [r[0] for r in db.execute("SELECT status FROM cycle")]
        shapes_seen = [
            json.loads(r[0]) for r in db.execute("SELECT detail FROM event WHERE kind='cut_shape'")
        ]
    assert statuses == ["ok"] * 4
    assert len(shapes_seen) == 4
    assert all(s["kind"] == "glitch" and 1 <= s["duration_ms"] <= 5 for s in shapes_seen)
