"""Reasoning fields on Chat Completions: a reasoning model's thinking must come back apart from
the answer, in the message's `reasoning_content` (or `reasoning`) field whole and in the
deltas streamed, with no think tags left in `content` (what a client that shows only the answer
relies on). A model without reasoning is "not applicable", with the evidence: no such field,
no think tag in the answer and, where the server publishes its chat template
(`Endpoint.chat_template`), no thinking marker in it. Thinking that arrives inline in `content`
is a failure: the engine's reasoning parser is off or wrong for this model.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from infopt.specs.contract import CheckStatus

from .context import Probe, ProbeContext, ProbeResult

ROUTE = "/v1/chat/completions"
# vLLM (--reasoning-parser) and llama-server (--reasoning-format) say `reasoning_content`;
# newer vLLM also `reasoning`. A non-empty string in either is separated thinking.
FIELDS = ("reasoning_content", "reasoning")
THINK_TAG = re.compile(r"</?think>|<\|channel\|>analysis|<\|begin_of_thought\|>")
# What a chat template that can think mentions (DeepSeek-R1, Qwen3, gpt-oss, SmolLM3...).
TEMPLATE_MARKERS = ("<think>", "enable_thinking", "reasoning_content", "<|channel|>",
                    "/no_think")
PROMPT = [{"role": "user", "content": "What is 17 times 23? Think it through, then answer."}]
TOKENS = 48


def reasoning_text(fields: dict[str, Any]) -> str:
    """The separated thinking in a message or a delta (its extra fields), '' when none."""
    return "".join(v for k in FIELDS if isinstance(v := fields.get(k), str))


def template_markers(template: str | None) -> list[str]:
    return [m for m in TEMPLATE_MARKERS if template and m in template]


def classify(separated: str, content: str, template: str | None) -> tuple[CheckStatus, str]:
    """The verdict on one whole answer (pure: tested on its own). `template` None: the server
    does not publish it, so the answer alone is the evidence."""
    inline = THINK_TAG.findall(content or "")
    marks = template_markers(template)
    if separated and not inline:
        return CheckStatus.PASS, f"{len(separated)} characters of separated reasoning"
    if separated:
        return CheckStatus.FAIL, (f"reasoning is separated, but think tags {inline[:2]} are "
                                  "left in content too")
    if inline:
        return CheckStatus.FAIL, (f"the thinking comes back inline in content ({inline[:2]}), "
                                  "not in reasoning_content: the engine's reasoning parser is "
                                  "off or not this model's")
    if marks:
        return CheckStatus.FAIL, (f"the chat template can think (mentions {marks[:3]}), but no "
                                  "reasoning field and no think tag came back")
    where = ("the chat template has no thinking marker" if template is not None else
             "the server does not publish its chat template")
    return CheckStatus.NOT_APPLICABLE, (f"no reasoning field and no think tag in the answer; "
                                        f"{where}: this model does not reason")


def _template(c: ProbeContext) -> str | None:
    if c.endpoint.chat_template is None:
        return None
    path, key = c.endpoint.chat_template
    r = httpx.get(f"{c.base}{path}", headers=c.headers, timeout=c.timeout_s)
    value = r.json().get(key) if r.status_code == 200 else None
    return value if isinstance(value, str) else None


def _streamed(c: ProbeContext) -> tuple[str, str]:
    thinking, content = [], []
    for chunk in c.chat(max_tokens=TOKENS, messages=PROMPT, stream=True):
        for ch in chunk.choices:
            thinking.append(reasoning_text(ch.delta.model_extra or {}))
            content.append(ch.delta.content or "")
    return "".join(thinking), "".join(content)


def _reasoning(c: ProbeContext) -> ProbeResult:
    r = c.chat(max_tokens=TOKENS, messages=PROMPT)
    msg = r.choices[0].message
    separated, content = reasoning_text(msg.model_extra or {}), msg.content or ""
    template = _template(c)
    status, detail = classify(separated, content, template)
    evidence: dict[str, Any] = {"message": msg.model_dump(), "template_markers":
                                template_markers(template),
                                "template_published": template is not None}
    if status is CheckStatus.PASS:  # the stream must separate it too
        s_think, s_content = _streamed(c)
        evidence["stream"] = {"reasoning": s_think[:2000], "content": s_content[:2000]}
        if not s_think or THINK_TAG.search(s_content):
            status, detail = CheckStatus.FAIL, (
                "whole answers separate the reasoning, but the stream does not ("
                f"{len(s_think)} reasoning characters in deltas)")
    return status, detail, evidence


PROBES: dict[str, tuple[str, bool, Probe]] = {"reasoning": (ROUTE, False, _reasoning)}
