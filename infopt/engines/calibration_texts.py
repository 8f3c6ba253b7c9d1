"""The default calibration sample of local quantization (llm-compressor's GPTQ/SmoothQuant, and
llama.cpp's importance matrix): chat turns on everyday topics, built from fixed parts so the
sample is the same on every machine and a variant's cache key can name it. Deliberately
disjoint from the quality gate's prompts (infopt.quality.prompts and the long-context record):
a variant is never judged on the text it was calibrated on. A request names its own sample
with `quantize_calibration` (a text file, samples separated by blank lines), which is better
whenever the traffic is known.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from infopt.specs.base import InputError

_ASKS = (
    "How do I keep basil alive on a windowsill through the winter?",
    "Can you explain what a mortgage amortization schedule shows?",
    "Write a short, friendly reminder email about tomorrow's team lunch.",
    "What is the difference between a virus and a bacterium?",
    "Suggest three warm-up exercises before an evening run.",
    "Translate 'the library opens at nine' into Spanish and German.",
    "Summarize the plot of a mystery novel in two sentences, without spoilers.",
    "How should I store fresh strawberries so they last longer?",
    "Give me a SQL query that counts orders per customer in 2024.",
    "Why does the sky look red at sunset?",
    "Plan a three-day visit to a mountain town for a family with small children.",
    "What does 'idempotent' mean for an HTTP request?",
    "How many minutes should I boil an egg for a soft yolk?",
    "Explain compound interest with a small numeric example.",
    "Write a haiku about a rainy bus stop.",
    "List the main steps to replace a bicycle inner tube.",
)
_ANSWER_OPENINGS = (
    "Sure. Here is a clear way to think about it.",
    "Good question. The short answer comes first, then the details.",
    "Happy to help. Let me walk through it step by step.",
    "Of course. There are a few things worth knowing.",
)
_DETAILS = (
    "First, start with the simplest option and check whether it already solves the problem.",
    "A common mistake is to skip the preparation, which costs more time later.",
    "If you are unsure, try it once on a small scale and compare the results.",
    "The numbers depend on your situation, so treat these as a starting point.",
    "Keep notes of what you changed, so you can undo it if it does not work.",
    "Most people find the second step the hardest; take it slowly.",
)


def default_texts(count: int = 64) -> list[str]:
    """`count` chat turns (a question and the start of an answer), fixed by their index."""
    out = []
    for i in range(count):
        ask = _ASKS[i % len(_ASKS)]
        opening = _ANSWER_OPENINGS[(i // len(_ASKS)) % len(_ANSWER_OPENINGS)]
        details = " ".join(_DETAILS[(i + j) % len(_DETAILS)] for j in range(3))
        out.append(f"User: {ask}\nAssistant: {opening} {details}")
    return out


def read_texts(path: str) -> list[str]:
    """A request's calibration sample: a UTF-8 text file, samples separated by blank lines."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"quantize_calibration {path}: cannot read it as UTF-8 text ({exc}); "
                         "give a text file with one calibration sample per paragraph "
                         "(samples separated by blank lines)") from None
    texts = [t.strip() for t in raw.split("\n\n") if t.strip()]
    if len(texts) < 8:
        raise InputError(f"quantize_calibration {path}: {len(texts)} sample(s); give at least "
                         "8, separated by blank lines (GPTQ estimates each layer's Hessian from "
                         "them; a few hundred tokens each is typical)")
    return texts


def sample_digest(texts: list[str]) -> str:
    """What a variant's cache key names: the calibration sample's content."""
    return hashlib.sha256("\n\n".join(texts).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class CalibrationSample:
    texts: list[str]
    digest: str  # sample_digest: what a variant's cache key names
    source: str  # where it came from, for the person at the quantize gate

    @property
    def what(self) -> str:
        return f"{self.source}, {len(self.texts)} samples"


def calibration_sample(calibration: str | None, samples: int) -> CalibrationSample:
    """The request's sample (`calibration`: its text file) or the default one, at most
    `samples` of it."""
    texts = (read_texts(calibration) if calibration else default_texts(samples))[:samples]
    source = (calibration if calibration else
              "infopt's default chat sample (infopt.engines.calibration_texts)")
    return CalibrationSample(texts, sample_digest(texts), source)
