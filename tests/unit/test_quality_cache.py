"""The quality gate's keys (infopt.quality.keys) and kept verdicts (infopt.quality.gate_run): a key changes with everything that
decides a verdict, and a verdict recalled from the machine's cache says which run made it."""

from __future__ import annotations

from pathlib import Path

from infopt.quality import gate_run as q
from infopt.quality import keys as qk
from infopt.quality.sequential import GateSettings
from infopt.specs.quality import QualityVerdict, VerdictOrigin
from infopt.specs.serving import LlamaCppConfig


def _cfg(**kw) -> LlamaCppConfig:
    return LlamaCppConfig(model_path="/m.gguf", served_model_name="m", ctx_per_slot_tokens=2048,
                          **kw)


def test_the_quality_key_covers_config_build_model_prompts_and_machine(monkeypatch):
    base = qk.quality_key(_cfg(), "v1", "d1")
    assert base == qk.quality_key(_cfg(port=9999), "v1", "d1")  # the port decides nothing
    others = {qk.quality_key(_cfg(parallel_slots=2), "v1", "d1"), qk.quality_key(_cfg(), "v2", "d1"),
              qk.quality_key(_cfg(), "v1", "d2"), qk.quality_key(_cfg(), "v1", "d1", prompts=16)}
    assert base not in others and len(others) == 4
    qk.machine_numerics.cache_clear()
    monkeypatch.setattr(qk, "parse_cpuinfo", lambda text: ("Other CPU", ["avx2"], 2))
    try:
        assert qk.quality_key(_cfg(), "v1", "d1") != base  # another machine rounds otherwise
    finally:
        qk.machine_numerics.cache_clear()


def test_the_verdict_key_covers_reference_incumbent_tolerance_and_budget():
    ref = Path("/run/quality/reference-abc.json")
    s = GateSettings(tolerance=0.02, budget=32)
    k = q.verdict_key(ref, "cand", None, s)
    assert len({k, q.verdict_key(Path("/r/reference-xyz.json"), "cand", None, s),
                q.verdict_key(ref, "cand", "inc", s),
                q.verdict_key(ref, "cand", None, GateSettings(0.05, 32)),
                q.verdict_key(ref, "cand", None, GateSettings(0.02, 48))}) == 5


def _verdict(run: str) -> QualityVerdict:
    return QualityVerdict(passed=True, decision="pass", candidate=None, floor=None,
                          tolerance=0.02, measures=[], summary="quality passed",
                          made_by=VerdictOrigin(run_id=run, trial_id="t03-slots-r1",
                                                made_at="2026-12-03T10:00:00+00:00"))


def test_a_verdict_from_another_run_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("INFOPT_QUALITY_CACHE_DIR", str(tmp_path / "machine"))
    kept = tmp_path / "machine" / "verdict-abc-k.json"
    kept.parent.mkdir()
    kept.write_text(_verdict("run-A").model_dump_json())
    here = tmp_path / "run-B" / "quality" / "verdict-abc-k.json"
    v = q._recalled_verdict(here, VerdictOrigin(run_id="run-B", trial_id="t05", made_at="x"))
    assert v is not None and v.reused_from is not None and v.reused_from.run_id == "run-A"
    # Written into this run's folder with the label, so the report shows it.
    assert QualityVerdict.model_validate_json(here.read_text()).reused_from.trial_id == \
        "t03-slots-r1"


def test_a_verdict_of_this_run_is_not_labelled_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("INFOPT_QUALITY_CACHE_DIR", str(tmp_path / "machine"))
    here = tmp_path / "run-A" / "quality" / "verdict-abc-k.json"
    here.parent.mkdir(parents=True)
    here.write_text(_verdict("run-A").model_dump_json())
    v = q._recalled_verdict(here, VerdictOrigin(run_id="run-A", trial_id="t06", made_at="x"))
    assert v is not None and v.reused_from is None
    assert q._recalled_verdict(tmp_path / "none.json", None) is None
