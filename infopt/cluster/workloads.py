"""The traffic the cluster flow measures, derived from the accepted run's own: its lengths and
SLOs at a Poisson rate (a boundary probe), and the router comparison's two workloads, with and
without shared prefixes (sessions: each prefix group is a conversation's history, sent with
its own X-Session-ID)."""

from __future__ import annotations

from infopt.specs.serving import AnyServingConfig
from infopt.specs.traffic import ClosedLoop, PoissonArrival, PrefixReuse, Slo, TrafficSpec

PROBE_WARMUP = 4  # requests before each probe's measured ones (discarded)
# The long prompts mixed in beside the decode load (at most half the served context), and how
# many: each outlasts the decode phase on a CPU (a 4,096-token prompt took ~40 s on one thread
# of the AVX2 EPYC), so a few cover it without running on long after it.
LONG_PROMPT_TOKENS = 2048
LONG_PROMPTS = 2


def probe_traffic(base: TrafficSpec, rate_per_s: float, requests: int, slos: list[Slo],
                  seed: int) -> TrafficSpec:
    """The base traffic's lengths, routes and prefixes at a Poisson `rate_per_s`, sent at that
    mean rate exactly (PoissonArrival.exact_mean): a probe of 40 requests is labelled with the
    rate it offered."""
    return _validated(base, {
        "name": f"rate-{rate_per_s:.4g}",
        "arrival": PoissonArrival(rate_per_s=rate_per_s, exact_mean=True),
        "measured_requests": requests, "duration_s": None, "warmup_requests": PROBE_WARMUP,
        "slos": slos, "seed": seed, "cooldown_s": 0.0})


def comparison_traffic(base: TrafficSpec, *, sessions: int | None, prefix_tokens: int,
                       requests: int, concurrency: int, seed: int) -> TrafficSpec:
    """A closed loop at `concurrency` over the base lengths: every request in one of
    `sessions` prefix groups, or (None) none shared."""
    prefix = (PrefixReuse(reuse_ratio=1.0, shared_prefix_tokens=prefix_tokens,
                          prefix_groups=sessions) if sessions else PrefixReuse())
    return _validated(base, {
        "name": "sessions" if sessions else "unique", "arrival": ClosedLoop(
            concurrency=concurrency), "prefix": prefix, "measured_requests": requests,
        "duration_s": None, "warmup_requests": 0, "seed": seed, "cooldown_s": 0.0,
        "peak_active_generations": concurrency})


def long_prompt_tokens(max_input_tokens: int) -> int:
    return min(max_input_tokens // 2, LONG_PROMPT_TOKENS)


def long_prompt_traffic(decode: TrafficSpec, max_input_tokens: int) -> TrafficSpec:
    """The long prompts sent beside the decode load (the P/D interference check): one at a
    time, two output tokens each, half the served context at most."""
    return _validated(decode, {
        "name": "long-prompts", "arrival": ClosedLoop(concurrency=1),
        "peak_active_generations": 1,
        "input_lengths": {"kind": "fixed", "tokens": long_prompt_tokens(max_input_tokens)},
        "output_lengths": {"kind": "fixed", "tokens": 2}, "measured_requests": LONG_PROMPTS})


def _validated(base: TrafficSpec, update: dict) -> TrafficSpec:
    """A copy with `update`, validated again (model_copy alone checks nothing)."""
    return TrafficSpec.model_validate({**base.model_dump(), **update})


def replica_config(config: AnyServingConfig, threads: int | None) -> AnyServingConfig:
    """The winner as one of several replicas: on loopback, a free port each, and where the
    engine runs on CPU threads, its share of them."""
    update: dict = {"port": None, "host": "127.0.0.1"}
    if threads is not None and "threads" in type(config).model_fields:
        update["threads"] = threads
    return config.model_copy(update=update)
