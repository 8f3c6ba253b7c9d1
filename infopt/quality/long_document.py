"""The long-context check's text, pure: a deterministic record of many distinct entries (names,
places, years, amounts), long enough for any served context, ending in a new entry that
recalls one of its earliest. Why: a continuation that recalls facts from thousands of tokens
back leans on exactly the attention over old KV entries that a lower KV precision or coarser
weights disturb, and distinct entries keep the text from being a repetition the model can
continue without looking far (which would hide a degraded cache). Why a new entry and not a
question: a question is answered in a word or two and an end-of-text token, which leaves
almost no positions to score; a record goes on.

Fixed by the seed: the reference is kept per machine and every candidate scores the same
tokens."""

from __future__ import annotations

import random
from dataclasses import dataclass

_NAMES = ("Amara Osei", "Bruno Keller", "Chen Wei", "Dalia Haddad", "Emil Novak",
          "Farah Qureshi", "Gustav Lind", "Hana Sato", "Ivo Petrov", "Jonas Berg",
          "Kofi Mensah", "Lucia Romano", "Mateo Silva", "Nadia Rahman", "Olga Ivanova",
          "Pavel Dvorak", "Quinn Murphy", "Rosa Jimenez", "Sven Olsen", "Tomas Horak",
          "Uma Patel", "Vera Kovacs", "Wen Li", "Yara Nasser", "Zofia Nowak")
_CITIES = ("Lisbon", "Tallinn", "Accra", "Osaka", "Porto Alegre", "Krakow", "Nairobi",
           "Valparaiso", "Tromso", "Marrakesh", "Hanoi", "Ljubljana", "Cork", "Adelaide",
           "Quebec", "Tbilisi", "Bergen", "Cusco", "Gdansk", "Da Nang")
_TRADES = ("clockmaker", "ferry pilot", "botanist", "bookbinder", "glassblower",
           "cartographer", "beekeeper", "violin maker", "surveyor", "archivist")
_ITEMS = ("brass compass", "oak chest", "silver kettle", "linen map", "copper lamp",
          "leather atlas", "glass prism", "walnut desk", "wool blanket", "iron key")
_COLOURS = ("green", "amber", "grey", "crimson", "ochre", "blue", "white", "violet")

_TEMPLATES = (
    "Entry {n}. {name}, {trade} from {city}, arrived in the spring of {year} with {colour} "
    "{item} and a letter of introduction.",
    "The ledger notes that {name} paid {amount} crowns for lodging near the harbour and stayed "
    "for {days} days before travelling on.",
    "Witnesses recall that {name} spoke often of {city}, where the winters were long and the "
    "market opened before dawn.",
    "In {year}, {name} sold the {item} to a merchant for {amount} crowns and kept the receipt "
    "in {colour} folder.",
    "A later note, written in {ink} ink, says {name} was last seen boarding a ship bound for "
    "{city} after {days} days of rain.",
    "The committee recorded {amount} visitors that season; among them, {name} signed the book "
    "twice, once in {year} and once a decade later.",
)


@dataclass(frozen=True)
class Entry:
    """One record: the facts a question may ask about."""

    n: int
    name: str
    city: str
    year: int
    item: str
    text: str


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _entry(n: int, rng: random.Random) -> Entry:
    name, city, year = rng.choice(_NAMES), rng.choice(_CITIES), rng.randrange(1820, 1960)
    item = rng.choice(_ITEMS)
    facts = dict(n=n, name=name, city=city, trade=_a(rng.choice(_TRADES)), item=item,
                 colour=_a(rng.choice(_COLOURS)), year=year, amount=rng.randrange(3, 900),
                 days=rng.randrange(2, 60), ink=rng.choice(_COLOURS))
    # The first sentence states the entry's facts; two more, in an order of their own, vary it.
    more = rng.sample(_TEMPLATES[1:], 2)
    text = " ".join(t.format(**facts) for t in (_TEMPLATES[0], *more))
    return Entry(n=n, name=name, city=city, year=year, item=item, text=text)


def entries(count: int, seed: int = 0) -> list[Entry]:
    """The document's first `count` entries (a longer document only appends)."""
    if count < 1:
        raise ValueError("a document needs at least one entry")
    rng = random.Random(f"infopt-long-context-{seed}")
    return [_entry(n, rng) for n in range(1, count + 1)]


def question(entry: Entry, next_n: int) -> str:
    """The start of a new entry about `entry`'s person, far back in the prompt: the model
    continues the record in its own style (no answer that ends in an end-of-text token after
    a word or two), and what it writes leans on what entry `entry.n` said."""
    return (f"Entry {next_n}. {entry.name}, last mentioned in entry {entry.n}, returned to the "
            "harbour after many years. The ledger recalls where they had come from,")


def window_text(all_entries: list[Entry], count: int, asks: Entry) -> str:
    """The document's first `count` entries, then a new entry recalling `asks`."""
    body = "\n\n".join(e.text for e in all_entries[:count])
    return f"The harbour record, entry by entry.\n\n{body}\n\n{question(asks, count + 1)}"
