"""WebArena's text observation: the page's accessibility tree, one line per node, with ids.

    OBSERVATION:
    Tab 0 (current): One Stop Market

    [1] RootWebArea 'One Stop Market' focused: True
        [2] link 'My Account'
        [3] searchbox 'Search'
        [4] button 'Search'
        ...
    URL: http://127.0.0.1:41001/
    OBJECTIVE: What is the price of the Blue Tee?
    PREVIOUS ACTION: None

How the tree is made (`render_tree`), as WebArena's `parse_accessibility_tree` and
`clean_accesibility_tree` do:
- the nodes come from CDP `Accessibility.getFullAXTree` and are walked depth first from
  the root; a child is indented one tab deeper than its nearest printed ancestor;
- a node is `[id] role 'name'` plus its properties as `name: value`, leaving out WebArena's
  `focusable editable readonly level settable multiline invalid` and also `url`;
- left out (their children are still walked): ignored nodes; `InlineTextBox`, `LineBreak`
  and `ListMarker` nodes (newer Chromium reports them; WebArena's did not); nameless
  nodes without properties of the roles generic, img, list, strong, paragraph, banner,
  navigation, Section, LabelText, Legend, listitem (and nameless listitems with properties);
  and a `StaticText` whose text one of the three lines printed before it already shows
  (the link or button it labels);
- the whole page is shown, not only the viewport (WebArena's `current_viewport_only`
  default): the sites keep pages short (~20 items, paginated), so `scroll` is rarely
  needed and never hides what the agent must see. A tree longer than `max_chars` is cut at
  a line with a marker line saying how many lines were left out.

Ids are ours: 1, 2, 3, ... in the order the lines are printed, so the same page always
reads the same (CDP's own node ids change between loads). Each id maps to the node's DOM
backend node id, which is what `click [id]` resolves to find the element's box.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

IGNORED_PROPERTIES = frozenset(
    ("focusable", "editable", "readonly", "level", "settable", "multiline", "invalid", "url")
)
SKIPPED_ROLES = frozenset(("InlineTextBox", "LineBreak", "ListMarker"))
EMPTY_DROPPED_ROLES = frozenset(
    (
        "generic",
        "img",
        "list",
        "strong",
        "paragraph",
        "banner",
        "navigation",
        "Section",
        "LabelText",
        "Legend",
        "listitem",
    )
)
DEFAULT_MAX_CHARS = 16000
"""Cap on the tree's text (WebArena cuts at 1920 tokens of its tokenizer, ~8000 characters;
ours is wider since the sites' pages are built to fit and a cut page hides controls)."""

_LINE = re.compile(r"^\s*\[(\d+)\] (\S+) ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")(.*)$")


@dataclass
class Tree:
    """A rendered tree: its text and, per printed id, the DOM backend node id."""

    text: str
    backend_ids: dict[int, int | None]
    lines: int


def _value(prop: dict[str, Any]) -> Any:
    return prop.get("value", {}).get("value")


def render_tree(nodes: Sequence[dict[str, Any]], max_chars: int = DEFAULT_MAX_CHARS) -> Tree:
    """Render CDP's `Accessibility.getFullAXTree` nodes as WebArena's text tree (module docstring)."""
    by_id = {n["nodeId"]: n for n in nodes}
    children = {n["nodeId"]: [c for c in n.get("childIds", []) if c in by_id] for n in nodes}
    roots = [n["nodeId"] for n in nodes if n.get("parentId") not in by_id]
    lines: list[str] = []
    backend_ids: dict[int, int | None] = {}
    stack: list[tuple[str, int]] = [(r, 0) for r in reversed(roots[:1])]
    while stack:
        node_id, depth = stack.pop()
        node = by_id[node_id]
        line = _node_line(node)
        if line is not None and _kept(line, node, lines):
            number = len(backend_ids) + 1
            backend_ids[number] = node.get("backendDOMNodeId")
            lines.append("\t" * depth + f"[{number}] {line}")
            depth += 1
        stack.extend((c, depth) for c in reversed(children[node_id]))
    return _capped(lines, backend_ids, max_chars)


def _node_line(node: dict[str, Any]) -> str | None:
    """`role 'name' props` of a node, or None if WebArena's rules leave it out."""
    if node.get("ignored") or "name" not in node:
        return None
    role = str(node.get("role", {}).get("value", ""))
    name = str(node["name"].get("value", ""))
    if not role or role in SKIPPED_ROLES:
        return None
    props = []
    for prop in node.get("properties", []):
        if prop.get("name") in IGNORED_PROPERTIES or _value(prop) is None:
            continue
        props.append(f"{prop['name']}: {_value(prop)}")
    dropped = (not props and role in EMPTY_DROPPED_ROLES) or (props and role == "listitem")
    if not name.strip() and dropped:
        return None
    return " ".join([f"{role} {name!r}", *props])


def _kept(line: str, node: dict[str, Any], printed: list[str]) -> bool:
    """Drop a StaticText whose text one of the last three printed lines already shows."""
    if node.get("role", {}).get("value") != "StaticText":
        return True
    text = str(node["name"].get("value", ""))
    return all(text not in previous for previous in printed[-3:])


def _capped(lines: list[str], backend_ids: dict[int, int | None], max_chars: int) -> Tree:
    total, kept = 0, 0
    for line in lines:
        if total + len(line) + 1 > max_chars:
            break
        total += len(line) + 1
        kept += 1
    text = "\n".join(lines[:kept])
    if kept < len(lines):
        text += (
            f"\n[... {len(lines) - kept} more lines cut: the page's tree is longer than {max_chars} "
            "characters; go to a narrower page (a search, a filter, the next page) ...]"
        )
    return Tree(text=text, backend_ids=backend_ids, lines=len(lines))


@dataclass(frozen=True)
class TreeLine:
    """One parsed line of a rendered tree (what the expert reads)."""

    id: int
    role: str
    name: str
    props: str


def parse_tree(text: str) -> list[TreeLine]:
    """The `[id] role 'name' props` lines of an observation, in order (other lines are skipped)."""
    import ast

    out = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            number, role, quoted, props = match.groups()
            try:
                name = str(ast.literal_eval(quoted))
            except (ValueError, SyntaxError):
                continue
            out.append(TreeLine(int(number), role, name, props.strip()))
    return out


def format_observation(
    tree: str, tabs: Sequence[str], current_tab: int, url: str, objective: str, previous_action: str | None
) -> str:
    """WebArena's observation layout: tabs and tree, then URL, objective and previous action."""
    tab_line = "\t".join(
        f"Tab {i}{' (current)' if i == current_tab else ''}: {title}" for i, title in enumerate(tabs)
    )
    return (
        f"OBSERVATION:\n{tab_line}\n\n{tree}\nURL: {url}\nOBJECTIVE: {objective}\n"
        f"PREVIOUS ACTION: {previous_action or 'None'}"
    )
