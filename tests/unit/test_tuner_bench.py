"""The tuner bench's pure parts (bench/tuner_finalists.py, bench/tuner_bench.py) with planted
numbers, no engine: which configurations are finalists, the order of the finalist rounds and
their prompts, the ratios and their intervals (worked by hand), pooling over seeds, and launch
shares against a one-pass grid."""

from __future__ import annotations

import json
import math

import pytest

from bench import tuner_finalists as fin
from bench.tuner_bench import finalist_rounds, ladder_pick, search_pick, summarize
from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.results import Trial
from infopt.specs.trial import TrialRole, TrialSpec
from infopt.tuning.blackbox import SearchOutcome, SearchSpace
from infopt.tuning.climb import ClimbOutcome, drive
from infopt.tuning.climb_data import Incumbent

T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
CONTROL, BASE = llamacpp.control_config(T), llamacpp.baseline_config(T)
SPACE = SearchSpace(BASE, {"slots": {str(n): {"parallel_slots": n} for n in (1, 2, 4)},
                           "prefill": {"defaults": {}, "ub128": {"ubatch_tokens": 128},
                                       "ub256": {"ubatch_tokens": 256}}})
LABELS = [SPACE.label(c) for c in SPACE.choices()]  # 9 configurations
CFG = {SPACE.label(c): SPACE.config(c) for c in SPACE.choices()}


def ranked(medians: dict[str, float]) -> list[tuple[str, object]]:
    return [(lb, CFG[lb]) for lb in fin.ranked_by(medians)]


def test_the_finalists_are_the_grids_top_five_and_each_pick_once_per_configuration():
    medians = {lb: 100.0 - i for i, lb in enumerate(LABELS)}  # LABELS[0] best
    outside = CONTROL  # the defaults: not in the space
    picks = {"ladder": ("ladder-pick", outside), "tpe": (LABELS[1], CFG[LABELS[1]]),
             # random's pick under another name but the same configuration as grid#3
             "random": ("renamed", CFG[LABELS[2]].model_copy(update={"port": 9999}))}
    got = fin.select(ranked(medians), picks)
    assert [f.name for f in got] == [*LABELS[:5], "ladder-pick"]
    assert got[1].roles == ["grid#2", "tpe"]
    assert got[2].roles == ["grid#3", "random"]  # deduplicated by configuration, not name
    assert got[5].roles == ["ladder"] and got[5].config is outside
    # A search that measured nothing has no pick; a smaller grid gives all it has.
    small = fin.select(ranked({lb: 1.0 for lb in LABELS[:3]}), {"tpe": None})
    assert [f.roles for f in small] == [["grid#1"], ["grid#2"], ["grid#3"]]


def test_equal_search_medians_rank_by_label():
    assert fin.ranked_by({"b": 2.0, "a": 2.0, "c": 3.0}) == ["c", "a", "b"]
    assert fin.ranked_by({"b": 2.0, "a": 1.0}, higher=False) == ["a", "b"]


@pytest.mark.parametrize("n", [1, 2, 5, 7])
def test_rounds_come_in_mirrored_pairs_that_balance_every_position(n):
    orders = [fin.round_order(n, r) for r in range(6)]
    assert all(sorted(o) == list(range(n)) for o in orders)  # every finalist once a round
    for r in (0, 2, 4):
        assert orders[r + 1] == orders[r][::-1]  # every pair's order flips within a pair
        # so a drift linear across the pair hits each finalist at the same mean position
        pos = {i: orders[r].index(i) + orders[r + 1].index(i) for i in range(n)}
        assert set(pos.values()) == {n - 1}
    if n > 1:
        assert orders[2][0] == 1 and orders[4][0] == 2 % n  # each pair starts one later
    assert fin.round_order(0, 3) == []


def engine(values: dict[tuple[str, int], float | None]):
    def run(spec: TrialSpec) -> list[Trial]:
        v = values.get((spec.value, spec.repeat), 50.0)
        return [Trial(trial_id=spec.trial_id, role=spec.role.value, dimension=spec.dimension,
                      value=spec.value, repeat=spec.repeat, config=spec.config, engine=None,
                      benchmark=None, objective_value=v,
                      failed=None if v is not None else "did not start")]
    return run


