"""The fixed prompt set of the token-fidelity measure: plain text (no chat template, so any
server and model can be scored the same way), varied in kind so a regression that hits one kind
of text (code, digits, a non-Latin script, JSON) shows. Fixed: the reference is cached and
every candidate is scored on the same tokens."""

from __future__ import annotations

FIDELITY_PROMPTS: dict[str, str] = {
    "prose": "The lighthouse keeper climbed the narrow stairs every evening, and on the night "
             "of the storm he noticed",
    "explain": "Photosynthesis is the process by which plants turn sunlight into chemical "
               "energy. In simple terms, it works like this:",
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "arithmetic": "Question: A shop sells pencils at 3 for 45 cents. How much do 12 pencils "
                  "cost?\nAnswer: Step by step,",
    "json": "Here is the user record as JSON:\n{\"name\": \"Ada Lovelace\", \"born\": 1815, ",
    "french": "La Révolution française a commencé en 1789. Elle a profondément changé",
    "chinese": "长城是中国古代的军事防御工程，它",
    "list": "Five tips for writing clear documentation:\n1.",
}
