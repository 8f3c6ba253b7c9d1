"""A partial offload's decode ceiling (llama.cpp -ngl N below the model's layers): the layers in
host RAM are read at the host's bandwidth on every decoded token, the rest at the GPU's. Decode
is memory-bound, so the step's memory time splits by the layer share: t = t_gpu_all x (s + (1 -
s) x B_gpu / B_host), with s the share of layers on the GPU. The compute and communication
times are the GPU row's (the host's compute for its layers is not modelled: an estimate that
can only be optimistic, so the ceiling stays a ceiling)."""

from __future__ import annotations

from infopt.specs.fit import Bound, CeilingRow


def offloaded_row(row: CeilingRow, device_share: float, device_bw_bytes_per_s: float,
                  host_bw_bytes_per_s: float) -> CeilingRow:
    """`row` (the whole model on the GPU) with (1 - device_share) of its layers read from
    host RAM instead."""
    if device_share >= 1 or row.phase != "decode":
        return row
    slower = device_share + (1 - device_share) * device_bw_bytes_per_s / host_bw_bytes_per_s
    t_memory = row.t_memory_s * slower
    t_step = max(t_memory, row.t_compute_s) + row.t_comm_s
    return row.model_copy(update={
        "t_memory_s": t_memory, "t_step_s": t_step,
        "bound": Bound.MEMORY if t_memory >= max(row.t_compute_s, row.t_comm_s) else row.bound,
        "tokens_per_s": row.tokens_per_s * row.t_step_s / t_step,
        "estimate": None})  # the attainable model was not fitted to offloaded runs