def test_the_finalist_rounds_measure_each_once_per_round_with_fresh_prompts():
    finalists = fin.select(ranked({lb: 1.0 for lb in LABELS[:3]}), {})
    planted = {(LABELS[0], 1): 90.0, (LABELS[0], 2): None, (LABELS[2], 3): 70.0}
    specs: list[TrialSpec] = []

    def run(spec):
        specs.append(spec)
        return engine(planted)(spec)

    values, trials = drive(fin.remeasure(finalists, CONTROL, 3, seed=2), run)
    assert len(specs) == len(trials) == 9 and len({s.trial_id for s in specs}) == 9
    assert [s.value for s in specs[:3]] == LABELS[:3]
    assert [s.value for s in specs[3:6]] == LABELS[:3][::-1]
    # One prompt seed per round, shared by its finalists, used by no search (those start at
    # the bench seed and count up by one per paired round).
    seeds = [{s.seed for s in specs if s.repeat == r} for r in (1, 2, 3)]
    assert seeds == [{10_200}, {10_201}, {10_202}]
    assert values[0] == [90.0, None, 50.0] and values[2] == [50.0, 50.0, 70.0]
    assert all(s.role is TrialRole.TUNING and s.changes for s in specs)
    with pytest.raises(ValueError, match="at least 2"):
        next(fin.remeasure(finalists, CONTROL, 1, seed=0))


def test_a_ratio_is_t_on_the_per_round_log_ratios_worked_by_hand():
    # ladder/grid per round: 90/100, 99/110, 95/100 -> logs -0.10536, -0.10536, -0.05129;
    # mean -0.087338, sd 0.031216, t(0.975, 2 df) 4.3027, half-width 4.3027 * 0.031216 / sqrt 3
    # = 0.077544: 0.9164 [0.8480, 0.9903].
    c = fin.compact(fin.interval([100.0, 110.0, 100.0], [90.0, 99.0, 95.0]))
    assert c["ratio"] == pytest.approx(0.91637, rel=1e-4)
    assert (c["low"], c["high"]) == (pytest.approx(0.84799, rel=1e-4),
                                     pytest.approx(0.99025, rel=1e-4))
    assert c["n"] == 3 and c["sd_log"] == pytest.approx(0.031216, rel=1e-4)
    assert fin.against(c, 0.95) == "below 0.95 (the interval spans it)"
    assert fin.against(c, 1.0) == "below 1 (the whole interval)"
    assert fin.against({**c, "low": 0.96}, 0.95) == "at or above 0.95 (the whole interval)"
    # The same configuration on both sides: exactly 1, no spread.
    same = fin.compact(fin.interval([90.0, 80.0], [90.0, 80.0]))
    assert (same["ratio"], same["low"], same["high"]) == (1.0, 1.0, 1.0)
    assert fin.compact(fin.interval([1.0], [2.0]))["ratio"] is None


def seed_record(seed: int, grid_best_vals, ladder_vals, launches=16) -> dict:
    """Planted: grid#1 (best by search) re-measures below grid#2; the ladder's pick is
    grid#3; TPE's is grid#2; random's is outside the grid's top five."""
    return {
        "seed": seed,
        "launches": {"ladder": launches, "tpe": launches, "random": launches},
        "picks": {"ladder": {"finalist": "c", "decided": "baseline + c"},
                  "tpe": {"finalist": "b"}, "random": {"finalist": "z"}},
        "finalists": [
            {"name": "a", "roles": ["grid#1"], "search_median": 120.0,
             "values": [90.0, 95.0, 92.0]},
            {"name": "b", "roles": ["grid#2", "tpe"], "search_median": 110.0,
             "values": grid_best_vals},
            {"name": "c", "roles": ["grid#3", "ladder"], "search_median": 105.0,
             "values": ladder_vals},
            {"name": "d", "roles": ["grid#4"], "search_median": 104.0, "values": [None] * 3},
            {"name": "z", "roles": ["random"], "search_median": None,
             "values": [200.0, 200.0, 200.0]}],  # not a grid finalist: never the grid's best
        "orders": [list("abcdz"), list("zdcba"), list("bcdza")],
        "prompt_seeds": [fin.round_seed(seed, r) for r in range(3)]}


