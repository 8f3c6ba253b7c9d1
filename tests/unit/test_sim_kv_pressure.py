"""Issue 46: the stand-ins' KV pool binds. A replica admits a request only while its pool holds
the prompt (its prompt and outputs when the engine reserves them), and preempts the newest
running request when a decode step outgrows the pool, with the engine's own line; a pool that
holds the load never preempts. Run in-process on the shared simulated host, time scaled down."""

from __future__ import annotations

from tests.sim.gpu_host import Engine, Gpu, Memory, Model, Shape

MODEL = Model(architecture="LlamaForCausalLM", layers=2, hidden=64, heads=4, kv_heads=4,
              head_dim=16, params=10**6, bytes_per_param=2, native_context=4096, mtp_layers=0)
GPU = Gpu(name="SIMULATED", memory_bytes=2**34, hbm_bytes_per_s=3e12, bf16_flops_per_s=1e15,
          count=1, link_bytes_per_s=4.5e11)


def _serve(pool_tokens: int, reserve_outputs: bool, n: int = 8, prompt: int = 100,
           out: int = 60) -> tuple[Engine, list[tuple[int, object]], int]:
    lines: list[tuple[int, object]] = []
    shape = Shape(tp=1, pp=1, dp=1, max_seqs=n, max_len=prompt + out, kv_fp8=False, graphs=True)
    e = Engine(shape, MODEL, GPU, Memory(10**6, 1024, pool_tokens * 1024, pool_tokens), 1e-4,
               on_preempt=lambda k, r: lines.append((k, r)), reserve_outputs=reserve_outputs)
    replies = [e.replica().submit(prompt, out) for _ in range(n)]
    for q in replies:
        got = [q.get(timeout=30) for _ in range(out)]
        assert got[-1] is True and not any(got[:-1])  # every output token, then done
    return e, lines, e.peak_running


def test_a_pool_that_holds_the_load_never_preempts():
    e, lines, peak = _serve(pool_tokens=8 * 160, reserve_outputs=False)
    assert e.preemptions == 0 and lines == [] and peak == 8


def test_an_over_admitting_configuration_is_preempted_and_says_so():
    # 8 requests of 100 + 60 tokens need 1,280 tokens; the pool holds 900: admission fits 8
    # prompts (800), decode outgrows it, the newest are preempted and recomputed.
    e, lines, _ = _serve(pool_tokens=900, reserve_outputs=False)
    assert e.preemptions > 0 and sum(k for k, _ in lines) == e.preemptions


def test_an_engine_that_reserves_outputs_admits_fewer_and_never_preempts():
    # TensorRT-LLM's GUARANTEED_NO_EVICT: 160 tokens reserved per request, 900 hold 5.
    e, lines, peak = _serve(pool_tokens=900, reserve_outputs=True)
    assert e.preemptions == 0 and lines == [] and peak <= 5
