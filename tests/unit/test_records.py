import math

import pandas as pd
import pytest

from infopt.analysis.records import (
    COLUMNS,
    ErrorKind,
    classify_error,
    errors_by_kind,
    load_parquet,
    records_frame,
    save_parquet,
)
from infopt.specs.base import InputError
from infopt.specs.results import RequestRecord


def _ok(rid="r1", out=5, ttft=0.1, e2e=0.5, itl=(0.1, 0.1, 0.05, 0.15), prompt=12):
    return RequestRecord(request_id=rid, concurrency=2, ok=True, prompt_tokens=prompt,
                         output_tokens=out, output_tokens_requested=5, content_chunks=len(itl) + 1,
                         ttft_s=ttft, e2e_s=e2e, itl_s=list(itl), start_offset_s=0.25)


def _failed(rid="f1", error="http_503: overloaded"):
    return RequestRecord(request_id=rid, concurrency=2, ok=False, error=error,
                         output_tokens_requested=5, start_offset_s=0.5)


def test_columns_and_dtypes():
    df = records_frame([_ok(), _failed()])
    assert list(df.columns) == list(COLUMNS)
    assert {c: str(t) for c, t in df.dtypes.items()} == COLUMNS
    assert len(records_frame([])) == 0
    assert {c: str(t) for c, t in records_frame([]).dtypes.items()} == COLUMNS


def test_derived_values_by_hand():
    row = records_frame([_ok()]).iloc[0]
    # tpot = (e2e - ttft) / (out - 1) = (0.5 - 0.1) / 4 = 0.1
    assert row.tpot_s == pytest.approx(0.1)
    # itl gaps 0.05, 0.1, 0.1, 0.15 -> median 0.1, max 0.15
    assert row.itl_p50_s == pytest.approx(0.1) and row.itl_max_s == pytest.approx(0.15)
    assert row.ok and row.length_reached and pd.isna(row.error) and pd.isna(row.error_kind)
    assert row.prompt_tokens == 12 and row.content_chunks == 5 and row.start_offset_s == 0.25


def test_failed_row_has_missing_values_and_a_kind():
    row = records_frame([_failed()]).iloc[0]
    assert not row.ok and not row.length_reached
    assert row.error_kind == "http_5xx"
    assert math.isnan(row.ttft_s) and math.isnan(row.tpot_s) and math.isnan(row.itl_p50_s)
    assert pd.isna(row.output_tokens) and pd.isna(row.prompt_tokens)


def test_tpot_undefined_for_one_token_or_missing_usage():
    df = records_frame([_ok("a", out=1, itl=()), _ok("b", out=None)])
    assert df.tpot_s.isna().all()
    assert df.itl_p50_s.isna().iloc[0]  # one content chunk: no gap
    assert not df.length_reached.iloc[1]  # no usage block: the length is not known to be reached


@pytest.mark.parametrize("error, kind", [
    ("http_404: model not found", ErrorKind.HTTP_4XX),
    ("http_429: too many requests", ErrorKind.HTTP_4XX),
    ("http_500", ErrorKind.HTTP_5XX),
    ("http_503: overloaded", ErrorKind.HTTP_5XX),
    ("http_302: moved", ErrorKind.OTHER),
    ("ReadTimeout: timed out", ErrorKind.TIMEOUT),
    ("ConnectTimeout: ", ErrorKind.TIMEOUT),
    ("PoolTimeout: no connection", ErrorKind.TIMEOUT),
    ("ConnectError: [Errno 111] Connection refused", ErrorKind.CONNECTION),
    ("RemoteProtocolError: Server disconnected without sending a response.",
     ErrorKind.CONNECTION),
    ("ReadError: ", ErrorKind.CONNECTION),
    ("no_content", ErrorKind.NO_CONTENT),
    ("bad_sse_json: Expecting value: line 1 column 1 (char 0)", ErrorKind.BAD_SSE),
    ("SSEError: Expected response header Content-Type to contain 'text/event-stream'",
     ErrorKind.BAD_SSE),
    ("KeyError: 'choices'", ErrorKind.OTHER),
    (None, ErrorKind.OTHER),
    ("", ErrorKind.OTHER),
])
def test_classify_error(error, kind):
    assert classify_error(error) is kind


def test_errors_by_kind_counts_failed_rows_most_frequent_first():
    df = records_frame([_ok("a"), _failed("b", "ReadTimeout: x"), _failed("c", "no_content"),
                        _failed("d", "ReadTimeout: y"), _failed("e", "http_400: bad")])
    assert errors_by_kind(df) == {"timeout": 2, "http_4xx": 1, "no_content": 1}
    assert list(errors_by_kind(df)) == ["timeout", "http_4xx", "no_content"]
    assert errors_by_kind(records_frame([_ok()])) == {}
    assert errors_by_kind(records_frame([])) == {}


def test_parquet_round_trip(tmp_path):
    df = records_frame([_ok("a"), _failed("b"), _ok("c", out=None, prompt=None)])
    path = save_parquet(df, tmp_path / "sub" / "records.parquet")
    back = load_parquet(path)
    pd.testing.assert_frame_equal(back, df)
    empty = records_frame([])
    pd.testing.assert_frame_equal(load_parquet(save_parquet(empty, tmp_path / "e.parquet")),
                                  empty)


def test_load_parquet_rejects_missing_and_foreign_files(tmp_path):
    with pytest.raises(InputError, match="no records file"):
        load_parquet(tmp_path / "absent.parquet")
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(InputError, match="missing columns"):
        load_parquet(tmp_path / "other.parquet")