def planted_result(seeds: list[dict]) -> dict:
    return {"space": {"configurations": 42, "grid_launches": 84}, "seeds": seeds,
            "grid_medians": {"a": 120.0, "b": 110.0, "c": 105.0, "d": 104.0},
            "minutes": {"grid": 20.0, "searches": 30.0, "finalists": 15.0}}


def test_picks_are_scored_by_the_finalist_rounds_and_the_grid_best_is_re_measured():
    s, pairs = fin.score_seed(seed_record(0, [100.0, 110.0, 100.0], [90.0, 99.0, 95.0]), 42)
    assert s["grid_best"] == {"finalist": "b", "median": 100.0}  # not "a", the search's best
    assert s["picks"]["ladder"]["median"] == 95.0 and s["picks"]["random"]["median"] == 200.0
    assert s["ratios"]["ladder/grid"]["ratio"] == pytest.approx(0.91637, rel=1e-4)
    assert s["ratios"]["ladder/tpe"] == s["ratios"]["ladder/grid"]  # TPE picked the best
    assert s["ratios"]["ladder/random"]["ratio"] == pytest.approx(
        math.exp((math.log(.45) + math.log(.495) + math.log(.475)) / 3))
    # 16 launches: 38% of a one-pass grid of 42 (not 19% of its 84 two-repeat launches).
    assert s["launch_share"]["ladder"] == pytest.approx(16 / 42)
    assert f"{fin.launch_share(16, 42):.0%}" == "38%"
    # A round where either side failed is left out of the pair.
    s2, _ = fin.score_seed(seed_record(0, [100.0, None, 100.0], [90.0, 99.0, 95.0]), 42)
    assert s2["ratios"]["ladder/grid"]["n"] == 2
    assert pairs["ladder/grid"] == ([100.0, 110.0, 100.0], [90.0, 99.0, 95.0])


def test_pooling_over_seeds_both_ways_worked_by_hand():
    res = fin.scored(planted_result([
        seed_record(0, [100.0, 110.0, 100.0], [90.0, 99.0, 95.0]),
        seed_record(1, [100.0, 100.0, 100.0], [100.0, 100.0, 100.0], launches=18)]))
    p = res["pooled"]["ladder/grid"]
    # Rounds pooled: logs -0.10536, -0.10536, -0.05129, 0, 0, 0; mean -0.043669, sd 0.051751,
    # t(0.975, 5 df) 2.5706: 0.9573 [0.9067, 1.0107].
    assert (p["rounds"]["ratio"], p["rounds"]["low"], p["rounds"]["high"], p["rounds"]["n"]) \
        == (pytest.approx(0.95727, rel=1e-4), pytest.approx(0.90667, rel=1e-4),
            pytest.approx(1.01070, rel=1e-4), 6)
    # Over seeds: per-seed mean logs -0.087338 and 0; sd 0.061757, t(0.975, 1 df) 12.706:
    # the same point, 0.9573 [0.5496, 1.6673].
    assert (p["seeds"]["ratio"], p["seeds"]["low"], p["seeds"]["high"], p["seeds"]["n"]) \
        == (pytest.approx(0.95727, rel=1e-4), pytest.approx(0.54962, rel=1e-4),
            pytest.approx(1.66729, rel=1e-4), 2)
    one = fin.scored(planted_result([seed_record(0, [100.0, 110.0, 100.0],
                                                 [90.0, 99.0, 95.0])]))
    assert one["pooled"]["ladder/grid"]["seeds"] == {
        "ratio": None, "why": "1 seed(s): an interval over seeds needs 2"}
    table = fin.markdown(res)
    assert "| 0 | `c` 95.00 | 16 (38%) | `b` 100.00 | 0.916 [0.848, 0.990] |" in table
    assert "| all seeds, rounds pooled (n=6) | | 17.0 mean (40%) |" in table
    assert "| over seeds (n=2) |" in table


