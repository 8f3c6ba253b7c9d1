"""Prompts are unique to a run (a nonce), and each carries what the workload explains of any
prefix-cache hit: the route's template, a declared shared prefix, the unique head."""

from __future__ import annotations

from infopt.loadgen.runner import build_prompts
from infopt.loadgen.schedule import build_schedule
from infopt.specs.traffic import ClosedLoop, FixedLengths, PrefixReuse, TrafficSpec


def _count(text: str) -> int:  # a whitespace tokenizer: enough to check the arithmetic
    return len(text.split())


def _planned(prefix: PrefixReuse | None = None):
    spec = TrafficSpec(name="t", arrival=ClosedLoop(concurrency=2),
                       input_lengths=FixedLengths(tokens=40),
                       output_lengths=FixedLengths(tokens=4), measured_requests=4,
                       warmup_requests=0, prefix=prefix or PrefixReuse())
    return build_schedule(spec, seed=0, max_input_tokens=1000)


def test_same_workload_twice_gives_different_prompts_of_the_same_length():
    planned = _planned()
    overheads = {r.route: 7 for r in planned}
    a = build_prompts(planned, 0, _count, overheads, nonce="run-a")
    b = build_prompts(planned, 0, _count, overheads, nonce="run-b")
    again = build_prompts(planned, 0, _count, overheads, nonce="run-a")
    assert all(a[k].text != b[k].text and a[k].tokens == b[k].tokens == 40 for k in a)
    assert a == again  # the nonce, not chance, decides


def test_cache_allowance_is_template_plus_declared_prefix_plus_unique_head():
    planned = _planned()
    overheads = {r.route: 7 for r in planned}
    for p in build_prompts(planned, 0, _count, overheads, nonce="n").values():
        assert p.cache_allowed == 7 + 1  # template + the "tag:" head word
    shared = _planned(PrefixReuse(reuse_ratio=1.0, shared_prefix_tokens=10, prefix_groups=1))
    for p in build_prompts(shared, 0, _count, {r.route: 7 for r in shared}, nonce="n").values():
        assert p.cache_allowed == 7 + 10 + 1


def test_approximate_prompts_are_not_checked():
    planned = _planned()
    assert all(p.cache_allowed is None
               for p in build_prompts(planned, 0, None, {}, nonce="n").values())
