"""TrafficSpec -> request schedule: distributions, determinism, prefix reuse, route mix."""

from collections import Counter

import numpy as np
import pytest
from pydantic import ValidationError

from infopt.loadgen.schedule import Phase, build_schedule, sample_lengths, summarize_schedule
from infopt.specs.base import InputError
from infopt.specs.scenarios import standard_scenarios
from infopt.specs.traffic import (
    LognormalLengths,
    TrafficSpec,
    UniformLengths,
    expand_sweep,
)

BIG = 1_000_000  # max_input_tokens that clips nothing


def _spec(**kw) -> TrafficSpec:
    base = dict(name="t", input_lengths={"kind": "fixed", "tokens": 100},
                output_lengths={"kind": "fixed", "tokens": 50}, measured_requests=100,
                warmup_requests=0)
    return TrafficSpec.model_validate({**base, **kw})


def _measured(reqs):
    return [r for r in reqs if r.phase is Phase.MEASURED]


def test_poisson_interarrivals_are_exponential_with_mean_one_over_rate():
    spec = _spec(arrival={"kind": "poisson", "rate_per_s": 4.0}, measured_requests=5000)
    offsets = np.array([r.send_offset_s for r in build_schedule(spec, seed=1,
                                                                max_input_tokens=BIG)])
    gaps = np.diff(offsets)
    assert offsets[0] == 0.0 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() == pytest.approx(0.25, rel=0.1)  # exponential: std = mean
    # Memoryless: the share of gaps above the mean is exp(-1).
    assert (gaps > 0.25).mean() == pytest.approx(np.exp(-1), abs=0.02)


def test_constant_arrivals_are_exactly_spaced():
    spec = _spec(arrival={"kind": "constant", "rate_per_s": 8.0}, warmup_requests=3,
                 measured_requests=997)
    offsets = [r.send_offset_s for r in build_schedule(spec, seed=0, max_input_tokens=BIG)]
    assert offsets[:3] == [0.0, 0.125, 0.25]
    assert offsets[-1] == 999 / 8  # no accumulated rounding
    assert np.allclose(np.diff(offsets), 0.125, rtol=0, atol=1e-12)


def test_bursts_arrive_as_groups():
    at_once = _spec(arrival={"kind": "bursts", "burst_size": 4, "burst_interval_s": 10},
                    measured_requests=12)
    offsets = [r.send_offset_s for r in build_schedule(at_once, seed=0, max_input_tokens=BIG)]
    assert offsets == [0.0] * 4 + [10.0] * 4 + [20.0] * 4
    spaced = _spec(arrival={"kind": "bursts", "burst_size": 3, "burst_interval_s": 5,
                            "within_burst_rate_per_s": 10}, measured_requests=6)
    offsets = [r.send_offset_s for r in build_schedule(spaced, seed=0, max_input_tokens=BIG)]
    assert offsets == pytest.approx([0.0, 0.1, 0.2, 5.0, 5.1, 5.2])


def test_closed_loop_has_no_send_times_and_warmup_first():
    spec = _spec(arrival={"kind": "closed_loop", "concurrency": 3}, warmup_requests=None,
                 measured_requests=10)
    reqs = build_schedule(spec, seed=5, max_input_tokens=BIG)
    assert len(reqs) == 13 and all(r.send_offset_s is None for r in reqs)
    assert [r.phase for r in reqs] == [Phase.WARMUP] * 3 + [Phase.MEASURED] * 10
    ids = [r.request_id for r in reqs]
    assert len(set(ids)) == 13 and ids[0] == "t-5-00000"


def test_duration_bounds_open_loop_measured_window():
    spec = _spec(arrival={"kind": "constant", "rate_per_s": 2.0}, warmup_requests=4,
                 measured_requests=None, duration_s=10)
    reqs = build_schedule(spec, seed=0, max_input_tokens=BIG)
    measured = _measured(reqs)
    # Window starts at the first measured send (2.0 s) and lasts 10 s: sends at 2.0 .. 11.5.
    assert len(measured) == 20
    assert measured[0].send_offset_s == 2.0 and measured[-1].send_offset_s == 11.5
    capped = spec.model_copy(update={"measured_requests": 7})
    assert len(_measured(build_schedule(capped, seed=0, max_input_tokens=BIG))) == 7
    poisson = _spec(arrival={"kind": "poisson", "rate_per_s": 50.0}, measured_requests=None,
                    duration_s=100)
    m = _measured(build_schedule(poisson, seed=3, max_input_tokens=BIG))
    assert m[-1].send_offset_s - m[0].send_offset_s < 100
    assert len(m) == pytest.approx(5000, rel=0.05)
    # A guess that was too small is redrawn with the same seed: the same prefix of sends.
    assert [r.send_offset_s for r in m[:100]] == [r.send_offset_s for r in _measured(
        build_schedule(poisson.model_copy(update={"measured_requests": 100}), seed=3,
                       max_input_tokens=BIG))]


