"""Values a config.json leaves to its model family's configuration class.

Gemma 3's `text_config` omits vocab_size, max_position_embeddings, layer_types and
tie_word_embeddings because `Gemma3TextConfig` supplies them. Rather than a hand-kept table,
the family's own class in transformers (the library the checkpoints are written for) is built
from the config's keys, and only the keys the config lacks are taken from it; each one is
reported, so a reader can see which numbers the file did not state.

transformers is imported here only (about 1 s, once per process, configuration classes only: no
torch). A model_type it does not know (remote-code families such as nemotron-nas) gets no
defaults: the classifier then names the missing keys.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

# Keys a family default may supply: the ones the classifier sizes a model from when the file
# leaves them out.
FILLABLE = ("vocab_size", "max_position_embeddings", "tie_word_embeddings", "layer_types",
            "head_dim", "num_key_value_heads", "intermediate_size", "sliding_window")


@functools.lru_cache(maxsize=1)
def _config_mapping() -> Any:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found"
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return None
    logging.getLogger("transformers").setLevel(logging.ERROR)
    return CONFIG_MAPPING


def transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return str(transformers.__version__)


def family_defaults(cfg: dict[str, Any], model_type: str) -> tuple[dict[str, Any], str | None]:
    """({key: value} the family's configuration class gives for FILLABLE keys absent from
    `cfg`, the class that gave them); ({}, None) when transformers has no class for it."""
    mapping = _config_mapping()
    if mapping is None or model_type not in mapping:
        return {}, None
    cls = mapping[model_type]
    try:
        built = cls(**cfg).to_dict()
    except Exception:  # noqa: BLE001 - a config its own class rejects: no defaults, keys named
        return {}, None
    filled = {key: built[key] for key in FILLABLE
              if key not in cfg and built.get(key) is not None}
    return filled, f"transformers {transformers_version()} {cls.__name__}"
