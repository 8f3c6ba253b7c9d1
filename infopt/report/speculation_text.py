"""The report's speculative-decoding section: per speculative trial and per scenario of the
workload, the drafted and accepted tokens as the engine reported them per request, beside the
objective. Acceptance alone never decides (the objective does, against the incumbent); it is
shown because it says why a drafter won or lost on this workload."""

from __future__ import annotations

from infopt.specs.drafters import DrafterSearch
from infopt.specs.results import Trial


def speculation_lines(trials: list[Trial], unit: str) -> list[str]:
    spec = [t for t in trials if t.dimension == "speculative" and t.benchmark is not None]
    if not spec:
        return []
    lines = ["", "## Speculative decoding (measured)", "",
             "Draft tokens and the share the target accepted, per scenario of the workload, "
             "from the engine's own per-request counts (llama.cpp: the response's `timings`, "
             "draft_n / draft_n_accepted), else from its Prometheus counters before and after "
             "the scenario (vLLM; marked \"counters\": warm-up requests included). A "
             "candidate is kept only if the objective measures better than the incumbent's; "
             "acceptance explains the outcome, it does not decide it. Tokens a step: the mean "
             "a verification yields, the target's own token included (vLLM and llama.cpp: "
             "1 + accepted / verification steps from their counters; SGLang: its own "
             "avg_spec_accept_length). \"not reported\": the engine gave no counts.", "",
             f"| trial | drafter and length | scenario | drafted | accepted | acceptance | "
             f"tokens a step | objective ({unit}) |", "|---|---|---|---|---|---|---|---|"]
    for t in spec:
        assert t.benchmark is not None
        for s in t.benchmark.scenarios:
            lvl = s.level
            rate = lvl.draft_acceptance
            drafted = "not reported" if lvl.draft_tokens_total is None \
                else f"{lvl.draft_tokens_total:,}"
            accepted = "—" if lvl.draft_tokens_accepted_total is None \
                else f"{lvl.draft_tokens_accepted_total:,}"
            value = "—" if t.objective_value is None else f"{t.objective_value:.4g}"
            if lvl.draft_counts_source is not None:
                drafted += " (counters)"
            step = "—" if lvl.spec_accept_length is None else f"{lvl.spec_accept_length:.2f}"
            lines.append(f"| {t.trial_id} | {t.value} | {s.name} | {drafted} | {accepted} | "
                         f"{'—' if rate is None else f'{rate:.1%}'} | {step} | {value} |")
    return lines


def drafter_search_lines(search: DrafterSearch | None) -> list[str]:
    """What the drafter search verified and turned down, each with its reason."""
    if search is None:
        return []
    lines = ["", "## Drafters of the exact model (hub metadata, verified)", "",
             f"Searched {search.endpoint} for {search.base_model}@{search.base_commit_sha[:12]} "
             f"({'; '.join(search.queries)}). No weights were downloaded: a hub drafter runs "
             "once the download gate has fetched it.", ""]
    if search.native_mtp:
        lines.append(f"- native: {search.native_mtp}")
    lines += [f"- **{f.kind}** `{f.repo_id}@{(f.commit_sha or '')[:12]}`: {f.why}"
              for f in search.drafters]
    if not search.native_mtp and not search.drafters:
        lines.append("- none verified: n-gram drafting is the only speculation tried")
    lines += [f"- turned down: `{f.repo_id}` ({f.kind}): {f.why}" for f in search.rejected]
    return lines
