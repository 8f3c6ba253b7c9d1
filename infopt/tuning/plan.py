"""Whether two configurations are the same serving configuration (the port aside): when the
control and the baseline are (vLLM: its defaults already serve the native context), the
baseline's trials stand for the control and no separate control trial is run."""

from __future__ import annotations

from typing import Any


def same_config(a: Any, b: Any) -> bool:
    return a.model_dump(exclude={"port"}) == b.model_dump(exclude={"port"})
