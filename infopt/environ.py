"""The environment handed to third-party processes (engines, lm-eval, llama-quantize): infopt's
own credentials scrubbed. Those processes run code infopt does not control and write logs infopt
copies into reports; none of them needs a Hugging Face, GitHub or cloud token to serve or score
local files, so none gets one unless its caller names it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# Name parts that mark a variable as a credential: HF_TOKEN, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY,
# AWS_SESSION_TOKEN, OPENAI_API_KEY, PREFECT_API_KEY, GOOGLE_APPLICATION_CREDENTIALS... Matched
# on whole `_`-separated parts, so TOKENIZERS_PARALLELISM or KEYBOARD_LAYOUT stay.
_SECRET_PARTS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "APIKEY",
                           "CREDENTIALS", "CREDENTIAL", "AUTH", "PAT", "PASSPHRASE"})


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_PARTS & set(name.upper().split("_")))


def scrubbed(environ: Mapping[str, str] | None = None, keep: Iterable[str] = ()
             ) -> dict[str, str]:
    """`environ` (default: this process's) without credentials, except the names in `keep`."""
    keep = set(keep)
    return {k: v for k, v in (os.environ if environ is None else environ).items()
            if k in keep or not is_secret_name(k)}
