"""Where every number of report.json comes from: measured (with the trial and the records it
comes from), estimated (the formula and its inputs), sourced (a file, a URL, the hub's metadata)
or configured (the request, or the configuration a trial ran). One rule per field path, first
match wins; `label` resolves a rule's placeholders from the objects around the number (a trial's
id and folder, a scenario's records file), so a label names the very trial it came from.

Paths: keys joined by ".", a list's items as "[]", a dict's keys as "*"; in rules "*" is one
key and "**" anything below. report.json carries the rules (`provenance`); report.md lists them;
tests walk the JSON and fail on any number that no rule labels."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from infopt.specs.results import ProvenanceKind as K
from infopt.specs.results import ProvenanceRule

_TRIAL = "trial {trial_id}: its records trials/{key}/"
# Where a trial's load lines come from (infopt.runs.load_evidence): its own engine.log, or, for
# an engine that prints them only at a higher log level, its configuration's load-only start.
_LOAD = ("trial {trial_id}'s load log (trials/{key}/engine.log, or the load-only start its "
         "kernels.log names): ")
_BOOT = ("bootstrap (seeded, resampling each side's trials; below 10 trials a side widened to "
         "Welch's t interval) over the measured trial objectives it compares "
         "(infopt.analysis.compare)")
_FIT = ("infopt.costmodel.fit: weights + KV bytes per token x tokens held + runtime overhead, "
        "per device, from the model's config and the device's memory (an estimate before the "
        "engine starts; the engine's own log is read back where it reports its KV cache)")

RULES: tuple[tuple[str, K, str], ...] = (
    ("schema_version", K.CONFIGURED, "report.json's format version (infopt.specs.results."
     "REPORT_SCHEMA_VERSION)"),
    # -- measured by a trial ----------------------------------------------------------------
    # -- decisions asked and gates waited on ---------------------------------------------------
    *((f"{d}.wait.waited_s", K.MEASURED, "the run's clock, from the gate's pause to its "
       "answer") for d in ("decisions[]", "decision")),
    ("gate_waits[].waited_s", K.MEASURED, "the run's clock, from the gate's pause to its "
     "answer"),
    *((f"{d}.{c}.request_changes.**", K.ESTIMATED, "infopt.tuning.nofit_choices: the change to "
       "the request, checked by re-planning the run with infopt.costmodel.fit")
      for d in ("decisions[]", "decision") for c in ("choices[]", "chosen")),
    ("trials[].benchmark.workload.**", K.CONFIGURED, "the workload the trial ran (request.json)"),
    ("trials[].benchmark.**", K.MEASURED, _TRIAL + "requests.jsonl (per request) and the "
     "engine's process samples"),
    ("trials[].objective_value", K.MEASURED, _TRIAL + "requests.jsonl, at the objective's "
     "level"),
    ("trials[].engine.startup_s", K.MEASURED, _TRIAL + "engine.log: launch to first healthy "
     "response"),
    ("trials[].engine.pid", K.MEASURED, _TRIAL + "engine.log: the process the OS started"),
    ("trials[].killed_by_signal", K.MEASURED, "the exit status the OS reported for trial "
     "{trial_id}'s engine, which died mid-trial (its engine.log)"),
    ("trials[].engine.port", K.CONFIGURED, "the loopback port infopt chose for trial "
     "{trial_id}"),
    ("trials[].quality.tolerance", K.CONFIGURED, "the request's quality_tolerance"),
    ("trials[].quality.measures[].threshold", K.ESTIMATED, "the floor minus the request's "
     "tolerance (infopt.quality.gate)"),
    ("trials[].quality.**", K.MEASURED, "trial {trial_id}'s quality verdict: its teacher-"
     "forced scores of the reference's tokens, and the reference's restart for the floor "
     "(quality/verdict-*.json of the run)"),
    ("trials[].long_context.served_context_tokens", K.CONFIGURED, "the context the run "
     "served (the request's min_context_tokens when shorter than the model's native one)"),
    ("trials[].long_context.prompt_tokens[]", K.MEASURED, "the reference's tokenization of "
     "the long-context windows (quality/long-*.json of the run)"),
    ("trials[].long_context.verdict.tolerance", K.CONFIGURED, "the request's quality_tolerance"),
    ("trials[].long_context.verdict.measures[].threshold", K.ESTIMATED, "the long windows' "
     "floor minus the request's tolerance (infopt.quality.gate)"),
    ("trials[].long_context.verdict.**", K.MEASURED, "trial {trial_id}'s long-context check: "
     "its teacher-forced scores of the reference's continuations of the long windows, and the "
     "reference's restart for their floor (quality/long-verdict-*.json of the run)"),
    ("trials[].ceilings[].measured", K.MEASURED, _TRIAL + "requests.jsonl"),
    ("trials[].ceilings[].ceiling", K.ESTIMATED, "infopt.costmodel.roofline ({envelope} "
     "envelope): bytes per decode step / memory bandwidth and FLOPs / compute at this "
     "configuration's batch, from the model's config and the hardware (calibrated: this "
     "host's measured bandwidth and GEMM rate)"),
    ("trials[].ceilings[].ratio", K.ESTIMATED, "measured / ceiling of trial {trial_id}, never "
     "clamped"),
    ("trials[].ceilings[].attainable", K.ESTIMATED, "infopt.costmodel.attainable: the "
     "theoretical ceiling's terms with fixed costs and achieved fractions fitted on published "
     "measured results (infopt/costmodel/data/published_results.csv, attainable_fit.json)"),
    ("trials[].prefill_ceilings[].measured", K.MEASURED, _TRIAL + "requests.jsonl: the mean "
     "prompt tokens / TTFT p50 at concurrency 1"),
    ("trials[].prefill_ceilings[].ceiling", K.ESTIMATED, "infopt.costmodel.roofline.prefill_row "
     "({envelope} envelope): one prompt of the mean length, its bytes / memory bandwidth and "
     "FLOPs / compute for this configuration's weights and tensor parallelism"),
    ("trials[].prefill_ceilings[].ratio", K.ESTIMATED, "measured / ceiling of trial "
     "{trial_id}, never clamped"),
    ("trials[].prefill_ceilings[].attainable", K.ESTIMATED, "infopt.costmodel.ttft: the prompt "
     "/ the TTFT estimate (overhead + floor / fraction fitted on published single-stream TTFTs,"
     " infopt/costmodel/data/ttft_fit.json; rough: its leave-one-out error is in the label)"),
    ("device.**", K.SOURCED, "the device the ceilings price (infopt.tuning.candidates."
     "run_device): its catalog row or this host, as its `source` says; calibrated_* measured"),
    ("trials[].fit.**", K.ESTIMATED, _FIT),
    ("trials[].kv.observed", K.MEASURED, _LOAD + "the KV capacity the engine logged at start"),
    ("trials[].kv.predicted", K.ESTIMATED, _FIT),
    ("trials[].kv.error", K.ESTIMATED, "trial {trial_id}'s logged KV capacity / the fit's, "
     "minus 1 (infopt.costmodel.kv_check)"),
    ("trials[].offload.layers_offloaded", K.MEASURED, _LOAD + "the layers the engine says it "
     "put on the GPU (its load_tensors line)"),
    ("trials[].offload.layers_total", K.MEASURED, _LOAD + "the same line's total"),
    ("trials[].offload.model_buffer_bytes.**", K.MEASURED, _LOAD + "each model buffer the "
     "engine logged, MiB x 2**20"),
    ("trials[].gpu_memory_bytes", K.MEASURED, "NVML: the GPU memory of trial {trial_id}'s "
     "engine process group after its benchmark (infopt.hardware.gpu_memory)"),
    ("trials[].gpu_memory_by_device_bytes.**", K.MEASURED, "NVML: the same per device "
     "index, each rank's share (infopt.hardware.gpu_memory)"),
    ("trials[].diagnosis.matches[].score", K.ESTIMATED, "infopt.troubleshoot: how well trial "
     "{trial_id}'s engine.log matches the known failure"),
    ("trials[].diagnosis.**", K.CONFIGURED, "the known failure's remedy (infopt.troubleshoot "
     "catalog)"),
    ("trials[].remedy.**", K.CONFIGURED, "the contract-preserving remedy applied to trial "
     "{trial_id} (its engine.log names the failure)"),
    ("trials[].config.**", K.CONFIGURED, "the configuration trial {trial_id} ran (its command "
     "line)"),
    ("trials[].changes[].**", K.CONFIGURED, "trial {trial_id}'s knob against the control"),
    ("trials[].repeat", K.CONFIGURED, "the repeat number of trial {trial_id}"),
    ("trials[].measures.*", K.MEASURED, "trial {trial_id}'s target scenario (its records)"),
    # -- statistics over trials -------------------------------------------------------------
    ("ladder.steps[].candidates[].candidate.**", K.CONFIGURED, "the value the ladder's rule "
     "derived for this candidate (its `why`)"),
    ("ladder.steps[].candidates[].comparison.seed", K.CONFIGURED, "the request's seed"),
    ("ladder.steps[].candidates[].comparison.n_resamples", K.CONFIGURED, _BOOT),
    ("ladder.steps[].candidates[].**", K.MEASURED, "trials {trial_ids}: " + _BOOT),
    ("ladder.steps[].incumbent_values[]", K.MEASURED, "the incumbent's trial objectives"),
    ("ladder.launches", K.MEASURED, "engine launches counted over the run's trials"),
    ("ladder.noise_sd_log", K.MEASURED, "the spread of log(baseline / control) over the "
     "start's paired rounds (infopt.tuning.climb)"),
    ("ladder.screen_drops_below", K.ESTIMATED, "the screen's threshold from the start's noise "
     "and budgets.min_gain (infopt.tuning.rounds.screen_threshold)"),
    ("ladder.window_requests", K.CONFIGURED, "sized from the measured noise to the request's "
     "budgets.window_rel_noise (ladder.window_why)"),
    ("ladder.decision.drift.confidence", K.CONFIGURED, "the drift check's level "
     "(infopt.tuning.final)"),
    ("ladder.decision.drift.**", K.MEASURED, "the control's windows at the start and at the "
     "end of the run (infopt.tuning.final.drift_check)"),
    ("ladder.decision.**", K.MEASURED, "the paired rounds of the ladder's winner and the "
     "control at the end of the run (infopt.tuning.rounds)"),
    ("engines.results[].ladder.steps[].candidates[].candidate.**", K.CONFIGURED, "the value "
     "the comparator's ladder derived"),
    ("engines.results[].ladder.steps[].candidates[].**", K.MEASURED, "trials {trial_ids}: "
     + _BOOT),
    ("engines.results[].ladder.**", K.MEASURED, "the {engine} ladder's trial objectives"),
    ("engines.results[].**", K.MEASURED, "medians of {engine}'s trial objectives (its control "
     "and its winner's trials)"),
    ("engines.comparison.seed", K.CONFIGURED, "the request's seed"),
    ("engines.comparison.**", K.MEASURED, "the two engines' winners' trials: " + _BOOT),
    ("gain_vs_control.served_context_tokens", K.CONFIGURED, "the context every trial served: "
     "the run's start shape (infopt.tuning.start_shape) or its no-fit decision"),
    ("gain_vs_control.comparison.seed", K.CONFIGURED, "the request's seed"),
    ("gain_vs_control.comparison.**", K.MEASURED, "the control's and the winner's trials: "
     + _BOOT),
    ("gain_vs_control.**", K.MEASURED, "medians of the control's and the winner's trial "
     "objectives (the ratio: winner / control, never clamped)"),
    ("pareto[].**", K.MEASURED, "medians over trials {trial_ids} at the target level "
     "(memory: the engine's GPU memory from NVML on a GPU host, else its peak resident set; "
     "quality: the gate's top-1 agreement)"),
    ("closest_to_ceiling[].level", K.CONFIGURED, "the workload's level both ratios are taken "
     "at"),
    ("closest_to_ceiling[].**", K.ESTIMATED, "measured / ceiling (trials[].ceilings) at that "
     "level, the median over the configuration's trials"),
    ("scenarios[].level.**", K.MEASURED, "the winner on the standard scenario {name}: "
     "{records_path}"),
    ("scenarios[].**", K.MEASURED, "the winner on the standard scenario {name}: {records_path}"),
    ("tasks.items_per_set", K.CONFIGURED, "the request's quality_task_items"),
    ("tasks.verdicts[].threshold", K.ESTIMATED, "the reference's score minus the request's "
     "tolerance (infopt.quality.gate)"),
    ("tasks.**", K.MEASURED, "the task sets answered by the reference and the winner "
     "(quality/ of the run; exact-match scoring, Wilson intervals)"),
    ("reproduce.expected", K.MEASURED, "the mean objective of trials {trial_ids}"),
    ("reproduce.**", K.ESTIMATED, "the winner's repeats widened by the noise rule "
     "(reproduce.rule, infopt.tuning.reproduce)"),
    ("plots[].**", K.MEASURED, "counted in {file}'s own data (its infopt-plot metadata)"),
    # -- the target --------------------------------------------------------------------------
    ("hardware.host_memory_bandwidth.threads", K.CONFIGURED, "threads infopt's copy benchmark "
     "used"),
    ("hardware.host_memory_bandwidth.repeats", K.CONFIGURED, "repeats of infopt's copy "
     "benchmark"),
    ("hardware.host_memory_bandwidth.**", K.MEASURED, "infopt.hardware.membw: a STREAM-style "
     "copy over arrays beyond the last-level cache, on this host at the run's start"),
    ("hardware.host_gemm_flops_per_s", K.MEASURED, "infopt.hardware.compute: a timed GEMM on "
     "this host at the run's start"),
    ("hardware.host.**", K.SOURCED, "this host's /proc/cpuinfo, /proc/meminfo, /sys (NUMA), "
     "cgroup limits and statvfs (infopt.hardware.host)"),
    ("hardware.gpus[].theoretical_bandwidth_bytes_per_s", K.ESTIMATED, "NVML's memory bus "
     "width / 8 x max memory clock x the DDR factor (infopt.hardware.nvml)"),
    ("hardware.gpus[].**", K.SOURCED, "NVML (nvidia-ml-py) on the target"),
    ("hardware.gpu_pairs[].**", K.SOURCED, "NVML's topology and NVLink queries on the target"),
    ("hardware.gpu_calibration.copy_mib", K.CONFIGURED, "the calibration's copy size "
     "(infopt.hardware.gpu_calibration)"),
    ("hardware.gpu_calibration.gemm_n", K.CONFIGURED, "the calibration's GEMM size, m = n = k"),
    *((f"hardware.gpu_calibration.{p}.repeats", K.CONFIGURED, "the calibration's timed "
       "repeats after one warm-up") for p in ("copy_bytes_per_s", "gemm_flops_per_s.*")),
    ("hardware.gpu_calibration.**", K.MEASURED, "infopt/hardware/gpu_calibrate.py run once "
     "with the planned engine's torch: a device-to-device copy and a GEMM per dtype, median "
     "and range over repeats (SIMULATED where the calibration says so)"),
    ("model.file_bytes", K.SOURCED, "the checkpoint's size on disk: {path}"),
    ("model.**", K.SOURCED, "the checkpoint's own metadata (config.json or the GGUF header) "
     "at {path}, counted by infopt.model.classify"),
    ("shortlist.max_weight_bits", K.CONFIGURED, "the shortlist search's precision ceiling"),
    ("shortlist.**", K.SOURCED, "the hub's metadata of {repo_id} at {commit_sha} "
     "(config.json / quantization config / GGUF header, read by byte ranges)"),
    # -- what was asked or chosen ------------------------------------------------------------
    ("workload.**", K.CONFIGURED, "the request's workload (request.json)"),
    ("control_config.**", K.CONFIGURED, "the engine's out-of-the-box defaults (the adapter's "
     "control_config)"),
    ("baseline_config.**", K.CONFIGURED, "the baseline: the simplest correct configuration "
     "(the adapter's baseline_config plus base_overrides)"),
    ("winner_config.**", K.CONFIGURED, "the recommended configuration: the baseline plus the "
     "accepted changes"),
    ("contract_outcome.**", K.CONFIGURED, "the adapter's contract remedies"),
    # -- a no-fit report (infopt.tuning.nofit) -----------------------------------------------
    ("engines[].fit.**", K.ESTIMATED, _FIT),
    ("engines[].config.**", K.CONFIGURED, "the {engine} baseline's configuration"),
    ("exposure.port", K.CONFIGURED, "the port the winner was exposed on"),
)


def rules() -> list[ProvenanceRule]:
    return [ProvenanceRule(path=p, kind=k, source=s) for p, k, s in RULES]


@cache
def _regex(pattern: str) -> re.Pattern:
    body = re.escape(pattern).replace(r"\*\*", "\0").replace(r"\*", r"[^.\[\]]+")
    return re.compile(body.replace("\0", ".*") + "$")


def normalize(tokens: list[str | int]) -> str:
    out = ""
    for t in tokens:
        out += "[]" if isinstance(t, int) else (f".{t}" if out else t)
    return out


def rule_for(path: str) -> tuple[str, K, str] | None:
    return next((r for r in RULES if _regex(r[0]).match(path)), None)


def label(path: str, ancestors: list[dict]) -> str | None:
    """"measured: trial t03-...: its records trials/<key>/..." for the number at `path`
    (normalized) inside `ancestors` (outermost first); None when no rule covers it."""
    rule = rule_for(path)
    if rule is None:
        return None
    values: dict[str, Any] = {}
    for obj in ancestors:  # the innermost object that has the field wins
        values.update({k: v for k, v in obj.items() if isinstance(v, (str, int, list))})
    names = re.findall(r"{(\w+)}", rule[2])
    missing = [n for n in names if n not in values]
    if missing:
        return None
    text = rule[2].format(**{n: (", ".join(map(str, values[n])) if isinstance(values[n], list)
                                 else values[n]) for n in names})
    return f"{rule[1].value}: {text}"


def walk_numbers(data: Any, tokens: list | None = None, ancestors: list | None = None):
    """Yield (path tokens, normalized path, value, ancestor objects) for every number."""
    tokens, ancestors = tokens or [], ancestors or []
    if isinstance(data, dict):
        for k, v in data.items():
            yield from walk_numbers(v, tokens + [k], ancestors + [data])
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from walk_numbers(v, tokens + [i], ancestors)
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield tokens, normalize(tokens), data, ancestors


def unlabelled(report_json: dict) -> list[str]:
    """Every number's path that no rule labels (or whose label cannot be resolved)."""
    return [".".join(map(str, t)) for t, p, _, anc in walk_numbers(report_json)
            if t and t[0] != "provenance" and label(p, anc) is None]


def provenance_lines(rules_: list[ProvenanceRule]) -> list[str]:
    """report.md's section: every rule report.json carries, so a reader can label a number."""
    if not rules_:
        return []
    return ["## Where each number comes from", "",
            "Every number in `report.json` falls under one of these paths (first match; `[]` a "
            "list's items, `*` one key, `**` anything below). Braces name fields of the "
            "objects around the number, such as the trial's id and records folder. "
            "`infopt.report.provenance.label` resolves them.", "",
            "| numbers at | kind | from |", "|---|---|---|",
            *[f"| `{r.path}` | {r.kind.value} | {r.source} |" for r in rules_], ""]
