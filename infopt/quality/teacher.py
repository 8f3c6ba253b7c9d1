"""Teacher forcing against real servers: the reference generates greedy continuations of the
fixed prompts and scores them itself; a candidate scores the same token ids. Both go through
the server's exact scoring (specs.endpoint.TokenScoring, from its engine adapter).

Checks that refuse garbage rather than report it: the reference's own top-1 must reproduce its
greedy tokens (else the server did not score what was asked, or is nondeterministic beyond use),
and a candidate must tokenize the prompts to the same ids (else it serves another tokenizer, and
token fidelity is meaningless)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint, TokenScoring
from infopt.specs.quality import FidelityResult, ReferenceSet, ScoredSequence

from .fidelity import fidelity, self_agreement
from .prompts import FIDELITY_PROMPTS

# Below this, the reference's scores do not reproduce its own greedy tokens: refused. Not 1.0:
# batched kernels can flip a near-tie between the generating and the scoring pass.
MIN_SELF_AGREEMENT = 0.95
DEFAULT_TOKENS = 32
DEFAULT_TOP_K = 8

Progress = Callable[[str], None]


def _scoring(endpoint: Endpoint) -> TokenScoring:
    if endpoint.scoring is None:
        raise InputError(
            f"{endpoint.base_url} ({endpoint.engine or 'unknown engine'}) offers no exact "
            "teacher forcing that infopt knows: token fidelity needs llama-server or vLLM (or "
            "another engine whose adapter declares token_scoring); name the engine with "
            "--reference-engine / --candidate-engine if it is one of those")
    return endpoint.scoring


def _client(endpoint: Endpoint, api_key: str | None, timeout_s: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(timeout=timeout_s, headers=headers)


def _unreachable(endpoint: Endpoint, exc: Exception) -> InputError:
    return InputError(f"cannot reach {endpoint.base_url} ({exc}); give the base URL of a "
                      "running llama-server or vLLM server, e.g. http://127.0.0.1:8000")


def build_reference(endpoint: Endpoint, *, tokens: int = DEFAULT_TOKENS,
                    top_k: int = DEFAULT_TOP_K, prompts: dict[str, str] = FIDELITY_PROMPTS,
                    api_key: str | None = None, timeout_s: float = 120.0,
                    progress: Progress | None = None) -> ReferenceSet:
    """Greedy continuations of `prompts` on the reference, scored by the reference."""
    sc, base = _scoring(endpoint), endpoint.base_url.rstrip("/")
    seqs = []
    try:
        with _client(endpoint, api_key, timeout_s) as client:
            for name, text in prompts.items():
                ids = sc.tokenize(client, base, endpoint.model, text)
                cont = sc.generate(client, base, endpoint.model, ids, tokens)
                seqs.append(ScoredSequence(prompt_name=name, prompt_text=text, prompt_ids=ids,
                                           continuation=cont,
                                           positions=sc.score(client, base, endpoint.model,
                                                              ids, cont, top_k)))
                if progress:
                    progress(f"reference: {name} ({len(cont)} tokens)")
    except httpx.TransportError as exc:
        raise _unreachable(endpoint, exc) from None
    agreement = self_agreement(seqs)
    if agreement < MIN_SELF_AGREEMENT:
        raise InputError(
            f"{endpoint.base_url}: its own teacher-forced top-1 reproduces only "
            f"{agreement:.1%} of its greedy tokens (at least {MIN_SELF_AGREEMENT:.0%} "
            "expected): the server is not scoring the tokens it is given, so every fidelity "
            "number would be garbage. Check that it is llama-server or vLLM serving one model "
            "and that no sampling defaults are forced server-side")
    return ReferenceSet(endpoint=endpoint.base_url, top_k=top_k, sequences=seqs,
                        self_agreement=agreement)


def score_sequences(endpoint: Endpoint, reference: ReferenceSet,
                    sequences: list[ScoredSequence], *, api_key: str | None = None,
                    timeout_s: float = 120.0, progress: Progress | None = None,
                    label: str = "candidate", concurrency: int = 1) -> list[ScoredSequence]:
    """The server's teacher-forced scores of `sequences` (some of the reference's), in order.
    concurrency > 1 scores that many sequences at once, so the server batches them (the noise
    floor at another batch size)."""
    sc, base = _scoring(endpoint), endpoint.base_url.rstrip("/")

    def one(ref: ScoredSequence) -> ScoredSequence:
        with _client(endpoint, api_key, timeout_s) as client:
            ids = sc.tokenize(client, base, endpoint.model, ref.prompt_text)
            if ids != ref.prompt_ids:
                raise InputError(
                    f"{endpoint.base_url} tokenizes the prompt {ref.prompt_name!r} to other "
                    f"token ids than the reference ({len(ids)} vs {len(ref.prompt_ids)} "
                    "tokens): it serves another tokenizer, so token fidelity cannot compare "
                    "them; score candidates of the same model against each other")
            scored = ref.model_copy(update={"positions": sc.score(
                client, base, endpoint.model, ref.prompt_ids, ref.continuation,
                reference.top_k)})
        if progress:
            progress(f"{label}: {ref.prompt_name}")
        return scored

    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(one, sequences))
    except httpx.TransportError as exc:
        raise _unreachable(endpoint, exc) from None


def score_candidate(endpoint: Endpoint, reference: ReferenceSet, *,
                    api_key: str | None = None, timeout_s: float = 120.0,
                    progress: Progress | None = None, label: str = "candidate",
                    concurrency: int = 1) -> FidelityResult:
    """The candidate's scores of every reference token, compared with the reference's."""
    scored = score_sequences(endpoint, reference, reference.sequences, api_key=api_key,
                             timeout_s=timeout_s, progress=progress, label=label,
                             concurrency=concurrency)
    return fidelity(reference, scored, endpoint.base_url)
