"""The weight candidates and downloads of a run, each behind its gate (flows/gate.py):
- the model's weights from the hub (the request's `model.download` patterns at `model.revision`
  of `model.hub_id`), only behind the download gate; denied or unanswered, the run stops with the
  answer (there is no model to serve without them);
- shortlisted hub checkpoints of the exact model as the ladder's weight candidates
  (infopt.tuning.hub_weights picks them): denied or unanswered, a checkpoint is skipped and the
  answer recorded, the run goes on with the others;
- the drafter search's verified drafters, only with downloads pre-authorized (`authorize:
  [download]`): a drafter is an optional extra, so a run never stops to ask for one; at most the
  best EAGLE head and the best draft model are fetched;
- variants made here (the request's `requantize`, GGUF on llama.cpp, its own llama-quantize),
  each behind the quantize gate: pre-authorized, approved, or denied/unanswered (skipped,
  recorded)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from blocks.credentials import hf_token
from flows.gate import ask
from flows.research import Research
from infopt.bootstrap import LLMC_VERSION, default_paths
from infopt.engines import adapter_for
from infopt.engines.calibration_texts import (
    calibration_sample,
)
from infopt.engines.hf_quantize import SCHEMES, hf_quantize_gate
from infopt.engines.rules import WeightVariant
from infopt.model.download import download_gate, fetch, select_files
from infopt.model.drafters import best_drafters
from infopt.model.hub import default_cache_dir, fetch_model_facts
from infopt.specs.approval import AnswerSource, GateAnswer, GateRequest
from infopt.specs.base import InfoptError, InputError
from infopt.specs.checkpoint import CheckpointCandidate, Shortlist
from infopt.specs.drafters import DrafterSearch
from infopt.specs.request import Authorization, OptimizeRequest
from infopt.tuning.hub_weights import (
    checkpoint_files,
    hf_checkpoint_files,
    identical_to,
    pick_checkpoints,
    spec_of,
    variant_format,
    why_reference,
    why_tried,
)
from infopt.tuning.weights import quantize_gate
from tasks.weights import (
    hf_variant_path,
    importance_matrix_task,
    quantize_hf_task,
    requantize_task,
    variant_path,
)

# How a gate is answered: flows.gate.ask with the request's authorization and timeout, or, while
# the control and the baseline run meanwhile, that wrapped to time the wait and to withdraw
# (flows/weight_gates.py).
AskGate = Callable[[GateRequest], GateAnswer]
LLMC = "llm-compressor"  # the adapters' local_quantizer of HF checkpoints


@dataclass(frozen=True)
class ReferenceAsk:
    """The unquantized base to ask for as the quality reference
    (infopt.tuning.hub_weights.reference_checkpoint), with the served format's name; or why
    it was not asked for, when the report should say."""

    base: CheckpointCandidate | None = None
    served_fmt: str | None = None
    note: str | None = None


NO_REFERENCE_ASK = ReferenceAsk()


def asker(request: OptimizeRequest) -> AskGate:
    return lambda gate: ask(gate, request.authorize, request.approval_timeout_s)


@task(name="download-weights", cache_policy=NO_CACHE)
def download_task(facts, files, cache_dir: str, credentials_block: str | None = None) -> str:
    path = fetch(facts, files, Path(cache_dir), hf_token(credentials_block))
    get_run_logger().info("downloaded %d file(s) of %s to %s", len(files), facts.repo_id, path)
    return str(path)


def download_model(request: OptimizeRequest, research: Research | None = None
                   ) -> tuple[str | None, list[GateAnswer]]:
    """(the downloaded model's local path, the gate's answer); (None, []) when nothing is to
    be downloaded. With `research`, a wait for a person is recorded with what ran meanwhile."""
    m = request.model
    if not m.download:
        return None, []
    cache = default_cache_dir()
    assert m.hub_id is not None  # model.download is refused without hub_id (ModelTarget)
    facts = fetch_model_facts(m.hub_id, cache_dir=cache, revision=m.revision,
                              endpoint=m.hub_endpoint, token=hf_token(request.credentials_block),
                              read_weight_headers=False)
    files = select_files(facts, m.download)
    gate = download_gate(facts, files, cache)
    research = research if research is not None else Research()
    answer = research.during(gate.key, lambda: ask(gate, request.authorize,
                                                   request.approval_timeout_s),
                             lambda a: a.source is not AnswerSource.PRE_AUTHORIZED)
    if not answer.approved:
        raise InputError(f"the download of {m.hub_id} was not approved ({answer.source.value}: "
                         f"{answer.reason or 'no reason given'}); approve it, pre-authorize it "
                         "with --authorize download, or give model.path to a local copy")
    return download_task(facts, files, str(cache), request.credentials_block), [answer]


def hub_variants(request: OptimizeRequest, shortlist: Shortlist | None, engine: str,
                 local_digest: str, ask_gate: AskGate,
                 reference: ReferenceAsk = NO_REFERENCE_ASK
                 ) -> tuple[list[WeightVariant], dict[str, GateAnswer], list[str]]:
    """(the downloaded checkpoints as variants, model path -> its gate's answer, notes).
    `reference`: the unquantized base to ask for as the quality reference (with the served
    format's name), asked even without pre-authorization."""
    picked, why_none = pick_checkpoints(request, shortlist, engine)
    if shortlist is None:  # nothing shortlisted: nothing picked
        return [], {}, [why_none] if why_none else []
    base, served_fmt = reference.base, reference.served_fmt
    if base is not None and not any(c.repo_id == base.repo_id and not c.gguf_file
                                    for c in picked):
        picked = [*picked, base]
    variants, answers, notes = [], {}, [why_none] if why_none else []
    cache = default_cache_dir()
    for c in picked:
        facts = fetch_model_facts(c.repo_id, cache_dir=cache, revision=c.commit_sha,
                                  endpoint=shortlist.endpoint,
                                  token=hf_token(request.credentials_block),
                                  read_weight_headers=False)
        files = checkpoint_files(c, facts.files)
        if identical_to(files, local_digest):  # the hub's LFS hash: nothing fetched to know
            notes.append(f"shortlisted {spec_of(c)}: byte-identical to the served checkpoint "
                         f"(sha256 {local_digest[7:19]}…), not downloaded")
            continue
        answer = ask_gate(download_gate(facts, files, cache))
        if not answer.approved:
            notes.append(f"shortlisted {spec_of(c)}: not downloaded (the download gate was "
                         f"not approved: {answer.source.value})")
            answers[spec_of(c)] = answer
            continue
        path = download_task(facts, files, str(cache), request.credentials_block)
        fmt, bits = variant_format(c)
        why = why_reference(c, served_fmt) if c is base else why_tried(c)
        variants.append(WeightVariant(fmt, path, bits, source=c.repo_id, why=why))
        answers[path] = answer
        get_run_logger().info("weight candidate %s from %s: %s", fmt, c.repo_id, Path(path))
    return variants, answers, notes


def fetch_drafters(request: OptimizeRequest, search: DrafterSearch) -> dict[str, str]:
    """{repository: its downloaded folder} for the drafters the gate let through."""
    log = get_run_logger()
    picks = best_drafters(search)
    if not picks:
        return {}
    if Authorization.DOWNLOAD not in request.authorize:
        log.info("drafters %s: not downloaded (downloads were not authorized; pre-authorize "
                 "with `authorize: [download]`)", ", ".join(f.repo_id for f in picks))
        return {}
    cache, out = default_cache_dir(), {}
    for f in picks:
        facts = fetch_model_facts(f.repo_id, cache_dir=cache, revision=f.commit_sha,
                                  endpoint=search.endpoint,
                                  token=hf_token(request.credentials_block),
                                  read_weight_headers=False)
        files = hf_checkpoint_files(facts.files)
        answer = ask(download_gate(facts, files, cache), request.authorize,
                     request.approval_timeout_s)
        if not answer.approved:
            log.info("drafter %s: not downloaded (%s)", f.repo_id, answer.source.value)
            continue
        out[f.repo_id] = download_task(facts, files, str(cache), request.credentials_block)
        log.info("drafter %s (%s): %s", f.repo_id, f.kind, out[f.repo_id])
    return out


def requested_types(request: OptimizeRequest, engine: str, current: str | None
                    ) -> tuple[list[str], str | None]:
    """The variants to make: the request's `requantize`, else (quantization pre-authorized)
    the adapter's formats for this device, less the checkpoint's own; and, when none, why."""
    if request.requantize:
        return list(request.requantize), None
    formats = adapter_for(engine).weight_formats
    if not formats:
        return [], None
    if Authorization.QUANTIZE not in request.authorize:
        return [], ("local quantization was not authorized: list the types in `requantize` "
                    "(each asks the quantize gate) or pre-authorize with `authorize: "
                    f"[quantize]` to try {', '.join(formats)}")
    return [t for t in formats if t != current], None


def weight_variants(request: OptimizeRequest, model, engine: str, tool_version: str,
                    digest: str, ask_gate: AskGate
                    ) -> tuple[dict[str, Path], dict[str, GateAnswer], list[str]]:
    """(type -> variant for each approved type, type -> its gate's answer, notes): GGUF types
    with llama-quantize on llama.cpp, llm-compressor schemes of an HF checkpoint on vLLM."""
    types, why_none = requested_types(request, engine, current_type(model))
    if not types:
        return {}, {}, [why_none] if why_none else []
    quantizer = adapter_for(engine).local_quantizer
    gguf = model.path.endswith(".gguf")
    own = [t for t in types if (t in SCHEMES) == (quantizer == LLMC and not gguf)]
    notes = ([f"requantize {[t for t in types if t not in own]}: not applicable (infopt makes "
              f"GGUF variants with llama.cpp's llama-quantize and HF variants with "
              f"llm-compressor on vLLM; this run serves {engine} from {Path(model.path).name})"]
             if len(own) < len(types) else [])
    if quantizer is None or not own:
        return {}, {}, notes
    make = _hf_variants if quantizer == LLMC else _gguf_variants
    variants, answers, more = make(request, model, engine, tool_version, digest, own, ask_gate)
    denied = [t for t, a in answers.items() if not a.approved]
    return variants, answers, notes + more + (
        [f"weights {', '.join(denied)}: not made (the quantize gate was not approved)"]
        if denied else [])


def _gguf_variants(request: OptimizeRequest, model, engine: str, tool_version: str,
                   digest: str, types: list[str], ask_gate: AskGate
                   ) -> tuple[dict[str, Path], dict[str, GateAnswer], list[str]]:
    """llama-quantize's types, each behind the quantize gate; with `quantize.imatrix`, each
    weighted by one importance matrix over the calibration sample (computed at the first
    approval; one that fails leaves the types unmade, and says why)."""
    variants, answers = {}, {}
    tool = f"{adapter_for(engine).local_quantizer} ({engine} {tool_version})"
    q = request.quantize
    sample = calibration_sample(q.calibration, q.samples) if q.imatrix else None
    if sample is not None and not default_paths().llama_imatrix.exists():
        return {}, {}, [f"requantize {types} with an importance matrix: llama-imatrix is not "
                        "installed here; run `make engines-quantize`"]
    imatrix: str | None = None
    for gguf_type in types:
        out = variant_path(digest, tool_version, gguf_type, sample.digest if sample else None)
        gate = quantize_gate(Path(model.path), model.file_bytes,
                             getattr(model.inspection, "params_total", None), gguf_type, tool,
                             out.parent, sample.what if sample else None)
        answer = ask_gate(gate)
        answers[gguf_type] = answer
        if not answer.approved:
            continue
        try:
            if sample is not None and imatrix is None:
                imatrix = importance_matrix_task(model.path, digest, tool_version, sample.texts)
            variants[gguf_type] = Path(requantize_task(
                model.path, digest, tool_version, gguf_type, imatrix,
                sample.digest if sample else None))
        except InfoptError as exc:
            return variants, answers, [f"weights {gguf_type}: not made ({exc})"]
    return variants, answers, []


def _hf_variants(request: OptimizeRequest, model, engine: str, tool_version: str,
                 digest: str, schemes: list[str], ask_gate: AskGate
                 ) -> tuple[dict[str, Path], dict[str, GateAnswer], list[str]]:
    """llm-compressor's recipes on the HF checkpoint, each behind the quantize gate with the
    request's time budget; one that fails or runs out of time is skipped and said."""
    q = request.quantize
    sample = calibration_sample(q.calibration, q.samples)
    texts = sample.texts
    if not default_paths().llmc_python.exists():
        return {}, {}, [f"requantize {schemes}: llm-compressor is not installed here; run "
                        "`make engines-quantize` (its own environment beside vLLM's)"]
    variants, answers, notes = {}, {}, []
    tool = f"llm-compressor {LLMC_VERSION} (its own environment beside vLLM {tool_version}'s)"
    params = getattr(model.inspection, "params_total", None)
    for scheme in schemes:
        out = hf_variant_path(digest, scheme, sample.digest, q)
        gate = hf_quantize_gate(Path(model.path), model.file_bytes, params, scheme, tool,
                                out.parent, q.model_copy(update={"samples": len(texts)}),
                                sample.source)
        answer = ask_gate(gate)
        answers[scheme] = answer
        if not answer.approved:
            continue
        try:
            variants[scheme] = Path(quantize_hf_task(model.path, str(out), scheme, texts, q))
        except InfoptError as exc:
            notes.append(f"weights {scheme}: not made ({exc})")
    return variants, answers, notes


def current_type(model) -> str | None:
    """The GGUF type of the checkpoint ("Q4_1" from "Q4_1 (5 bits/weight ...)")."""
    fmt = getattr(model, "weight_format", None) or ""
    return fmt.split(" ")[0] or None if model.path.endswith(".gguf") else None