def test_absurd_duration_is_an_input_error():
    # Each bound alone is plausible (10,000/s; 2 days), together 1.7e9 requests.
    spec = _spec(arrival={"kind": "constant", "rate_per_s": 1e4}, measured_requests=None,
                 duration_s=2 * 86400)
    with pytest.raises(InputError, match="shorten it or set measured_requests"):
        build_schedule(spec, seed=0, max_input_tokens=BIG)


@pytest.mark.parametrize("field,value", [
    ("arrival", {"kind": "poisson", "rate_per_s": 1e6}),
    ("arrival", {"kind": "closed_loop", "concurrency": 10_000}),
    ("warmup_requests", 10**7), ("cooldown_s", 1e5), ("duration_s", 1e9),
    ("peak_active_generations", 10**6)])
def test_absurd_sizes_are_refused_where_the_spec_is_read(field, value):
    with pytest.raises(ValidationError, match="less than or equal"):
        _spec(**{field: value})


def test_uniform_lengths_bounds_and_mean():
    x = sample_lengths(UniformLengths(min_tokens=10, max_tokens=20), 20000,
                       np.random.default_rng(0))
    assert x.min() == 10 and x.max() == 20  # both ends included
    assert x.mean() == pytest.approx(15, rel=0.01)


def test_lognormal_median_and_p95_match_the_spec():
    d = LognormalLengths(p50_tokens=1000, p95_tokens=4000)
    x = sample_lengths(d, 20000, np.random.default_rng(2))
    assert np.median(x) == pytest.approx(1000, rel=0.05)
    assert np.percentile(x, 95) == pytest.approx(4000, rel=0.05)
    capped = sample_lengths(d.model_copy(update={"max_tokens": 2000}), 2000,
                            np.random.default_rng(2))
    assert capped.max() == 2000 and capped.min() >= 1


def test_schedule_lengths_follow_distributions():
    spec = _spec(input_lengths={"kind": "lognormal", "p50_tokens": 300, "p95_tokens": 900},
                 output_lengths={"kind": "uniform", "min_tokens": 1, "max_tokens": 99},
                 measured_requests=8000)
    reqs = build_schedule(spec, seed=11, max_input_tokens=BIG)
    inp = np.array([r.input_tokens for r in reqs])
    out = np.array([r.output_tokens for r in reqs])
    assert np.median(inp) == pytest.approx(300, rel=0.05)
    assert np.percentile(inp, 95) == pytest.approx(900, rel=0.05)
    assert out.min() >= 1 and out.max() <= 99 and out.mean() == pytest.approx(50, rel=0.03)


def test_deterministic_per_seed_and_aspects_independent():
    spec = _spec(arrival={"kind": "poisson", "rate_per_s": 3},
                 input_lengths={"kind": "lognormal", "p50_tokens": 300, "p95_tokens": 900},
                 prefix={"reuse_ratio": 0.3, "shared_prefix_tokens": 64, "prefix_groups": 2},
                 routes=[{"route": "chat_completions", "weight": 2},
                         {"route": "responses", "weight": 1}])
    a = build_schedule(spec, seed=42, max_input_tokens=BIG)
    assert a == build_schedule(spec, seed=42, max_input_tokens=BIG)
    b = build_schedule(spec, seed=43, max_input_tokens=BIG)
    assert [r.send_offset_s for r in a] != [r.send_offset_s for r in b]
    assert [r.input_tokens for r in a] != [r.input_tokens for r in b]
    # A different route mix leaves arrivals, lengths and prefixes where they were.
    other = spec.model_copy(update={"routes": spec.routes[:1]})
    c = build_schedule(other, seed=42, max_input_tokens=BIG)
    for field in ("send_offset_s", "input_tokens", "output_tokens", "prefix_group"):
        assert [getattr(r, field) for r in a] == [getattr(r, field) for r in c]