def test_the_picks_from_the_searches():
    o = SearchOutcome(best=LABELS[4], best_value=80.0, launches=3)
    assert search_pick(o, SPACE) == (LABELS[4], CFG[LABELS[4]])
    assert search_pick(SearchOutcome(best=None, best_value=None, launches=2), SPACE) is None
    inside = Incumbent("slots", CFG[LABELS[3]], [], chain=["parallel_slots=2"])
    control = Incumbent("control", CONTROL, [], role=TrialRole.CONTROL)
    out = ClimbOutcome(ladder=None, history=[inside], pruned=[], launches=12, chosen=control)
    name, cfg, info = ladder_pick(out, SPACE)  # the defaults were recommended: outside
    assert (name, cfg, info["decided"]) == ("ladder-pick", CONTROL,
                                             "control (the engine's defaults)")
    out.chosen = inside
    assert ladder_pick(out, SPACE)[:2] == (LABELS[3], CFG[LABELS[3]])


def test_a_seeds_finalist_phase_from_the_searches_to_its_scores():
    # The grid's search ranks LABELS[0] first by a lucky median; re-measured, LABELS[1] is
    # the best (100 tok/s); the ladder recommends LABELS[5] (sixth by search, so a finalist of
    # its own; 90 tok/s), TPE LABELS[1]; random search measured nothing.
    medians = {lb: 100.0 - i for i, lb in enumerate(LABELS)}
    truth = {LABELS[0]: 80.0, LABELS[1]: 100.0, LABELS[3]: 96.0}  # the others 90
    inc = Incumbent("slots", CFG[LABELS[5]], [], chain=["parallel_slots=2"])
    out = ClimbOutcome(ladder=None, history=[inc], pruned=[], launches=4, chosen=inc)
    tpe = SearchOutcome(best=LABELS[1], best_value=101.0, launches=4)
    rnd = SearchOutcome(best=None, best_value=None, launches=4)
    specs: list[TrialSpec] = []

    def run(spec):
        specs.append(spec)
        return engine({(spec.value, spec.repeat): truth.get(spec.value, 90.0)})(spec)

    rec = finalist_rounds(SPACE, medians, CONTROL, out, tpe, rnd, 1, 3, run)
    assert [f["name"] for f in rec["finalists"]] == LABELS[:6]
    assert rec["finalists"][5]["roles"] == ["ladder"] and len(specs) == 18
    assert rec["picks"]["random"]["finalist"] is None and rec["orders"][1][0] == LABELS[5]
    s, _ = fin.score_seed(rec, len(LABELS))
    assert s["grid_best"]["finalist"] == LABELS[1]
    assert s["ratios"]["ladder/grid"]["ratio"] == pytest.approx(0.9)
    assert s["ratios"]["ladder/random"] == {"ratio": None, "why": "no finalist on one side"}
    assert s["launch_share"]["ladder"] == pytest.approx(4 / 9)


def test_the_summary_writes_the_result_and_records_it(tmp_path, capsys):
    res = planted_result([seed_record(s, [100.0, 110.0, 100.0], [97.0, 105.0, 99.0])
                          for s in (0, 1)])
    res["curves"] = {"grid": [["a", "a"]], "ladder": [["c"], ["c"]]}
    rec = tmp_path / "repo" / "bench" / "results" / "tuner-x.json"
    summarize(res, tmp_path, rec)
    got = json.loads(rec.read_text())
    assert got == json.loads((tmp_path / "tuner_bench.json").read_text())
    assert "curves" not in got and (tmp_path / "tuner_bench_curves.json").exists()
    assert got["method"]["pooled"] == fin.POOLING
    assert got["goals"]["launch_share"].startswith("38% of a one-pass grid")
    out = capsys.readouterr().out
    assert "| seed | ladder's pick, re-measured |" in out
    assert (tmp_path / "tuner_bench.md").read_text() in out


def test_only_a_tuner_runs_folder_is_resumed(tmp_path):
    """`--resume`: a folder with the grid's trials goes on; any other is refused with what to
    give (argparse's error, exit 2)."""
    from bench.tuner_bench import not_resumable

    assert "no grid/trials" in not_resumable(tmp_path)
    (tmp_path / "grid" / "trials").mkdir(parents=True)
    assert not_resumable(tmp_path) is None
