"""Exact-length prompts: converge on the target count with any tokenizer that is monotone in
the number of words."""

from infopt.loadgen.tokens import exact_prompt, prompt_words


def test_converges_with_a_tokenizer_that_splits_some_words():
    # A toy tokenizer: one token per word, two for words longer than 6 letters, +1 BOS.
    def count(text: str) -> int:
        return 1 + sum(2 if len(w) > 6 else 1 for w in text.split())

    for target in (24, 100, 257):
        text, got = exact_prompt("rid-1", target, count, seed=0)
        assert got == target == count(text)


def test_prompts_are_unique_per_request_and_stable():
    a, b = prompt_words("a", 50, 0), prompt_words("b", 50, 0)
    assert a != b and a.split()[0] != b.split()[0]  # unique first word: no prefix cache hit
    assert prompt_words("a", 60, 0).startswith(a)  # growing only appends words


def test_unreachable_target_keeps_the_closest():
    text, got = exact_prompt("r", 0, lambda t: len(t.split()), seed=0)  # the head is 1 word
    assert got == 1 == min(len(prompt_words("r", n, 0).split()) for n in range(0, 5))
