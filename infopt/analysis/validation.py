"""Sanity checks on a benchmark's per-request records, run as a great-expectations suite.

A measurement that breaks these rules is not evidence: negative times mean a clock bug, TTFT
after E2E means the stream was timed wrong, output lengths that differ from the requested ones
mean the engine ignored the forced-length fields (so tokens/s compares unlike work), a stream
holding fewer tokens than usage reports means chunks were lost, an exact prompt that arrives at
another length means the prompt builder is wrong, and a high
error rate means the level measured failures. The frame is the one `records.records_frame`
builds (seconds, tokens). great_expectations is imported inside `validate_records` because the
import takes ~4 s; the context is ephemeral (nothing written, no network), progress bars off.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pandas as pd

from infopt.analysis.records import COLUMNS
from infopt.specs.base import InfoptError, InputError, Spec

# Whole-frame checks, in the order they are reported.
CHECKS = ("ttft_s_non_negative", "e2e_s_non_negative", "tpot_s_non_negative", "ttft_le_e2e",
          "lengths_reached", "stream_complete", "prompt_lengths_exact", "prompt_tokens_positive",
          "error_rate", "request_id_unique", "no_unasked_cache_hits")


class RecordValidationError(InfoptError):
    """The records of a benchmark failed validation; the trial's numbers are not evidence."""


class ValidationReport(Spec):
    success: bool
    failed: list[str]  # "check: expectation(columns) observed summary", in CHECKS order
    evaluated: int  # expectations evaluated
    rows: int
    duration_s: float  # wall time of the call, including the first-use import of great_expectations

    def failure_message(self) -> str | None:
        """One line for `Trial.failed`, or None when the records passed."""
        if self.success:
            return None
        return f"record validation failed ({len(self.failed)}/{self.evaluated}): " + "; ".join(
            self.failed)

    def raise_for_failures(self) -> None:
        if not self.success:
            raise RecordValidationError(self.failure_message())


def _expectations(gxe: Any, max_error_rate: float, check_lengths: bool) -> list[Any]:
    """The suite. Each expectation carries meta["check"], a name from CHECKS."""
    def meta(name: str) -> dict[str, str]:
        return {"check": name}

    exps = [gxe.ExpectColumnValuesToBeBetween(column=col, min_value=0.0,
                                              meta=meta(f"{col}_non_negative"))
            for col in ("ttft_s", "e2e_s", "tpot_s")]  # NaN (failed requests) is not checked
    exps.append(gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="e2e_s", column_B="ttft_s", or_equal=True,
        ignore_row_if="either_value_is_missing", meta=meta("ttft_le_e2e")))
    if check_lengths:
        # "neither": an ok row without a reported output length (NaN) fails too: without the
        # usage block the length was not verified.
        exps.append(gxe.ExpectColumnPairValuesToBeEqual(
            column_A="output_tokens", column_B="output_tokens_requested",
            row_condition="ok==True", condition_parser="pandas", ignore_row_if="neither",
            meta=meta("lengths_reached")))
    # Where the engine sent its running count in every chunk, the stream must hold exactly the
    # tokens usage reports: fewer means chunks were lost or mis-parsed (the ITLs are then wrong).
    exps.append(gxe.ExpectColumnPairValuesToBeEqual(
        column_A="streamed_tokens", column_B="output_tokens",
        row_condition="ok==True and chunk_tokens_counted==1.0", condition_parser="pandas",
        ignore_row_if="either_value_is_missing", meta=meta("stream_complete")))
    # Exact prompts (built with the engine's tokenizer) must arrive at exactly that length.
    exps.append(gxe.ExpectColumnPairValuesToBeEqual(
        column_A="prompt_tokens", column_B="prompt_tokens_requested",
        row_condition="ok==True", condition_parser="pandas",
        ignore_row_if="either_value_is_missing", meta=meta("prompt_lengths_exact")))
    exps.append(gxe.ExpectColumnValuesToBeBetween(column="prompt_tokens", min_value=1,
                                                  meta=meta("prompt_tokens_positive")))
    exps.append(gxe.ExpectColumnMeanToBeBetween(column="is_error", min_value=0.0,
                                                max_value=max_error_rate,
                                                meta=meta("error_rate")))
    exps.append(gxe.ExpectColumnValuesToBeUnique(column="request_id",
                                                 meta=meta("request_id_unique")))
    # A prompt served from the engine's cache beyond what the workload declares (template, a
    # shared prefix) measures the cache, not the workload: e.g. the same prompts sent twice.
    exps.append(gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="prompt_tokens_cache_allowed", column_B="prompt_tokens_cached", or_equal=True,
        ignore_row_if="either_value_is_missing", meta=meta("no_unasked_cache_hits")))
    return exps


