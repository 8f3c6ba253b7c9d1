"""Bisection over a monotone predicate on whole numbers: the largest n that still passes (the
most layers, sequences or context that fit) or the smallest that passes (the fewest layers whose
experts must leave the device). One search for every such question, so each is the same
O(log n) walk and none is a hand-rolled copy."""

from __future__ import annotations

from collections.abc import Callable


def last_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest n in [lo, hi] with ok(n), where ok holds up to some n and fails above it;
    None when ok(lo) fails (or the range is empty)."""
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def first_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The smallest n in [lo, hi] with ok(n), where ok fails up to some n and holds above it;
    None when ok(hi) fails (or the range is empty)."""
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            best, hi = mid, mid - 1
        else:
            lo = mid + 1
    return best
