"""Provenance of report.json's numbers: every numeric field the report's schema can hold has a
rule, and a rule's label names the very trial (and records) a number comes from. The optimize
flow test walks a real report.json with the same functions."""

from __future__ import annotations

from infopt.report.provenance import label, rule_for, rules, unlabelled, walk_numbers
from infopt.specs.results import OptimizationReport


def _schema_number_paths() -> set[str]:
    schema = OptimizationReport.model_json_schema()
    defs, out = schema.get("$defs", {}), set()

    def walk(node: dict, path: str, seen: frozenset) -> None:
        if "$ref" in node:
            name = node["$ref"].split("/")[-1]
            if name not in seen:
                walk(defs[name], path, seen | {name})
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                walk(sub, path, seen)
        if node.get("type") in ("integer", "number"):
            out.add(path)
        for k, v in node.get("properties", {}).items():
            walk(v, f"{path}.{k}" if path else k, seen)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + ".*", seen)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]", seen)

    walk(schema, "", frozenset())
    return out


def test_every_numeric_field_of_the_report_schema_has_a_rule():
    paths = _schema_number_paths()
    assert len(paths) > 400  # the walk reached the nested specs (trials, fit, quality, ...)
    assert [p for p in sorted(paths) if rule_for(p) is None] == []


def test_the_label_names_the_trial_and_its_records():
    data = {"trials": [{"trial_id": "t03-kv=q8_0-r1", "key": "t03-kv=q8_0-r1-abc",
                        "benchmark": {"levels": [{"ttft_s": {"p50": 0.12, "n": 4}}]},
                        "fit": {"kv_capacity_tokens": 8192},
                        "config": {"parallel_slots": 2},
                        "ceilings": [{"measured": 50.0, "ceiling": 120.0, "ratio": 0.42,
                                      "envelope": "calibrated"}]}]}
    got = {".".join(map(str, t)): label(p, anc) for t, p, _, anc in walk_numbers(data)}
    assert got["trials.0.benchmark.levels.0.ttft_s.p50"] == (
        "measured: trial t03-kv=q8_0-r1: its records trials/t03-kv=q8_0-r1-abc/requests.jsonl "
        "(per request) and the engine's process samples")
    assert got["trials.0.fit.kv_capacity_tokens"].startswith("estimated: infopt.costmodel.fit")
    assert got["trials.0.config.parallel_slots"] == (
        "configured: the configuration trial t03-kv=q8_0-r1 ran (its command line)")
    assert "calibrated envelope" in got["trials.0.ceilings.0.ceiling"]
    assert got["trials.0.ceilings.0.ratio"].startswith("estimated: measured / ceiling")
    assert unlabelled(data) == []


def test_a_number_without_a_rule_or_its_placeholders_is_reported():
    # A trial without its folder key cannot name its records: unlabelled, not guessed.
    data = {"trials": [{"trial_id": "t00", "objective_value": 3.0}], "mystery": {"x": 1}}
    assert sorted(unlabelled(data)) == ["mystery.x", "trials.0.objective_value"]
    assert unlabelled({"trials": [{"trial_id": "t00", "repeat": True}]}) == []  # a bool


def test_the_rules_travel_with_the_report_and_carry_no_numbers():
    rs = rules()
    assert len(rs) == len({r.path for r in rs})  # one rule per path
    assert {r.kind.value for r in rs} == {"measured", "estimated", "sourced", "configured"}
    report_json = {"provenance": [r.model_dump(mode="json") for r in rs]}
    assert list(walk_numbers(report_json)) == []
