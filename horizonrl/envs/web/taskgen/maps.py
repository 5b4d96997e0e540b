"""Map tasks: coordinates, addresses, nearest places, distances, travel times, routes."""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import urlencode

from horizonrl.envs.web.sites.maps import MODES, distance_km, travel_minutes
from horizonrl.envs.web.taskgen.base import Params, Template, click, rows, stop, string_eval, type_, url_eval

MAP = "__MAP__"
CATEGORY = "maps"


def _task(eval_: dict, solution: list, show: Params) -> dict[str, Any]:
    return {"sites": ["map"], "start_url": MAP, "eval": eval_, "solution": solution, "show": show}


def _places(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, "SELECT id FROM places ORDER BY id")]


def _place(db: sqlite3.Connection, pid: int) -> sqlite3.Row:
    return rows(db, "SELECT * FROM places WHERE id = ?", pid)[0]


def _open_place(name: str) -> list[dict[str, Any]]:
    return [type_("textbox", "Search", name, enter=True), click("link", name)]


def coordinates(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    pl = _place(db, p["id"])
    lat, lon = f"{pl['lat']:.5f}", f"{pl['lon']:.5f}"
    return _task(
        string_eval(must_include=[lat, lon]),
        [*_open_place(pl["name"]), stop(f"{lat}, {lon}")],
        {"place": pl["name"]},
    )


def city(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    pl = _place(db, p["id"])
    return _task(
        string_eval(exact_match=pl["city"]),
        [*_open_place(pl["name"]), stop(pl["city"])],
        {"place": pl["name"]},
    )


def address(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    pl = _place(db, p["id"])
    return _task(
        string_eval(must_include=[pl["street"]]),
        [*_open_place(pl["name"]), stop(pl["street"])],
        {"place": pl["name"]},
    )


def _by_distance(db: sqlite3.Connection, pl: sqlite3.Row) -> list[tuple[float, str]]:
    others = rows(db, "SELECT * FROM places WHERE id != ?", pl["id"])
    return sorted((distance_km(pl["lat"], pl["lon"], o["lat"], o["lon"]), o["name"]) for o in others)


def nearest(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    pl = _place(db, p["id"])
    name = _by_distance(db, pl)[0][1]
    return _task(string_eval(exact_match=name), [*_open_place(pl["name"]), stop(name)], {"place": pl["name"]})


def _pairs(db: sqlite3.Connection) -> list[Params]:
    ids = [r["id"] for r in rows(db, "SELECT id FROM places ORDER BY id")]
    return [
        {"a": a, "b": ids[(i * 7 + 3) % len(ids)]}
        for i, a in enumerate(ids)
        if ids[(i * 7 + 3) % len(ids)] != a
    ]


def _route_steps(a: str, b: str, mode: str) -> list[dict[str, Any]]:
    return [
        click("link", "Directions"),
        type_("textbox", "From", a),
        type_("textbox", "To", b),
        click("radio", MODES[mode][0]),
        click("button", "Go"),
    ]


def _km(db: sqlite3.Connection, p: Params) -> tuple[sqlite3.Row, sqlite3.Row, float]:
    a, b = _place(db, p["a"]), _place(db, p["b"])
    return a, b, distance_km(a["lat"], a["lon"], b["lat"], b["lon"])


def distance(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    a, b, km = _km(db, p)
    answer = f"{km:.1f} km"
    return _task(
        string_eval(must_include=[answer]),
        [*_route_steps(a["name"], b["name"], "car"), stop(answer)],
        {"a": a["name"], "b": b["name"]},
    )


def _travel(mode: str) -> Any:
    def build(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
        a, b, km = _km(db, p)
        answer = f"{travel_minutes(km, mode)} min"
        steps = [*_route_steps(a["name"], b["name"], mode), stop(answer)]
        return _task(string_eval(must_include=[answer]), steps, {"a": a["name"], "b": b["name"]})

    return build


def route_url(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    a, b, _ = _km(db, p)
    ref = f"{MAP}/directions?{urlencode({'from': a['name'], 'to': b['name'], 'mode': 'bicycle'})}"
    return _task(
        url_eval(ref),
        [*_route_steps(a["name"], b["name"], "bicycle"), stop()],
        {"a": a["name"], "b": b["name"]},
    )


def _triples(db: sqlite3.Connection) -> list[Params]:
    out = []
    for p in _pairs(db):
        c = p["b"] % 240 + 1
        if c not in (p["a"], p["b"]):
            out.append({**p, "c": c})
    return out


def closer(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    a, b, km_b = _km(db, p)
    c = _place(db, p["c"])
    km_c = distance_km(a["lat"], a["lon"], c["lat"], c["lon"])
    name = b["name"] if km_b < km_c else c["name"]
    steps = [
        *_route_steps(a["name"], b["name"], "car"),
        type_("textbox", "To", c["name"]),
        click("button", "Go"),
        stop(name),
    ]
    return _task(string_eval(exact_match=name), steps, {"a": a["name"], "b": b["name"], "c": c["name"]})


def _kind_city(db: sqlite3.Connection) -> list[Params]:
    found = rows(db, "SELECT kind, city, COUNT(*) AS n FROM places GROUP BY kind, city ORDER BY kind, city")
    out = []
    for r in found:
        words = [r["kind"], r["city"]]
        where = " AND ".join("(name LIKE ? OR kind LIKE ? OR city LIKE ?)" for _ in words)
        args = [f"%{w}%" for w in words for _ in range(3)]
        if rows(db, f"SELECT COUNT(*) FROM places WHERE {where}", *args)[0][0] == r["n"]:  # the search agrees
            out.append({"kind": r["kind"], "city": r["city"], "n": r["n"]})
    return out


def kind_count(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    n = str(p["n"])
    steps = [type_("textbox", "Search", f"{p['kind']} {p['city']}", enter=True), stop(n)]
    return _task(string_eval(must_include=[n]), steps, {"kind": p["kind"], "city": p["city"]})


TEMPLATES = [
    Template(
        "map_coordinates", CATEGORY, "What are the latitude and longitude of {{place}}?", _places, coordinates
    ),
    Template("map_city", CATEGORY, "In which city is {{place}}?", _places, city),
    Template("map_address", CATEGORY, "What is the street address of {{place}}?", _places, address),
    Template("map_nearest", CATEGORY, "Which place is the nearest to {{place}}?", _places, nearest),
    Template(
        "map_distance", CATEGORY, "How far is it from {{a}} to {{b}} in km (to 0.1 km)?", _pairs, distance
    ),
    Template(
        "map_walk_time",
        CATEGORY,
        "How many minutes does it take to walk from {{a}} to {{b}}?",
        _pairs,
        _travel("foot"),
    ),
    Template(
        "map_drive_time",
        CATEGORY,
        "How many minutes does it take to drive from {{a}} to {{b}}?",
        _pairs,
        _travel("car"),
    ),
    Template("map_route_url", CATEGORY, "Show me the bicycle route from {{a}} to {{b}}", _pairs, route_url),
    Template("map_closer", CATEGORY, "Which is closer to {{a}}: {{b}} or {{c}}?", _triples, closer),
    Template(
        "map_kind_count",
        CATEGORY,
        "How many places of the type {{kind}} are there in {{city}}?",
        _kind_city,
        kind_count,
    ),
]
