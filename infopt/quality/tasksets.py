"""Generative task sets with exact scoring: what a user with a real model relies on beside token
fidelity. Each item is a chat prompt and a pure checker of the greedy answer; nothing the model
writes is executed (the code set is checked by parsing it with `ast`).

Sets: arithmetic (seeded sums and products), short facts (capitals), JSON-schema adherence
without constrained decoding (the leading indicator of a quantization regression), a needle
in a long context (within the native window), a non-English set (word translation), and a
small code set. Items are fixed by a seed, so every configuration answers the same ones."""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

# The checkers below bind their loop values as lambda defaults, so they take more parameters
# than Checker names; mypy cannot infer such a lambda against Checker, hence the casts.
Checker = Callable[[str], bool]


@dataclass(frozen=True)
class TaskItem:
    set_name: str
    prompt: str
    check: Checker
    max_tokens: int = 48


def _numbers(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"-?\d+", text.replace(",", ""))]


def _final_number(text: str) -> int | None:
    """The last number on the answer's first line: "26 * 28 = 728" answers 728."""
    lines = text.strip().splitlines()
    nums = _numbers(lines[0]) if lines else []
    return nums[-1] if nums else None


def arithmetic(n: int, seed: int) -> list[TaskItem]:
    rng, out = random.Random(seed), []
    for _ in range(n):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        op, val = (("+", a + b), ("*", a * b))[rng.random() < 0.4]
        out.append(TaskItem("arithmetic", f"What is {a} {op} {b}? Answer with the number "
                            "only.", cast(Checker, lambda t, v=val: _final_number(t) == v), 16))
    return out


_CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"),
             ("Germany", "Berlin"), ("Egypt", "Cairo"), ("Canada", "Ottawa"),
             ("Russia", "Moscow"), ("Greece", "Athens"), ("Portugal", "Lisbon")]


def facts(n: int, seed: int) -> list[TaskItem]:
    return [TaskItem("facts", f"What is the capital of {country}? Answer with one word.",
                     cast(Checker, lambda t, c=city: c.lower() in t.lower()), 16)
            for country, city in _CAPITALS[:n]]


_PEOPLE = ["Ada", "Alan", "Grace", "Linus", "Barbara", "Donald", "Edsger", "Margaret"]
PERSON_SCHEMA = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
                 "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def _json_valid(text: str) -> bool:
    import jsonschema

    m = re.search(r"\{.*\}", text, re.S)  # a fenced or prefixed object still counts
    try:
        jsonschema.validate(json.loads(m.group(0)) if m else None, PERSON_SCHEMA)
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False
    return True


def json_adherence(n: int, seed: int) -> list[TaskItem]:
    rng = random.Random(seed)
    return [TaskItem("json_schema", f"Return only a JSON object with exactly the keys "
                     f"\"name\" (a string) and \"age\" (an integer) for a person named "
                     f"{name} who is {rng.randint(20, 80)} years old.", _json_valid, 48)
            for name in (_PEOPLE * 4)[:n]]


_FILLER = ("The river bends past the old mill, where the miller keeps his ledgers and counts "
           "the sacks of grain that arrive each morning from the farms up the valley. ")


def needle(n: int, seed: int, context_tokens: int = 1024) -> list[TaskItem]:
    """A code hidden at a seeded depth in at most ~context_tokens of filler, asked for at the
    end (a filler sentence is 28 words, under 32 tokens in the BPE vocabularies seen here)."""
    rng, out = random.Random(seed), []
    reps = max(2, context_tokens // 32)
    for _ in range(n):
        code, at = rng.randint(1000, 9999), rng.randint(0, reps - 1)
        text = "".join(_FILLER if i != at else f"Remember this: the secret code is {code}. "
                       for i in range(reps))
        out.append(TaskItem("needle", text + "\nWhat is the secret code? Answer with the "
                            "number only.", cast(Checker, lambda t, c=code: c in _numbers(t)), 16))
    return out


_WORDS = [("cat", "chat"), ("dog", "chien"), ("house", "maison"), ("water", "eau"),
          ("book", "livre"), ("sun", "soleil"), ("bread", "pain"), ("friend", "ami"),
          ("tree", "arbre"), ("car", "voiture")]


def french(n: int, seed: int) -> list[TaskItem]:
    return [TaskItem("non_english", f"Translate the English word \"{en}\" into French. Answer "
                     "with the French word only.",
                     cast(Checker, lambda t, w=fr: w in t.lower()), 12)
            for en, fr in _WORDS[:n]]


_FUNCS = [("add", "returns the sum of a and b", ast.Add), ("sub", "returns a minus b", ast.Sub),
          ("mul", "returns the product of a and b", ast.Mult)]


def _defines(text: str, name: str, op: type) -> bool:
    """A function `name(a, b)` whose return applies `op`, found by parsing only."""
    block = re.search(r"```(?:python)?\n(.*?)(?:```|$)", text, re.S)
    try:
        tree = ast.parse(block.group(1) if block else text)
    except SyntaxError:
        return False
    return any(isinstance(f, ast.FunctionDef) and f.name == name and len(f.args.args) == 2
               and any(isinstance(r, ast.Return) and isinstance(r.value, ast.BinOp)
                       and isinstance(r.value.op, op) for r in ast.walk(f))
               for f in ast.walk(tree))


def code(n: int, seed: int) -> list[TaskItem]:
    return [TaskItem("code", f"Write a Python function {name}(a, b) that {what}. Reply with "
                     "the code only.",
                     cast(Checker, lambda t, nm=name, o=op: _defines(t, nm, o)), 64)
            for name, what, op in (_FUNCS * 4)[:n]]


SETS: dict[str, Callable[[int, int], list[TaskItem]]] = {
    "arithmetic": arithmetic, "facts": facts, "json_schema": json_adherence, "needle": needle,
    "non_english": french, "code": code}


def all_items(per_set: int = 8, seed: int = 0) -> list[TaskItem]:
    return [item for make in SETS.values() for item in make(per_set, seed)]
