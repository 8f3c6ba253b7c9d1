"""Host memory bandwidth: the byte counting and sizing are exact; the timed run is only bounded."""

from __future__ import annotations

import itertools

import pytest

from infopt.hardware import membw
from infopt.hardware.membw import (
    copy_bandwidth_bytes_per_s,
    copy_bytes_moved,
    default_array_bytes,
    last_level_cache_bytes,
    measure_host_bandwidth,
    parse_cache_size,
    summarize_copies,
)
from infopt.specs.base import InputError

MIB = 1 << 20
GIB = 1 << 30


def test_a_copy_moves_twice_the_array():
    assert copy_bytes_moved(GIB) == 2 * GIB
    # 1 GiB copied in 0.5 s: 2 GiB moved -> 4.29e9 B/s, not 2.15e9
    assert copy_bandwidth_bytes_per_s(GIB, 0.5) == pytest.approx(2 * GIB / 0.5)
    with pytest.raises(ValueError):
        copy_bandwidth_bytes_per_s(GIB, 0.0)


def test_summary_is_median_and_relative_spread():
    median, low, high, spread = summarize_copies(100 * MIB, [0.1, 0.2, 0.1, 0.05])
    rate = lambda s: 200 * MIB / s  # noqa: E731
    assert (low, high) == (pytest.approx(rate(0.2)), pytest.approx(rate(0.05)))
    assert median == pytest.approx((rate(0.1) + rate(0.1)) / 2)
    assert spread == pytest.approx((rate(0.05) - rate(0.2)) / rate(0.1))


@pytest.mark.parametrize(("text", "size"), [("32768K", 32 * MIB), ("480M", 480 * MIB), ("1024 KB", MIB),
                                             ("1G", GIB), ("65536", 65536)])
def test_parse_cache_size(text, size):
    assert parse_cache_size(text + "\n") == size


def test_last_level_cache_from_sysfs_layout(tmp_path):
    for name, level, kind, size in [("index0", 1, "Data", "48K"), ("index1", 1, "Instruction", "32K"),
                                    ("index2", 2, "Unified", "2048K"), ("index3", 3, "Unified", "105M")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "level").write_text(f"{level}\n")
        (tmp_path / name / "type").write_text(f"{kind}\n")
        (tmp_path / name / "size").write_text(f"{size}\n")
    assert last_level_cache_bytes(tmp_path) == 105 * MIB
    assert last_level_cache_bytes(tmp_path / "missing") is None


def test_default_size_is_a_multiple_of_the_cache_within_bounds():
    assert default_array_bytes(32 * MIB, 64 * GIB) == 128 * MIB  # 4x LLC
    assert default_array_bytes(4 * MIB, 64 * GIB) == 64 * MIB  # floor
    assert default_array_bytes(480 * MIB, 64 * GIB) == 256 * MIB  # cap keeps the run short
    assert default_array_bytes(None, 64 * GIB) == 64 * MIB
    assert default_array_bytes(32 * MIB, 512 * MIB) == 64 * MIB  # at most 1/8 of free RAM


def test_timing_loop_honours_repeat_bounds_with_a_fake_clock(monkeypatch):
    ticks = itertools.count(0.0, 0.01)  # every clock read advances 10 ms
    monkeypatch.setattr(membw, "last_level_cache_bytes", lambda: 8 * MIB)
    result = measure_host_bandwidth(2 * MIB, max_seconds=10.0, max_repeats=5, threads=2,
                                    clock=lambda: next(ticks))
    assert result.repeats == 5 and result.threads == 2
    assert result.bytes_moved_per_copy == 4 * MIB
    assert result.median_bytes_per_s == pytest.approx(4 * MIB / 0.01)
    assert result.exceeds_llc is False  # 2 MiB array vs an 8 MiB cache: flagged, not hidden


def test_time_bound_stops_the_loop_after_the_minimum_repeats(monkeypatch):
    ticks = itertools.count(0.0, 1.0)  # every clock read advances 1 s: past the bound at once
    monkeypatch.setattr(membw, "last_level_cache_bytes", lambda: 8 * MIB)
    result = measure_host_bandwidth(2 * MIB, max_seconds=0.5, min_repeats=3, max_repeats=50,
                                    threads=1, clock=lambda: next(ticks))
    assert result.repeats == 3


def test_too_small_array_is_refused():
    with pytest.raises(InputError, match="too small"):
        measure_host_bandwidth(1024)


def test_real_run_reports_a_consistent_measurement():
    # Behaviour only: how fast this machine copies is `infopt hardware`'s business, not a test's.
    result = measure_host_bandwidth(32 * MIB, max_seconds=0.5, min_repeats=3, threads=1)
    assert result.repeats >= 3 and result.bytes_moved_per_copy == 2 * 32 * MIB  # read + write
    assert 0 < result.min_bytes_per_s <= result.median_bytes_per_s <= result.max_bytes_per_s
