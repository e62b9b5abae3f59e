"""128-bit counter decoding in every shape smartctl and nvme-cli print."""

from __future__ import annotations

from health_paths import RECORDED
from hypothesis import given
from hypothesis import strategies as st

from rig.health.counters import as_uint, counter
from rig.health.smart import parse_smartctl_json

U128 = st.integers(min_value=0, max_value=2**128 - 1)


def le_trimmed(value: int) -> list[int]:
    """smartctl's KEY_le: low 8 bytes up to the last non-zero one, then high bytes likewise."""
    hi, lo = value >> 64, value & (2**64 - 1)
    out = []
    for i in range(8):
        v = lo >> (8 * i)
        if not v and not hi:
            break
        out.append(v & 0xFF)
    for i in range(8):
        v = hi >> (8 * i)
        if not v:
            break
        out.append(v & 0xFF)
    return out


@given(U128)
def test_int_string_and_bytes_agree(value: int) -> None:
    assert as_uint(value) == value
    assert as_uint(str(value)) == value
    assert as_uint(list(value.to_bytes(16, "little"))) == value
    assert counter({"k": value}, "k") == value
    assert counter({"k": str(value)}, "k") == value


@given(U128)
def test_exact_forms_win_over_a_rounded_number(value: int) -> None:
    rounded = int(float(value))  # what a double-based JSON producer may have printed
    assert counter({"k": rounded, "k_s": str(value)}, "k") == value
    if value:
        assert counter({"k": rounded, "k_le": le_trimmed(value)}, "k") == value


@given(st.integers(max_value=-1) | st.floats() | st.booleans() | st.text(alphabet="-+.e x"))
def test_non_counters_are_none(value: object) -> None:
    assert as_uint(value) is None


def test_missing_and_empty() -> None:
    assert counter(None, "k") is None
    assert counter({}, "k") is None
    assert as_uint([]) is None
    assert as_uint([256]) is None


def test_smartctl_128bit_file() -> None:
    text = (RECORDED / "smartctl" / "nvme-128bit-synthetic.json").read_text()
    s = parse_smartctl_json(text)
    assert s.data_units_written == 2**64 + 184919244
    assert s.host_bytes_written == (2**64 + 184919244) * 512000
