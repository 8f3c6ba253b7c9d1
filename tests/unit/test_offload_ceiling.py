"""A partial offload's decode ceiling (infopt.costmodel.offload): the layers in host RAM read
at the host's bandwidth. Hand-computed: half the layers on a GPU ten times faster than the host
make the memory time 0.5 + 0.5 x 10 = 5.5 times the all-GPU one."""

from __future__ import annotations

import pytest

from infopt.costmodel.offload import offloaded_row
from infopt.specs.fit import Bound, CeilingRow, Envelope


def _row(t_memory: float, t_compute: float) -> CeilingRow:
    t_step = max(t_memory, t_compute)
    return CeilingRow(phase="decode", envelope=Envelope.THEORETICAL, weight_path="Q4_K",
                      kv_dtype="f16", batch=2, context_tokens=1024, bytes_per_step=1e9,
                      flops_per_step=1e9, comm_bytes_per_step=0, t_memory_s=t_memory,
                      t_compute_s=t_compute, t_comm_s=0, t_step_s=t_step,
                      bound=Bound.MEMORY if t_memory >= t_compute else Bound.COMPUTE,
                      tokens_per_step=2, tokens_per_s=2 / t_step)


def test_half_the_layers_on_the_host_at_a_tenth_of_the_bandwidth():
    row = offloaded_row(_row(0.010, 0.002), 0.5, 1000e9, 100e9)
    assert row.t_memory_s == pytest.approx(0.055)
    assert row.tokens_per_s == pytest.approx(2 / 0.055)
    assert row.bound is Bound.MEMORY and row.estimate is None


def test_a_compute_bound_step_turns_memory_bound_when_the_host_reads_enough():
    row = offloaded_row(_row(0.001, 0.004), 0.75, 1000e9, 100e9)
    assert row.t_memory_s == pytest.approx(0.001 * (0.75 + 0.25 * 10))
    assert row.bound is Bound.COMPUTE  # 3.25 ms still under 4 ms of compute
    row = offloaded_row(_row(0.001, 0.004), 0.5, 1000e9, 100e9)
    assert row.bound is Bound.MEMORY and row.t_step_s == pytest.approx(0.0055)


def test_every_layer_on_the_gpu_changes_nothing():
    row = _row(0.010, 0.002)
    assert offloaded_row(row, 1.0, 1000e9, 100e9) == row
