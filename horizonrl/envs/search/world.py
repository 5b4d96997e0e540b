"""A generator of synthetic multi-hop search worlds, so the search family runs offline.

A world is a set of fictional entities (people, cities, organizations, countries), each
with attributes and relations to other entities, written out as one encyclopedia-style
passage per entity, plus questions whose answer needs 1, 2, 3 or 4 searches:

    1-hop  "In what year was Aldric Venn born?"
    2-hop  "Which river flows through the city where Aldric Venn was born?"
    4-hop  "What is the currency of the country where the city where the founder of
            Harrow Press was born is located?"

A k-hop question starts from one named entity and follows k-1 relations; every entity
on the chain must be looked up (its passage is the only place that names the next one)
and the last passage holds the answer. Distractors make search matter: names share
stems ("Port Kelwyn", "Kelwyn Falls"; "Harrow Press", "Harrow Foundry"; people share
first names and surnames), attributes repeat across entities, and every person's name
also appears in the passages of the people they trained and the places they run.

Generation is deterministic in `seed` (one `random.Random`, lists only, no set or dict
order that depends on hashing). `write_world(world, dir)` writes the files the env
reads: `corpus.jsonl` (`{"id","title","text"}`), `test.jsonl` and `train.jsonl`
(`{"id","question","answers","category","hops","chain","kinds","path","attribute"}`),
and `world.json` (parameters and counts).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORLD_FORMAT = 2
HOP_CATEGORIES = ("1-hop", "2-hop", "3-hop", "4-hop")
KINDS = ("person", "city", "organization", "country")

# kind -> relation -> (target kind, noun phrase for questions, passage sentences)
RELATIONS: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "person": {
        "birthplace": (
            "city",
            "the city where {x} was born",
            ("{name} was born in the city of {value}.", "{name}'s birthplace is the city of {value}."),
        ),
        "employer": (
            "organization",
            "the organization that {x} works for",
            ("{name} works for {value}.", "{name} is employed by {value}."),
        ),
        "mentor": (
            "person",
            "the mentor of {x}",
            ("{name} trained under {value}.", "The mentor of {name} was {value}."),
        ),
    },
    "city": {
        "country": (
            "country",
            "the country where {x} is located",
            ("{name} is a city in {value}.", "{name} is located in {value}."),
        ),
        "mayor": (
            "person",
            "the mayor of {x}",
            ("The mayor of {name} is {value}.", "{name} is governed by mayor {value}."),
        ),
    },
    "organization": {
        "founder": (
            "person",
            "the founder of {x}",
            ("{name} was founded by {value}.", "The founder of {name} is {value}."),
        ),
        "headquarters": (
            "city",
            "the city where {x} is headquartered",
            ("{name} has its headquarters in {value}.", "{name} is based in {value}."),
        ),
    },
    "country": {
        "capital": (
            "city",
            "the capital of {x}",
            ("The capital of {name} is {value}.", "{value} serves as the capital of {name}."),
        ),
        "leader": (
            "person",
            "the head of state of {x}",
            ("The head of state of {name} is {value}.", "{name} is led by {value}."),
        ),
    },
}

# kind -> attribute -> (question, passage sentences)
ATTRIBUTES: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "person": {
        "birth_year": (
            "In what year was {x} born?",
            ("{name} was born in the year {value}.", "The birth year of {name} is {value}."),
        ),
        "occupation": (
            "What is the occupation of {x}?",
            ("{name} is a {value} by profession.", "{name} works as a {value}."),
        ),
    },
    "city": {
        "founded": (
            "In what year was {x} founded?",
            ("{name} was founded in {value}.", "The city of {name} dates from {value}."),
        ),
        "river": (
            "Which river flows through {x}?",
            ("The {value} river flows through {name}.", "{name} lies on the banks of the {value} river."),
        ),
    },
    "organization": {
        "established": (
            "In what year was {x} established?",
            ("{name} was established in {value}.", "{name} has existed since {value}."),
        ),
        "industry": (
            "In which industry does {x} operate?",
            ("{name} works in the {value} industry.", "The main business of {name} is {value}."),
        ),
    },
    "country": {
        "currency": (
            "What is the currency of {x}?",
            ("The currency of {name} is the {value}.", "{name} uses the {value} as its currency."),
        ),
        "language": (
            "What language is spoken in {x}?",
            ("The official language of {name} is {value}.", "Most people in {name} speak {value}."),
        ),
    },
}

OCCUPATIONS = (
    "cartographer", "painter", "botanist", "sculptor", "novelist", "composer", "chemist", "diplomat",
    "physician", "jeweller", "weaver", "shipwright", "blacksmith", "linguist", "mathematician", "poet",
    "brewer", "potter", "lawyer", "surveyor", "banker", "merchant", "tailor", "baker", "glassblower",
    "printer", "violinist", "geologist", "historian", "navigator",
)  # fmt: skip
INDUSTRIES = (
    "shipbuilding", "textiles", "printing", "mining", "glassmaking", "brewing", "banking", "clockmaking",
    "perfumery", "pottery", "salt trading", "silk weaving", "tanning", "timber", "ironworking",
    "insurance", "rail transport", "shipping", "publishing", "optics",
)  # fmt: skip
CITY_PATTERNS = (
    "Port {}",
    "{} Falls",
    "New {}",
    "{} Heights",
    "Upper {}",
    "{} Crossing",
    "Fort {}",
    "{} Bay",
)
ORG_SUFFIXES = (
    "Press", "Foundry", "Trading House", "Guild", "Works", "Bank", "Observatory", "Mills", "Brewery",
    "Shipping Company",
)  # fmt: skip
CURRENCY_UNITS = ("crown", "florin", "mark", "thaler", "ducat", "shilling", "guilder", "talent")
_ONSETS = (
    "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
    "br", "dr", "gr", "kr", "st", "th", "tr", "vr",
)  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "ia")
_CODAS = ["", "", "n", "r", "l", "s", "th", "nd", "rn", "x", "m"]


@dataclass
class Entity:
    key: str
    """Stable id inside the world, e.g. `person/17`."""
    kind: str
    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    rels: dict[str, str] = field(default_factory=dict)
    """relation -> key of the related entity."""


@dataclass
class World:
    seed: int
    entities: list[Entity]
    passages: list[dict[str, str]]
    """Corpus records `{"id","title","text"}`, one per entity, in entity order."""
    test: list[dict[str, Any]]
    train: list[dict[str, Any]]


class _Names:
    """Unique pronounceable fictional words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: dict[str, None] = {}

    def word(self, syllables: int) -> str:
        for _ in range(1000):
            parts = []
            for i in range(syllables):
                coda = self.rng.choice(_CODAS) if i == syllables - 1 else ""
                parts.append(self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + coda)
            word = "".join(parts).capitalize()
            if len(word) >= 4 and word not in self.used:
                self.used[word] = None
                return word
        raise RuntimeError("ran out of fictional names; lower the number of entities")


