"""Loading a saved block by name: a missing one is one paragraph saying how to make it."""

from __future__ import annotations

from typing import TypeVar, cast

from prefect.blocks.core import Block

from infopt.specs.base import InputError

B = TypeVar("B", bound=Block)


def load_named(cls: type[B], name: str, example: str, otherwise: str = "") -> B:
    """`cls.load(name)`; `example` is the constructor call shown (e.g. "ResultsStore(url=...)"),
    `otherwise` what the user may do instead of creating it."""
    try:
        # Block.load is async_dispatch'ed (typed "block or coroutine"); called outside an event
        # loop, as every caller here is (each uses the block at once), it returns the block.
        return cast(B, cls.load(name))
    except ValueError as exc:  # Prefect's "Unable to find block document named ..."
        raise InputError(
            f"no {cls.__name__} block named '{name}' ({exc}). Create it once on this Prefect "
            "server: `PYTHONPATH=. prefect block register -m blocks`, then in the UI (Blocks "
            f"-> +) or `{example}.save('{name}')`{otherwise}") from None
