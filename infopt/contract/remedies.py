"""From a contract's failed checks to what would provide them: the engine's remedies (data in
its adapter) matched by feature. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from infopt.specs.contract import ContractCheck, ContractGap, ContractRemedy


def contract_gaps(checks: Sequence[ContractCheck],
                  remedies: Sequence[ContractRemedy]) -> list[ContractGap]:
    by_feature = {f: r for r in remedies for f in r.features}
    return [ContractGap(feature=c.feature, status=c.status, detail=c.detail,
                        required=c.required, remedy=by_feature.get(c.feature))
            for c in checks if c.gap]


def remedy_for_required(gaps: Sequence[ContractGap]) -> ContractRemedy | None:
    """One remedy that provides every required check that failed (None: none does, or
    nothing required failed). Several partial remedies are not combined: each would be its own
    candidate change, and a run applies one."""
    needed = [g for g in gaps if g.required]
    if not needed or any(g.remedy is None for g in needed):
        return None
    first = needed[0].remedy
    return first if all(g.remedy == first for g in needed) else None