def test_prefix_reuse_fraction_groups_and_tokens():
    spec = _spec(prefix={"reuse_ratio": 0.25, "shared_prefix_tokens": 500, "prefix_groups": 3},
                 warmup_requests=8, measured_requests=1000)
    reqs = build_schedule(spec, seed=9, max_input_tokens=BIG)
    measured = _measured(reqs)
    shared = [r for r in measured if r.prefix_group is not None]
    assert len(shared) == 250  # exactly the ratio, within the measured phase
    assert sum(r.prefix_group is not None for r in reqs[:8]) == 2  # warm-up: its own 25%
    assert Counter(r.prefix_group for r in shared) == {0: 84, 1: 83, 2: 83}
    assert all(r.prefix_tokens == 500 and r.input_tokens == 600 for r in shared)
    unique = [r for r in measured if r.prefix_group is None]
    assert all(r.prefix_tokens == 0 and r.input_tokens == 100 for r in unique)
    # Shared requests are scattered through the run, not bunched at the start.
    positions = [i for i, r in enumerate(measured) if r.prefix_group is not None]
    assert np.mean(positions) == pytest.approx(500, rel=0.1)


def test_no_reuse_by_default():
    reqs = build_schedule(_spec(), seed=0, max_input_tokens=BIG)
    assert all(r.prefix_group is None and r.prefix_tokens == 0 for r in reqs)


def test_route_mix_follows_weights():
    spec = _spec(measured_requests=1000, routes=[
        {"route": "chat_completions", "weight": 5, "stream": True},
        {"route": "chat_completions", "weight": 2, "stream": False},
        {"route": "anthropic_messages", "weight": 2},
        {"route": "responses", "weight": 1}])
    reqs = build_schedule(spec, seed=4, max_input_tokens=BIG)
    counts = Counter((r.route.value, r.stream) for r in reqs)
    assert counts == {("chat_completions", True): 500, ("chat_completions", False): 200,
                      ("anthropic_messages", True): 200, ("responses", True): 100}
    # Interleaved, not in blocks: the first hundred already mix the routes.
    assert len({(r.route, r.stream) for r in reqs[:100]}) == 4
    # Largest remainder when the shares do not divide evenly: 7 requests at 1:1:1 -> 3, 2, 2.
    odd = _spec(measured_requests=7, routes=[{"route": "chat_completions"},
                                             {"route": "completions"}, {"route": "responses"}])
    got = Counter(r.route.value for r in build_schedule(odd, seed=0, max_input_tokens=BIG))
    assert sorted(got.values()) == [2, 2, 3]


def test_inputs_clipped_to_max_input_tokens_and_counted():
    spec = _spec(input_lengths={"kind": "uniform", "min_tokens": 1, "max_tokens": 1000},
                 prefix={"reuse_ratio": 0.5, "shared_prefix_tokens": 200},
                 measured_requests=2000)
    reqs = build_schedule(spec, seed=0, max_input_tokens=800)
    assert max(r.input_tokens for r in reqs) == 800
    clipped = [r for r in reqs if r.clipped]
    assert clipped and all(r.input_tokens_drawn > 800 == r.input_tokens for r in clipped)
    summary = summarize_schedule(reqs)
    assert summary.clipped_inputs == len(clipped)
    assert summary.measured_requests == 2000 and summary.shared_prefix_requests == 1000
    assert summary.routes == {"chat_completions/stream": 2000}
    with pytest.raises(InputError, match="shared_prefix_tokens 200 leaves no room"):
        build_schedule(spec, seed=0, max_input_tokens=200)


def test_sweep_needs_expanding():
    spec = _spec(arrival={"kind": "sweep", "over": "rate", "values": [1, 2]})
    with pytest.raises(InputError, match="expand_sweep"):
        build_schedule(spec, seed=0, max_input_tokens=BIG)
    schedules = [build_schedule(s, seed=0, max_input_tokens=BIG) for s in expand_sweep(spec)]
    gaps = [np.mean(np.diff([r.send_offset_s for r in s])) for s in schedules]
    assert gaps[0] == pytest.approx(2 * gaps[1], rel=0.3)  # poisson at 1/s vs 2/s


