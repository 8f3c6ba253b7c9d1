"""The prompt pool of the token-fidelity measure: plain text (no chat template, so any server and
model can be scored the same way), varied in kind so a regression that hits one kind of text
(code, digits, a non-Latin script, JSON) shows. Fixed and ordered: the reference is cached, every
candidate is scored on the same tokens, and the sequential gate (infopt.quality.sequential) adds
prompts in this order, each look a prefix of the pool that still covers every kind.

`FIDELITY_PROMPTS` is the first look (8 prompts, one of each kind); `PROMPT_POOL` holds 48, so
a request may raise the gate's budget (`quality_max_prompts`) up to that."""

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

# Five more rounds of the same eight kinds, in the same order, so every look of 8, 16, 32 or
# 48 prompts weighs the kinds alike.
_MORE: list[tuple[str, str]] = [
    ("prose-2", "When the last train left the station, the old porter sat down on the bench "
                "and"),
    ("explain-2", "A vaccine trains the immune system to recognise a germ without causing the "
                  "disease. It does this by"),
    ("code-2", "import json\n\ndef load_config(path):\n    \"\"\"Read a JSON config file and "
               "return it as a dict.\"\"\"\n"),
    ("arithmetic-2", "Question: A train travels 180 km in 2 hours. What is its average speed?"
                     "\nAnswer: Step by step,"),
    ("json-2", "The API returned:\n{\"status\": \"ok\", \"items\": [{\"id\": 1, \"price\": "),
    ("french-2", "Le petit village se trouvait au pied de la montagne, et chaque matin les "
                 "habitants"),
    ("chinese-2", "春天来了，公园里的花都开了，孩子们"),
    ("list-2", "Three reasons to back up your files:\n1."),
    ("prose-3", "The scientist looked at the results again, unable to believe that the "
                "experiment had"),
    ("explain-3", "Inflation means that prices rise over time. The main causes are"),
    ("code-3", "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def "
               "__init__(self):\n"),
    ("arithmetic-3", "Question: If 5 workers build a wall in 8 days, how long do 10 workers "
                     "take?\nAnswer: Step by step,"),
    ("json-3", "Configuration:\n{\"server\": {\"host\": \"127.0.0.1\", \"port\": 8080}, "),
    ("french-3", "Pour préparer une bonne soupe à l'oignon, il faut d'abord"),
    ("chinese-3", "学习一门新的语言需要时间和耐心，最重要的是"),
    ("list-3", "Four things to check before a long drive:\n1."),
    ("prose-4", "Nobody in the small town knew where the stranger had come from, but everyone "
                "agreed that"),
    ("explain-4", "A database index works like the index of a book: instead of reading every "
                  "page,"),
    ("code-4", "def is_prime(n: int) -> bool:\n    \"\"\"Return True if n is a prime "
               "number.\"\"\"\n"),
    ("arithmetic-4", "Question: A recipe needs 250 g of flour for 4 people. How much flour "
                     "for 6 people?\nAnswer: Step by step,"),
    ("json-4", "The weather service answered:\n{\"city\": \"Oslo\", \"temperature_c\": -3, "),
    ("french-4", "Les océans couvrent plus de soixante-dix pour cent de la surface de la "
                 "Terre et"),
    ("chinese-4", "中国的四大发明是造纸术、印刷术、火药和指南针，它们"),
    ("list-4", "Six habits of effective teams:\n1."),
    ("prose-5", "The garden had been abandoned for years, yet in the middle of the weeds a "
                "single rose"),
    ("explain-5", "The heart pumps blood through two circuits. In the first one,"),
    ("code-5", "#include <stdio.h>\n\nint main(void) {\n    /* print the numbers 1 to 10 */\n"),
    ("arithmetic-5", "Question: What is 15% of 240?\nAnswer: Step by step,"),
    ("json-5", "An order in the shop's system:\n{\"order_id\": \"A-1042\", \"quantity\": 3, "),
    ("french-5", "Victor Hugo est l'un des écrivains français les plus connus. Il a écrit"),
    ("chinese-5", "黄河是中国第二长的河流，被称为"),
    ("list-5", "Seven steps to make a cup of tea:\n1."),
    ("prose-6", "She opened the letter slowly, because she already knew what it would say:"),
    ("explain-6", "Compound interest is interest earned on interest. For example, if you "
                  "save"),
    ("code-6", "SELECT name, COUNT(*) AS orders\nFROM customers\nJOIN orders ON"),
    ("arithmetic-6", "Question: A rectangle is 7 m long and 4 m wide. What is its area and "
                     "perimeter?\nAnswer: Step by step,"),
    ("json-6", "The sensor reading was logged as:\n{\"sensor\": \"t-07\", \"values\": [21.5, "),
    ("french-6", "La Tour Eiffel a été construite pour l'Exposition universelle de 1889, et"),
    ("chinese-6", "熊猫是中国的国宝，主要生活在"),
    ("list-6", "Things every new programmer should learn:\n1."),
]

PROMPT_POOL: dict[str, str] = {**FIDELITY_PROMPTS, **dict(_MORE)}


def pool_prefix(n: int) -> dict[str, str]:
    """The first `n` prompts of the pool (the prompts a gate with budget `n` may use)."""
    if not 1 <= n <= len(PROMPT_POOL):
        raise ValueError(f"the prompt pool holds {len(PROMPT_POOL)} prompts; asked for {n}")
    return dict(list(PROMPT_POOL.items())[:n])