def _plain(value: Any) -> Any:
    """numpy scalars and tuples of them as plain Python, so messages read `0.5`, not
    `np.float64(0.5)`."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return round(value, 6)
    return value


def _exception_message(info: Any) -> str | None:
    # exception_info is either {"raised_exception": ..., "exception_message": ...} or a dict of
    # metric id -> that shape (when a metric failed to resolve).
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for sub in info.values():
        if isinstance(sub, dict) and sub.get("raised_exception"):
            return str(sub.get("exception_message"))
    return None


def _describe(res: Any) -> str:
    cfg = res.expectation_config
    cols = ", ".join(str(cfg.kwargs[k]) for k in ("column", "column_A", "column_B")
                     if k in cfg.kwargs)
    head = f"{cfg.meta.get('check', '?')}: {cfg.type}({cols})"
    if (err := _exception_message(res.exception_info)) is not None:
        return f"{head} raised: {err}"
    result = res.result or {}
    if "observed_value" in result:
        return f"{head} observed {_plain(result['observed_value'])}"
    examples = [_plain(v) for v in (result.get("partial_unexpected_list") or [])[:3]]
    return (f"{head} {result.get('unexpected_count')} of {result.get('element_count')} rows "
            f"unexpected, e.g. {examples}")


def _validation_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy GX can evaluate: nullable Int64 -> float (GX's pandas metrics choke on pd.NA),
    plus `is_error` (1.0 per failed request) whose mean is the error rate."""
    out = df.copy()
    for col, dtype in COLUMNS.items():
        if dtype in ("Int64", "boolean"):  # NA -> NaN; booleans -> 1.0 / 0.0
            out[col] = out[col].astype("float64")
    out["is_error"] = (~out["ok"].astype(bool)).astype("float64")
    return out


def validate_records(df: pd.DataFrame, *, max_error_rate: float = 0.01,
                     check_lengths: bool = True) -> ValidationReport:
    """Run the suite on a `records_frame`. A frame with no rows fails (nothing was measured).

    `max_error_rate`: the largest fraction of failed requests accepted (0..1).
    `check_lengths`: False when the engine cannot be forced to the requested output length.
    """
    t0 = time.perf_counter()
    if not 0.0 <= max_error_rate <= 1.0 or math.isnan(max_error_rate):
        raise InputError(f"max_error_rate={max_error_rate}: give a fraction between 0 and 1")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"not a request-records frame (missing {missing}): build it with "
                         "infopt.analysis.records.records_frame")
    if df.empty:
        return ValidationReport(success=False, failed=["no_records: the frame has no rows"],
                                evaluated=0, rows=0, duration_s=time.perf_counter() - t0)

    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (ctx.data_sources.add_pandas("infopt_records")
             .add_dataframe_asset("requests")
             .add_batch_definition_whole_dataframe("all_requests"))
    suite = ctx.suites.add(gx.ExpectationSuite(name="infopt_request_records"))
    for exp in _expectations(gxe, max_error_rate, check_lengths):
        suite.add_expectation(exp)
    vdef = ctx.validation_definitions.add(
        gx.ValidationDefinition(name="infopt_request_records", data=batch, suite=suite))
    result = vdef.run(batch_parameters={"dataframe": _validation_frame(df)},
                      result_format="SUMMARY")

    order = {name: i for i, name in enumerate(CHECKS)}

    def rank(r: Any) -> int:
        # A result read as in _describe (Any): GX types its config Optional and its meta's
        # values loosely, while every result here carries the expectation _expectations built.
        return order.get(r.expectation_config.meta.get("check"), 99)

    failed_results = sorted((r for r in result.results if not r.success), key=rank)
    failed = [_describe(r) for r in failed_results]
    return ValidationReport(success=bool(result.success) and not failed, failed=failed,
                            evaluated=len(result.results), rows=len(df),
                            duration_s=time.perf_counter() - t0)