def test_paired_trace_keeps_rows_together(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("input_tokens,output_tokens\n10,1\n20,2\n30,3\n")
    seq = _spec(input_lengths=None, output_lengths=None, measured_requests=7,
                lengths_trace={"path": str(trace), "order": "sequential"})
    reqs = build_schedule(seq, seed=0, max_input_tokens=BIG)
    assert [(r.input_tokens, r.output_tokens) for r in reqs] == \
        [(10, 1), (20, 2), (30, 3), (10, 1), (20, 2), (30, 3), (10, 1)]
    rnd = seq.model_copy(update={"lengths_trace": seq.lengths_trace.model_copy(
        update={"order": "random"}), "measured_requests": 300})
    pairs = Counter((r.input_tokens, r.output_tokens)
                    for r in build_schedule(rnd, seed=0, max_input_tokens=BIG))
    assert set(pairs) == {(10, 1), (20, 2), (30, 3)} and min(pairs.values()) > 60
    single = _spec(input_lengths={"kind": "trace", "path": str(trace)}, measured_requests=50)
    assert {r.input_tokens for r in build_schedule(single, seed=0, max_input_tokens=BIG)} \
        <= {10, 20, 30}


@pytest.mark.parametrize("native", [8192, 131072])
def test_standard_scenarios_build_without_clipping_full_context(native):
    for spec in standard_scenarios(native, 8):
        reqs = build_schedule(spec, seed=spec.seed, max_input_tokens=native - 256)
        assert len(_measured(reqs)) == spec.measured_requests
        if spec.name == "full-context":
            assert summarize_schedule(reqs).clipped_inputs == 0
            assert {r.input_tokens for r in reqs} == {native - 256}


def test_an_uncapped_lognormal_with_an_extreme_tail_stays_a_token_count():
    """p95/p50 of 10^7 draws values past int64 without a cap; they stop at the longest
    length a workload may ask for."""
    import numpy as np

    from infopt.loadgen.schedule import sample_lengths
    from infopt.specs.traffic import MAX_LENGTH_TOKENS, LognormalLengths

    d = LognormalLengths(kind="lognormal", p50_tokens=1, p95_tokens=MAX_LENGTH_TOKENS)
    x = sample_lengths(d, 100_000, np.random.default_rng(0))
    assert x.dtype == np.int64 and x.min() >= 1 and x.max() == MAX_LENGTH_TOKENS


def test_an_exact_mean_poisson_schedule_offers_the_rate_it_names():
    """A 40-request boundary probe drawn as plain Poisson averages anywhere within about +-30%
    of its rate (a probe labelled 7.0 requests/s was sent at 4.3): with exact_mean, the
    measured requests' gaps (and the warm-up's, apart) are rescaled to mean 1 / rate, and
    stay random."""
    def rates(exact: bool) -> list[float]:
        out = []
        for seed in range(20):
            spec = _spec(arrival={"kind": "poisson", "rate_per_s": 7.0, "exact_mean": exact},
                         measured_requests=40, warmup_requests=4)
            reqs = build_schedule(spec, seed=seed, max_input_tokens=BIG)
            measured = [r.send_offset_s for r in _measured(reqs)]
            warm = [r.send_offset_s for r in reqs if r.phase is Phase.WARMUP]
            if exact:
                assert warm[0] == 0.0 and np.diff(warm).mean() == pytest.approx(1 / 7.0)
                assert measured[0] - warm[-1] >= 0
            out.append((len(measured) - 1) / (measured[-1] - measured[0]))
        return out

    plain, exact = rates(False), rates(True)
    assert max(abs(r / 7.0 - 1) for r in plain) > 0.1  # the draw alone misses the rate
    assert all(r == pytest.approx(7.0, rel=1e-9) for r in exact)
    spec = _spec(arrival={"kind": "poisson", "rate_per_s": 7.0, "exact_mean": True},
                 measured_requests=2000)
    gaps = np.diff([r.send_offset_s for r in build_schedule(spec, seed=3,
                                                            max_input_tokens=BIG)])
    assert gaps.std() == pytest.approx(1 / 7.0, rel=0.1)  # still exponential: std = mean


def test_boundary_probes_are_sent_at_their_labelled_rate():
    from infopt.cluster.workloads import probe_traffic

    base = _spec(arrival={"kind": "closed_loop", "concurrency": 1})
    probe = probe_traffic(base, 7.04, 40, [], seed=5)
    assert probe.arrival.kind == "poisson" and probe.arrival.exact_mean


def test_an_exact_mean_schedule_is_counted_not_timed():
    with pytest.raises(ValidationError, match="exact_mean needs a count"):
        _spec(arrival={"kind": "poisson", "rate_per_s": 2.0, "exact_mean": True},
              duration_s=30.0)
