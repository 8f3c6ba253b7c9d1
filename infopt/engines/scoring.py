"""Exact teacher forcing, per engine, as data for the quality gate (specs.endpoint.TokenScoring).

- vLLM: `prompt_logprobs` on /v1/completions scores every prompt token in one request: the
  given token's logprob and rank, plus the top-k, per position.
- llama.cpp: `llama-server` returns probabilities only for generated tokens, so each position is
  one /completion request for one token with the prefix in its prompt cache. A `logit_bias` of
  +1000 on the reference token makes the server sample exactly that token; the probabilities it
  reports are the model's own (computed before any sampler, logit bias included:
  `post_sampling_probs` is off), so the token's logprob is exact even outside the top-k.
  Verified on llama.cpp 0.3.36: the biased token's logprob equals its value in an unbiased top-k.

- SGLang: its native /generate route returns input-token logprobs (`return_logprob`,
  `logprob_start_len`, `top_logprobs_num`; meta_info `input_token_logprobs` as [logprob,
  token id, text] per position from logprob_start_len, `input_top_logprobs` likewise, per
  sglang/srt/managers/io_struct.py GenerateReqInput and test/srt/test_srt_endpoint.py, which
  asserts len(input_token_logprobs) + logprob_start_len == prompt_tokens), so one request per
  sequence scores the continuation exactly; /tokenize has vLLM's request and answer.

Each answer is checked against what was asked (the token that came back is the one forced, k
entries, logprobs <= 0): a server that ignores a field fails loudly here, never as a silent
score at chance (lm-evaluation-harness through llama-server, llama.cpp issue 27174).
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import httpx

from infopt.specs.base import InfoptError
from infopt.specs.endpoint import TokenScoring
from infopt.specs.quality import PositionScore, TokenLogprob

_BIAS = 1000.0  # far above any logit gap: the forced token is always the one sampled


class ScoringError(InfoptError):
    """The server did not return what teacher forcing asked for."""


def _post(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(url, json=body)
    if r.status_code != 200:
        raise ScoringError(f"{url} answered HTTP {r.status_code} to a scoring request: "
                           f"{r.text[:200]}; the server cannot score tokens this way")
    return r.json()


def _checked(token_id: int, logprob: float, top: list[TokenLogprob], k: int,
             where: str) -> PositionScore:
    if not math.isfinite(logprob) or logprob > 1e-4 or len(top) < min(k, 1):
        raise ScoringError(f"{where}: logprob {logprob} for token {token_id} with {len(top)} "
                           f"top entries (asked {k}); the server did not score the token asked")
    if any(b.logprob > a.logprob + 1e-6 for a, b in pairwise(top)):
        raise ScoringError(f"{where}: the top-{k} list is not in descending order")
    return PositionScore(token_id=token_id, logprob=logprob, top=top[:k])


# --- llama.cpp -------------------------------------------------------------------------------

def llamacpp_tokenize(client: httpx.Client, base: str, model: str, text: str) -> list[int]:
    return list(_post(client, f"{base}/tokenize", {"content": text})["tokens"])


def llamacpp_generate(client: httpx.Client, base: str, model: str, prompt: list[int],
                      n: int) -> list[int]:
    js = _post(client, f"{base}/completion", {"prompt": prompt, "n_predict": n,
                                              "temperature": 0.0, "return_tokens": True,
                                              "cache_prompt": True})
    return list(js["tokens"])


def llamacpp_score(client: httpx.Client, base: str, model: str, prompt: list[int],
                   continuation: list[int], k: int) -> list[PositionScore | None]:
    out: list[PositionScore | None] = []
    for i, tok in enumerate(continuation):
        js = _post(client, f"{base}/completion", {
            "prompt": prompt + continuation[:i], "n_predict": 1, "n_probs": k,
            "temperature": 0.0, "logit_bias": [[tok, _BIAS]], "cache_prompt": True,
            "post_sampling_probs": False})
        probs = js.get("completion_probabilities") or []
        if not probs and js.get("tokens_predicted") == 1:
            # The token ends inside a UTF-8 character (a byte-fallback piece): llama-server
            # holds such a token back and reports no probabilities for it
            # (server-context.cpp process_token, `incomplete`). Unscored, not guessed.
            out.append(None)
            continue
        if len(probs) != 1 or probs[0].get("id") != tok:
            got = probs[0].get("id") if probs else None
            raise ScoringError(f"llama-server returned token {got} where {tok} was forced at "
                               f"position {i}: logit_bias was not honoured")
        top = [TokenLogprob(token_id=t["id"], logprob=t["logprob"])
               for t in probs[0].get("top_logprobs") or []]
        out.append(_checked(tok, probs[0]["logprob"], top, k, f"position {i}"))
    return out


LLAMACPP_SCORING = TokenScoring(
    tokenize=llamacpp_tokenize, generate=llamacpp_generate, score=llamacpp_score,
    how="llama-server /completion, one request per position with the prefix cached; "
        "logit_bias forces the reference token, n_probs gives the top-k (exact)")


# --- vLLM (and servers with its prompt_logprobs extension) -----------------------------------

def vllm_tokenize(client: httpx.Client, base: str, model: str, text: str) -> list[int]:
    js = _post(client, f"{base}/tokenize", {"model": model, "prompt": text,
                                            "add_special_tokens": False})
    return list(js["tokens"])


def vllm_generate(client: httpx.Client, base: str, model: str, prompt: list[int],
                  n: int) -> list[int]:
    js = _post(client, f"{base}/v1/completions", {"model": model, "prompt": prompt,
                                                  "max_tokens": n, "temperature": 0.0,
                                                  "return_token_ids": True})
    ids = js["choices"][0].get("token_ids")
    if ids is None:
        raise ScoringError("the server ignored return_token_ids: token ids are needed to "
                           "teacher-force the continuation")
    return list(ids)


def vllm_score(client: httpx.Client, base: str, model: str, prompt: list[int],
               continuation: list[int], k: int) -> list[PositionScore]:
    js = _post(client, f"{base}/v1/completions", {"model": model,
                                                  "prompt": prompt + continuation,
                                                  "max_tokens": 1, "temperature": 0.0,
                                                  "prompt_logprobs": k})
    rows = js["choices"][0].get("prompt_logprobs")
    if rows is None or len(rows) != len(prompt) + len(continuation):
        raise ScoringError(f"asked prompt_logprobs for {len(prompt) + len(continuation)} "
                           f"tokens, got {None if rows is None else len(rows)}")
    out = []
    for i, (tok, row) in enumerate(zip(continuation, rows[len(prompt):], strict=True)):
        entries = {int(t): v for t, v in (row or {}).items()}
        if tok not in entries:
            raise ScoringError(f"prompt_logprobs at position {i} lacks the given token {tok}")
        top = sorted((TokenLogprob(token_id=t, logprob=v["logprob"])
                      for t, v in entries.items() if v.get("rank", k + 1) <= k),
                     key=lambda t: -t.logprob)
        out.append(_checked(tok, entries[tok]["logprob"], top, k, f"position {i}"))
    return out


PROMPT_LOGPROBS_SCORING = TokenScoring(
    tokenize=vllm_tokenize, generate=vllm_generate, score=vllm_score,
    how="/v1/completions with prompt_logprobs=k over prompt + continuation, one request per "
        "sequence (exact)")


# --- SGLang (native /generate) ----------------------------------------------------------------

def sglang_generate(client: httpx.Client, base: str, model: str, prompt: list[int],
                    n: int) -> list[int]:
    js = _post(client, f"{base}/generate", {"input_ids": prompt, "sampling_params": {
        "max_new_tokens": n, "temperature": 0.0}})
    ids = js.get("output_ids")
    if not isinstance(ids, list):
        raise ScoringError("SGLang's /generate answered without output_ids: token ids are "
                           "needed to teacher-force the continuation")
    return [int(t) for t in ids]


def sglang_score(client: httpx.Client, base: str, model: str, prompt: list[int],
                 continuation: list[int], k: int) -> list[PositionScore]:
    js = _post(client, f"{base}/generate", {
        "input_ids": prompt + continuation, "return_logprob": True,
        "logprob_start_len": len(prompt), "top_logprobs_num": k,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}})
    meta = js.get("meta_info") or {}
    rows, tops = meta.get("input_token_logprobs"), meta.get("input_top_logprobs") or []
    if rows is None or len(rows) != len(continuation):
        raise ScoringError(f"asked input logprobs for the {len(continuation)} continuation "
                           f"tokens, got {None if rows is None else len(rows)}")
    out = []
    for i, (tok, row) in enumerate(zip(continuation, rows, strict=True)):
        logprob, token_id = row[0], int(row[1])
        if token_id != tok or logprob is None:
            raise ScoringError(f"input_token_logprobs at position {i} is for token {token_id} "
                               f"(logprob {logprob}), not the given {tok}")
        top = sorted((TokenLogprob(token_id=int(t[1]), logprob=t[0])
                      for t in (tops[i] if i < len(tops) and tops[i] else [])),
                     key=lambda t: -t.logprob)
        out.append(_checked(tok, logprob, top, k, f"position {i}"))
    return out


SGLANG_SCORING = TokenScoring(
    tokenize=vllm_tokenize, generate=sglang_generate, score=sglang_score,
    how="SGLang /generate with return_logprob, logprob_start_len at the continuation and "
        "top_logprobs_num=k over prompt + continuation, one request per sequence (exact)")
