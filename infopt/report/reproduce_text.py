"""report.md's "reproduce the winner by hand" (infopt.tuning.reproduce)."""

from __future__ import annotations

from infopt.specs.results import Reproduction


def reproduce_lines(r: Reproduction | None) -> list[str]:
    if r is None:
        return []
    return ["## Reproduce the winner by hand", "",
            "Start the winner exactly as measured (any free port: change `--port` in both "
            "commands), then measure it on this run's own workload:", "",
            "```sh", r.command, r.bench_command, "```", "",
            f"Expected {r.objective}: {r.expected:.4g} {r.unit} (the mean of trials "
            f"{', '.join(f'`{t}`' for t in r.trial_ids)}, measured); " + (
                f"on this machine a re-measurement should fall within **{r.low:.4g} - "
                f"{r.high:.4g}** (estimated: {r.rule}). Outside it, the machine or the engine "
                "changed: compare with `infopt compare`." if r.low is not None else
                f"no band: {r.rule}."), ""]
