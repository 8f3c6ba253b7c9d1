"""Root-error extraction from engine logs: the first cause, not the last line.

Engine logs interleave several processes (vLLM's "(EngineCore_0 pid=12)" / "(VllmWorkerProcess
pid=7)", torchrun's "[rank0]:"), wrap the real error in generic ones ("Engine core initialization
failed", llama.cpp's "exiting due to model loading error"), and chain Python tracebacks ("The
above exception was the direct cause of ..."). We normalize each line, collect error candidates
in log order, drop the generic wrappers, and take the earliest remaining one; a known-failure
pattern anywhere in the log outranks a generic candidate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Prefixes added by process managers and loggers; removed before matching.
_PREFIXES = [
    # "(EngineCore_0 pid=12)", "(APIServer pid=3)", "(VllmWorker-0 pid=7)"
    re.compile(r"^\s*\([A-Za-z_][\w-]*\s+pid=\d+\)\s*"),
    re.compile(r"^\s*\[rank\d+\]:\s*"),
    # vLLM / Python logging: "INFO 06-12 08:12:23 [file.py:45] " or "ERROR 06-12 08:12:23 file.py:45] "
    re.compile(r"^\s*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[?[\w./-]+:\d+\]\s*"),
    # SGLang: "[2025-01-01 12:00:00 TP0] " ; generic ISO timestamps
    re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T][\d:.,]+(?:\s+[A-Z]+\d*)?\]\s*"),
    re.compile(r"^\s*\d{4}-\d\d-\d\d[ T][\d:.,]+\s+(?:-\s+)?(?:[A-Z]+\s+(?:-\s+)?)?"),
    # llama.cpp common_log: "0.00.123.456 E " (level letter after the timestamp)
    re.compile(r"^\s*\d+\.\d\d\.\d{3}\.\d{3}\s+[DIWE]\s+"),
]
_BELOW_ERROR = re.compile(
    r"^\s*(?:\([^)]*pid=\d+\)\s*)?(?:DEBUG|INFO|WARNING)\b|^\s*\d+\.\d\d\.\d{3}\.\d{3}\s+[DIW]\s")
_LLAMA_LEVEL = re.compile(r"^\s*\d+\.\d\d\.\d{3}\.\d{3}\s+E\s+")
_PY_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt|Failure)"
    r"(?::\s*(?P<msg>.*))?$")
_ERROR_WORDS = re.compile(
    r"(?i)\b(?:error|failed to|cannot|can't|could not|couldn't|not supported|unsupported|"
    r"out of memory|segmentation fault|illegal instruction|core dumped|abort(?:ed)?|killed|"
    r"invalid|unrecognized arguments|no such file|permission denied|is larger than|"
    r"requires)\b")
_SIGNALS = re.compile(r"(?i)(segmentation fault|illegal instruction|bus error|core dumped|"
                      r"signal 11|SIGSEGV|SIGILL|SIGABRT)")
# Generic wrappers: true but never the cause.
_WRAPPERS = re.compile(
    r"(?i)(engine core initialization failed|exiting due to model loading error|"
    r"worker failed with error|engine process failed to start|process .* died|"
    r"see root cause above|failed core proc|one or more workers failed|"
    r"initialization failed\. see|uncaught exception|^error: ?$|"
    r"the above exception was the direct cause|during handling of the above exception|"
    r"subprocess\.CalledProcessError|raise .*|^\s*File \")")
_NOISE = re.compile(r"(?i)(warn(?:ing)?:.*deprecat|futurewarning|userwarning|"
                    r"no api key is set|telemetry)|^\s*(?:usage:|\[-{1,2}\w)")


def normalize(line: str) -> str:
    text = _ANSI.sub("", line.rstrip("\n"))
    for p in _PREFIXES:
        text = p.sub("", text, count=1)
    return text.strip()


@dataclass(frozen=True)
class Candidate:
    index: int  # line number in the log
    text: str  # normalized line
    kind: str  # "exception", "error-level", "signal", "keyword"
    wrapper: bool


def candidates(lines: list[str]) -> list[Candidate]:
    """Error candidates in log order, each classified."""
    out: list[Candidate] = []
    for i, raw in enumerate(lines):
        text = normalize(raw)
        if not text or _NOISE.search(text) or _BELOW_ERROR.match(raw):
            continue  # a line the engine itself logged below error level is never the cause
        if _PY_EXCEPTION.match(text):
            kind = "exception"
        elif _SIGNALS.search(text):
            kind = "signal"
        elif raw.lstrip().startswith(("ERROR", "CRITICAL")) or _LLAMA_LEVEL.match(raw) or \
                re.match(r"(?i)^(?:\S+:\s+)?error\b", text):
            kind = "error-level"
        elif _ERROR_WORDS.search(text) and not text.startswith(("INFO", "DEBUG")):
            kind = "keyword"
        else:
            continue
        out.append(Candidate(i, text, kind, bool(_WRAPPERS.search(text))))
    return out


_HEADER_ONLY = re.compile(r"\d+ validation errors? for \w+$|:\s*$")
_RANK = {"exception": 0, "signal": 0, "error-level": 1, "keyword": 2}


def root_error(text: str, known_patterns: list[re.Pattern[str]] | None = None
               ) -> tuple[str, int | None, list[str]]:
    """(root error line, its line index, up to 6 context lines). Empty log -> ("", None, [])."""
    lines = text.splitlines()
    # 1. A known failure's distinctive text: the earliest line any catalog pattern matches,
    #    skipping lines the engine itself logged below error level (vLLM warns "max_model_len
    #    is greater than the derived" even when an env var allows it).
    for i, raw in enumerate(lines):
        norm = normalize(raw)
        if _BELOW_ERROR.match(raw):
            continue
        if known_patterns and any(p.search(norm) for p in known_patterns):
            return norm, i, _context(lines, i)
    cands = [c for c in candidates(lines) if not c.wrapper]
    if not cands:
        cands = candidates(lines)  # only wrappers: better than nothing
    if not cands:
        tail = [normalize(ln) for ln in lines if normalize(ln)]
        return (tail[-1] if tail else ""), (len(lines) - 1 if lines else None), tail[-6:]
    # 2. Strong evidence (exceptions, signals) before weak (keywords), earliest first within
    #    the strongest class present — the first cause in a chain comes first in the log.
    best_rank = min(_RANK[c.kind] for c in cands)
    first = next(c for c in cands if _RANK[c.kind] == best_rank)
    text = first.text
    if _HEADER_ONLY.search(text):
        # pydantic puts the actual message on the next line(s): "N validation error for X" is
        # only a header.
        detail = next((normalize(ln) for ln in lines[first.index + 1:first.index + 4]
                       if normalize(ln)), "")
        text = f"{text}: {detail}" if detail else text
    return text, first.index, _context(lines, first.index)


def _context(lines: list[str], i: int, before: int = 3, after: int = 2) -> list[str]:
    return [normalize(ln) for ln in lines[max(0, i - before): i + after + 1] if normalize(ln)]
