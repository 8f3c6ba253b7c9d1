"""Per-request records as a typed DataFrame, its Parquet round-trip, and error categories.

One row per measured request (`RequestRecord`). Times in seconds, token counts in tokens.
Derived columns: `tpot_s` (time per output token after the first), `itl_p50_s` / `itl_max_s`
(median / largest per-token gap of that request), `error_kind` (a short category of `error`),
`length_reached` (the engine reported exactly the requested output length),
`prompt_length_exact` (usage.prompt_tokens equals the requested prompt length; <NA> when the
prompt length was approximate).
Missing values: NaN in float columns, <NA> in the nullable integer columns, None in strings.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd

from infopt.specs.base import InputError
from infopt.specs.results import RequestRecord


class ErrorKind(StrEnum):
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    NO_CONTENT = "no_content"
    BAD_SSE = "bad_sse"
    OTHER = "other"


# Column -> dtype. Nullable "Int64" where the engine may not report a count (no usage block,
# failed request); "str" is pandas 3's string dtype (missing values are NaN/None).
COLUMNS: dict[str, str] = {
    "request_id": "str",
    "concurrency": "int64",
    "ok": "bool",
    "error": "str",
    "error_kind": "str",
    "route": "str",
    "stream": "bool",
    "prompt_tokens": "Int64",
    "prompt_tokens_requested": "Int64",
    "prompt_tokens_cached": "Int64",
    "prompt_tokens_cache_allowed": "Int64",
    "output_tokens": "Int64",
    "output_tokens_requested": "int64",
    "content_chunks": "int64",
    "streamed_tokens": "Int64",
    "chunk_tokens_counted": "boolean",
    "ttft_s": "float64",
    "e2e_s": "float64",
    "tpot_s": "float64",
    "itl_p50_s": "float64",
    "itl_max_s": "float64",
    "start_offset_s": "float64",
    "length_reached": "bool",
    "prompt_length_exact": "boolean",
}

# httpx exception class names (the client writes "ClassName: message") that mean the
# connection failed or broke, as opposed to timing out (timeouts are matched on "Timeout").
_CONNECTION_ERRORS = frozenset({
    "ConnectError", "ReadError", "WriteError", "CloseError", "NetworkError", "TransportError",
    "RemoteProtocolError", "LocalProtocolError", "ProtocolError", "ProxyError",
    "ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError",
})
_HTTP_STATUS = re.compile(r"^http_(\d{3})\b")


def classify_error(error: str | None) -> ErrorKind:
    """The category of a failed request's `error` string, as written by `loadgen.client`:
    `http_503: body`, `ReadTimeout: msg`, `ConnectError: msg`, `no_content`,
    `bad_sse_json: msg`, `SSEError: msg` (the response was not an event stream)."""
    if not error:
        return ErrorKind.OTHER
    text = error.strip()
    if m := _HTTP_STATUS.match(text):
        code = int(m.group(1))
        if 400 <= code < 500:
            return ErrorKind.HTTP_4XX
        if 500 <= code < 600:
            return ErrorKind.HTTP_5XX
        return ErrorKind.OTHER
    if text.startswith("no_content"):
        return ErrorKind.NO_CONTENT
    name = text.split(":", 1)[0].strip()
    if text.startswith("bad_sse") or name == "SSEError":
        return ErrorKind.BAD_SSE
    if "Timeout" in name or name == "TimeoutError":
        return ErrorKind.TIMEOUT
    if name in _CONNECTION_ERRORS:
        return ErrorKind.CONNECTION
    return ErrorKind.OTHER


def records_frame(records: list[RequestRecord]) -> pd.DataFrame:
    """One row per request, with the typed columns of `COLUMNS` (in that order)."""
    rows: dict[str, list] = {name: [] for name in COLUMNS}
    for rec in records:
        itl = np.asarray(rec.itl_s, dtype=float)
        rows["request_id"].append(rec.request_id)
        rows["concurrency"].append(rec.concurrency)
        rows["ok"].append(rec.ok)
        rows["error"].append(rec.error)
        rows["error_kind"].append(None if rec.ok else classify_error(rec.error).value)
        rows["route"].append(rec.route)
        rows["stream"].append(rec.stream)
        rows["prompt_tokens"].append(rec.prompt_tokens)
        rows["prompt_tokens_requested"].append(rec.prompt_tokens_requested)
        rows["prompt_tokens_cached"].append(rec.prompt_tokens_cached)
        rows["prompt_tokens_cache_allowed"].append(rec.prompt_tokens_cache_allowed)
        rows["output_tokens"].append(rec.output_tokens)
        rows["output_tokens_requested"].append(rec.output_tokens_requested)
        rows["content_chunks"].append(rec.content_chunks)
        rows["streamed_tokens"].append(rec.streamed_tokens)
        rows["chunk_tokens_counted"].append(rec.chunk_tokens_counted)
        rows["ttft_s"].append(np.nan if rec.ttft_s is None else rec.ttft_s)
        rows["e2e_s"].append(np.nan if rec.e2e_s is None else rec.e2e_s)
        rows["tpot_s"].append(np.nan if rec.tpot_s is None else rec.tpot_s)
        rows["itl_p50_s"].append(float(np.median(itl)) if itl.size else np.nan)
        rows["itl_max_s"].append(float(itl.max()) if itl.size else np.nan)
        rows["start_offset_s"].append(rec.start_offset_s)
        rows["length_reached"].append(rec.length_reached)
        rows["prompt_length_exact"].append(rec.prompt_length_exact)
    return pd.DataFrame({name: pd.Series(values, dtype=COLUMNS[name])
                         for name, values in rows.items()})


def save_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write the records frame to Parquet (pyarrow; dtypes kept via pandas metadata)."""
    from infopt.runs.rundir import atomic_path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, engine="pyarrow", index=False)
    return path


def load_parquet(path: str | Path) -> pd.DataFrame:
    """Read a frame written by `save_parquet`; raises InputError if it is not a records frame."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no records file at {path}: pass the path save_parquet wrote")
    df = pd.read_parquet(path, engine="pyarrow")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{path} is not a request-records file: missing columns {missing}")
    return df


def errors_by_kind(df: pd.DataFrame) -> dict[str, int]:
    """Failed requests per error kind, most frequent first (ties by name); {} if none failed."""
    counts = df.loc[~df["ok"], "error_kind"].fillna(ErrorKind.OTHER.value).value_counts()
    return {str(k): int(v) for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}