def answers_for(kind: str, attribute: str, value: str) -> list[str]:
    """Gold answers for an attribute value (rivers are also right with 'River' appended)."""
    if kind == "city" and attribute == "river":
        return [value, f"{value} River"]
    return [value]


def _make_entities(rng: random.Random, n: int) -> list[Entity]:
    names = _Names(rng)
    n_countries = max(3, n // 30)
    n_cities = max(n_countries, n // 5)
    n_orgs = max(2, n // 5)
    n_people = max(4, n - n_countries - n_cities - n_orgs)

    countries = [Entity(f"country/{i}", "country", names.word(2) + rng.choice(["ia", "land", "or"]).lower())
                 for i in range(n_countries)]  # fmt: skip
    cities: list[Entity] = []
    while len(cities) < n_cities:  # 1-3 cities share a stem: the distractors
        stem = names.word(rng.choice([2, 2, 3]))
        for pattern in rng.sample(CITY_PATTERNS, rng.choice([1, 2, 2, 3])):
            if len(cities) < n_cities:
                cities.append(Entity(f"city/{len(cities)}", "city", pattern.format(stem)))
    surnames = [names.word(rng.choice([2, 3])) for _ in range(max(2, n_people // 3))]
    orgs: list[Entity] = []
    while len(orgs) < n_orgs:  # org stems are new words or surnames, shared by 1-3 orgs
        stem = rng.choice(surnames) if rng.random() < 0.3 else names.word(2)
        for suffix in rng.sample(ORG_SUFFIXES, rng.choice([1, 2, 3])):
            name = f"{stem} {suffix}"
            if len(orgs) < n_orgs and name not in names.used:
                names.used[name] = None
                orgs.append(Entity(f"organization/{len(orgs)}", "organization", name))
    firsts = [names.word(2) for _ in range(max(2, n_people // 6))]
    people: list[Entity] = []
    while len(people) < n_people:
        name = f"{rng.choice(firsts)} {rng.choice(surnames)}"
        if name not in names.used:
            names.used[name] = None
            people.append(Entity(f"person/{len(people)}", "person", name))

    rivers = [names.word(2) for _ in range(max(2, n_cities // 3))]
    languages = [names.word(2) + "ic" for _ in range(max(2, n_countries * 2 // 3))]
    for p in people:
        p.attrs = {"birth_year": str(rng.randint(1700, 1990)), "occupation": rng.choice(OCCUPATIONS)}
    for p in people:
        p.rels["birthplace"] = rng.choice(cities).key
        p.rels["employer"] = rng.choice(orgs).key
        year = int(p.attrs["birth_year"])
        elders = [
            q for q in rng.sample(people, min(8, len(people))) if int(q.attrs["birth_year"]) <= year - 15
        ]
        if elders:  # mentors are older, so mentor chains never loop
            p.rels["mentor"] = elders[0].key
    for i, c in enumerate(cities):
        c.attrs = {"founded": str(rng.randint(900, 1900)), "river": rng.choice(rivers)}
        c.rels = {"country": countries[i % n_countries].key, "mayor": rng.choice(people).key}
    for o in orgs:
        o.attrs = {"established": str(rng.randint(1600, 2000)), "industry": rng.choice(INDUSTRIES)}
        o.rels = {"founder": rng.choice(people).key, "headquarters": rng.choice(cities).key}
    for i, k in enumerate(countries):
        k.attrs = {
            "currency": f"{names.word(2)} {rng.choice(CURRENCY_UNITS)}",
            "language": languages[i % len(languages)],
        }
        own = [c for c in cities if c.rels["country"] == k.key]
        k.rels = {"capital": rng.choice(own).key, "leader": rng.choice(people).key}
    return people + cities + orgs + countries


def _passage(rng: random.Random, entity: Entity, by_key: dict[str, Entity]) -> str:
    facts: list[str] = []
    for attr, value in entity.attrs.items():
        facts.append(rng.choice(ATTRIBUTES[entity.kind][attr][1]).format(name=entity.name, value=value))
    for rel, target in entity.rels.items():
        template = rng.choice(RELATIONS[entity.kind][rel][2])
        facts.append(template.format(name=entity.name, value=by_key[target].name))
    intro, rest = facts[0], facts[1:]
    rng.shuffle(rest)
    return " ".join([intro, *rest])


def _question(
    rng: random.Random, start: Entity, hops: int, by_key: dict[str, Entity]
) -> dict[str, Any] | None:
    """A random walk of `hops - 1` relations from `start`, then an attribute; None on a dead end."""
    chain, path = [start], []
    for _ in range(hops - 1):
        options = sorted(chain[-1].rels)
        if not options:
            return None
        rel = rng.choice(options)
        nxt = by_key[chain[-1].rels[rel]]
        if any(e.key == nxt.key for e in chain):  # a loop would let a hop be skipped
            return None
        chain.append(nxt)
        path.append(rel)
    last = chain[-1]
    attribute = rng.choice(sorted(last.attrs))
    phrase = start.name
    for entity, rel in zip(chain, path, strict=False):
        phrase = RELATIONS[entity.kind][rel][1].format(x=phrase)
    question = ATTRIBUTES[last.kind][attribute][0].format(x=phrase)
    return {
        "question": question[0].upper() + question[1:],
        "answers": answers_for(last.kind, attribute, last.attrs[attribute]),
        "category": HOP_CATEGORIES[hops - 1],
        "hops": hops,
        "chain": [e.name for e in chain],
        "kinds": [e.kind for e in chain],
        "path": path,
        "attribute": attribute,
    }


def generate_world(seed: int = 0, entities: int = 600, n_test: int = 100, n_train: int = 500) -> World:
    """Generate a world of about `entities` passages and `n_test`/`n_train` questions per hop count."""
    rng = random.Random(seed)
    ents = _make_entities(rng, entities)
    by_key = {e.key: e for e in ents}
    passages = [{"id": str(i), "title": e.name, "text": _passage(rng, e, by_key)} for i, e in enumerate(ents)]
    per_hop: list[list[dict[str, Any]]] = []
    for hops in range(1, len(HOP_CATEGORIES) + 1):
        seen: dict[str, None] = {}
        found: list[dict[str, Any]] = []
        for _ in range(50 * (n_test + n_train)):
            if len(found) >= n_test + n_train:
                break
            q = _question(rng, rng.choice(ents), hops, by_key)
            if q is not None and q["question"] not in seen:
                seen[q["question"]] = None
                found.append(q)
        per_hop.append(found)
    # Interleave the hop counts (1, 2, 3, 4, 1, 2, ...) so that any prefix of a split, as in
    # `horizonrl eval --limit 20`, covers every category.
    test = [q for group in itertools.zip_longest(*(f[:n_test] for f in per_hop)) for q in group if q]
    train = [q for group in itertools.zip_longest(*(f[n_test:] for f in per_hop)) for q in group if q]
    for split, records in (("test", test), ("train", train)):
        for i, record in enumerate(records):
            record["id"] = f"{split}_{i}"
    return World(seed=seed, entities=ents, passages=passages, test=test, train=train)


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_world(world: World, out_dir: str | Path) -> Path:
    """Write the world's files into `out_dir` atomically (a half-written world is never seen)."""
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _write_jsonl(tmp / "corpus.jsonl", world.passages)
    _write_jsonl(tmp / "test.jsonl", world.test)
    _write_jsonl(tmp / "train.jsonl", world.train)
    meta = {
        "format": WORLD_FORMAT,
        "seed": world.seed,
        "passages": len(world.passages),
        "test": len(world.test),
        "train": len(world.train),
        "categories": list(HOP_CATEGORIES),
    }
    (tmp / "world.json").write_text(json.dumps(meta, indent=1) + "\n")
    if out.exists():
        for child in tmp.iterdir():  # keep whatever else the user has in an existing folder
            os.replace(child, out / child.name)
        tmp.rmdir()
    else:
        try:
            os.replace(tmp, out)
        except OSError:  # another process wrote the same deterministic world first
            shutil.rmtree(tmp, ignore_errors=True)
    return out
