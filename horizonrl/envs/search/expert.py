"""A scripted expert for generated-world questions: it follows the hops through real searches.

The answer key is used only to plan: which relation to read at each hop (e.g. birthplace,
then river). Everything else comes from the observations: the expert searches for the
current entity's name, finds that entity's passage among the returned documents, reads
the next entity (or the final answer) out of the passage text, and answers with what it
read. When the passage is not among the results it searches again with a longer query,
and after three misses it gives up with its best guess, so a retriever that fails shows
up as a lower success rate rather than a hidden lookup in the answer key.
"""

from __future__ import annotations

import re

from horizonrl.envs.core import parse_item_id
from horizonrl.envs.search.data import SearchDataset
from horizonrl.envs.search.world import ATTRIBUTES, RELATIONS

_DOC = re.compile(
    r"^(?:<information>)?Doc \d+\(Title: (?P<title>[^\n]*?)\) (?P<text>[^\n]*?)(?:</information>)?$", re.M
)
MAX_ATTEMPTS = 3
LABELS = {
    "birth_year": "birth year",
    "founded": "founding year",
    "established": "founding year",
    "employer": "employer",
    "leader": "head of state",
    "headquarters": "headquarters",
}


def parse_documents(observation: str) -> list[tuple[str, str]]:
    """`[(title, text), ...]` from an `<information>` observation."""
    return [(m.group("title"), m.group("text")) for m in _DOC.finditer(observation)]


def _pattern(template: str, name: str) -> re.Pattern[str]:
    parts = re.split(r"(\{name\}|\{value\})", template)
    regex = "".join(
        re.escape(name) if p == "{name}" else "(?P<value>[^.]+?)" if p == "{value}" else re.escape(p)
        for p in parts
    )
    return re.compile(regex)


def extract(kind: str, field: str, name: str, text: str) -> str | None:
    """Read relation or attribute `field` of entity `name` (of `kind`) from a passage, or None."""
    templates = RELATIONS[kind][field][2] if field in RELATIONS[kind] else ATTRIBUTES[kind][field][1]
    for template in templates:
        match = _pattern(template, name).search(text)
        if match:
            return match.group("value").strip()
    return None


class SearchExpert:
    """Plays one generated-world question per `reset` (see the module docstring)."""

    def __init__(self, dataset: SearchDataset) -> None:
        self.dataset = dataset
        self._kinds: list[str] = []
        self._fields: list[str] = []
        self._hop = 0
        self._current = ""
        self._attempt = 0
        self._searched = False

    def reset(self, item_id: str, observation: str, info: dict[str, object]) -> None:
        record = self.dataset.item(parse_item_id(item_id)[1]).record
        if "chain" not in record:
            raise ValueError(f"{item_id}: the search expert plays generated-world questions only")
        self._kinds = list(record["kinds"])
        self._fields = [*record["path"], record["attribute"]]
        self._hop, self._attempt, self._searched = 0, 0, False
        self._current = str(record["chain"][0])

    def _query(self) -> str:
        kind, field = self._kinds[self._hop], self._fields[self._hop]
        return [self._current, f"{self._current} {kind}", f"{self._current} {field.replace('_', ' ')}"][
            self._attempt
        ]

    def act(self, observation: str) -> tuple[str, str]:
        kind, field = self._kinds[self._hop], self._fields[self._hop]
        label = LABELS.get(field, field)
        if self._searched:
            self._searched = False
            docs = {title.lower(): text for title, text in reversed(parse_documents(observation))}
            text = docs.get(self._current.lower())
            value = extract(kind, field, self._current, text) if text is not None else None
            if value is not None and self._hop == len(self._fields) - 1:
                thought = f"The passage about {self._current} gives its {label}: {value}."
                return thought, f"<answer>{value}</answer>"
            if value is not None:
                thought = f"The {label} of {self._current} is {value}. Next I need to look up {value}."
                self._current, self._hop, self._attempt = value, self._hop + 1, 0
                self._searched = True
                return thought, f"<search>{self._query()}</search>"
            self._attempt += 1
            if self._attempt >= MAX_ATTEMPTS:
                return f"I could not find the {label} of {self._current}.", "<answer>unknown</answer>"
            self._searched = True
            thought = f"The results do not describe {self._current}; I will search again with more detail."
            return thought, f"<search>{self._query()}</search>"
        self._searched = True
        return (
            f"I need the {label} of {self._current}. Let me search for it.",
            f"<search>{self._query()}</search>",
        )
