"""The generative task sets' checkers, on answers with known verdicts (pure), and the rule that
a set fails only on a drop beyond its sampling noise."""

from __future__ import annotations

import ast

from infopt.quality.taskrun import _interval, mcnemar_worse_p, taskset_verdicts
from infopt.quality.tasksets import SETS, all_items, arithmetic, code, json_adherence, needle
from infopt.specs.quality import TaskSetResult


def test_items_are_fixed_by_the_seed_and_every_set_is_there():
    a, b = all_items(4, seed=1), all_items(4, seed=1)
    assert [i.prompt for i in a] == [i.prompt for i in b]
    assert {i.set_name for i in a} == {"arithmetic", "facts", "json_schema", "needle",
                                       "non_english", "code"}
    assert len(SETS) == 6
    assert [i.prompt for i in arithmetic(4, 1)] != [i.prompt for i in arithmetic(4, 2)]


def test_arithmetic_takes_the_first_number_of_the_answer():
    item = arithmetic(1, 0)[0]
    a, op, b = item.prompt.split()[2:5]
    want = int(a) + int(b.rstrip("?")) if op == "+" else int(a) * int(b.rstrip("?"))
    assert item.check(f"{want}") and item.check(f"The answer is {want}.")
    assert item.check(f"{a} {op} {b.rstrip('?')} = {want}\nBecause...")  # restated question
    assert not item.check(f"{want}, no, {want + 1}") and not item.check("I do not know")


def test_json_adherence_needs_the_schema_not_just_json():
    check = json_adherence(1, 0)[0].check
    assert check('{"name": "Ada", "age": 36}')
    assert check('```json\n{"name": "Ada", "age": 36}\n```')
    assert not check('{"name": "Ada", "age": "36"}')  # a string where an integer belongs
    assert not check('{"name": "Ada"}') and not check("Ada is 36")


def test_code_is_judged_by_parsing_never_by_running(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("model output must never be executed")

    monkeypatch.setattr("builtins.exec", refuse)
    monkeypatch.setattr("builtins.eval", refuse)
    add = code(1, 0)[0]
    assert add.check("```python\ndef add(a, b):\n    return a + b\n```")
    assert not add.check("def add(a, b):\n    return a - b")
    assert not add.check("def add(a):\n    return a + 1")
    assert not add.check("add = lambda a, b: a + b")
    assert not add.check("def add(a, b):\n  return a +")  # does not parse
    ast.parse("x = 1")  # ast itself is untouched


def test_the_needle_is_inside_the_context_and_found_only_when_answered():
    item = needle(1, 3, context_tokens=512)[0]
    code_ = int(item.prompt.split("the secret code is ")[1].split(".")[0])
    assert 1000 <= code_ <= 9999 and item.check(str(code_)) and not item.check("1234x")
    assert len(item.prompt.split()) < 512  # words < tokens: within the context budget


def _res(name, outcomes):
    k = sum(outcomes)
    return TaskSetResult(set_name=name, passed=k, total=len(outcomes),
                         interval=_interval(k, len(outcomes)), outcomes=outcomes, answers=[])


def test_a_set_fails_only_on_a_paired_drop_beyond_noise():
    all_ok, six = [True] * 8, [True] * 6 + [False] * 2
    ref = [_res("facts", all_ok), _res("code", six)]
    noisy = taskset_verdicts(ref, [_res("facts", six), _res("code", six[::-1])], 0.02)
    assert all(v.passed for v in noisy), [v.why for v in noisy]  # 2 of 8 lost: p = 0.25
    assert "p = 0.250" in noisy[0].why
    broken = taskset_verdicts(ref, [_res("facts", [False] * 8), _res("code", six)], 0.02)
    assert [v.measure for v in broken if not v.passed] == ["task:facts"]
    assert mcnemar_worse_p(all_ok, [False] * 8) < 0.005
