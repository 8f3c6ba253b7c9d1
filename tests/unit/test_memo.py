"""The one memo for results a machine keeps between runs (infopt.runs.memo): contract tables and
quality files are stored and recalled by the key their domain computes, under the machine's
cache or where the kind's own variable points."""

from __future__ import annotations

from infopt.runs.memo import CONTRACT, QUALITY, Memo


def test_a_memo_lives_where_its_variable_says_else_under_the_machines_cache(tmp_path,
                                                                               monkeypatch):
    m = Memo("things", "INFOPT_TEST_THINGS_DIR")
    monkeypatch.setenv("INFOPT_CACHE_DIR", str(tmp_path / "machine"))
    monkeypatch.delenv("INFOPT_TEST_THINGS_DIR", raising=False)
    assert m.root == tmp_path / "machine" / "things"
    monkeypatch.setenv("INFOPT_TEST_THINGS_DIR", str(tmp_path / "own"))
    assert m.root == tmp_path / "own"
    assert (CONTRACT.variable, QUALITY.variable) == ("INFOPT_CONTRACT_CACHE_DIR",
                                                     "INFOPT_QUALITY_CACHE_DIR")


def test_kept_text_is_recalled_and_copied_into_a_run_folder(tmp_path, monkeypatch):
    m = Memo("things", "INFOPT_TEST_THINGS_DIR")
    monkeypatch.setenv("INFOPT_TEST_THINGS_DIR", str(tmp_path / "memo"))
    assert m.recall("k.json") is None
    m.keep("k.json", '{"a": 1}')
    assert m.recall("k.json") == '{"a": 1}'
    run_copy = tmp_path / "run" / "quality" / "k.json"
    assert m.recall_into(run_copy) and run_copy.read_text() == '{"a": 1}'
    assert not m.recall_into(tmp_path / "run" / "other.json")  # nothing kept: not made up
    run_copy.write_text('{"a": 2}')
    m.keep_from(run_copy)
    assert m.recall("k.json") == '{"a": 2}'
