"""The map site (WebArena's OpenStreetMap, without tiles): places, search, directions.

    /                                   search and directions forms
    /search?q=&page=                    places whose name, kind or city has every word of q
    /place/{id}                         address, coordinates, the nearest places
    /directions?from=&to=&mode=         distance and travel time between two places

Distances are great-circle distances (haversine, Earth radius 6371 km) between the places'
coordinates, shown to 0.1 km; travel time is distance / speed of the mode (car 40 km/h,
bicycle 15 km/h, foot 5 km/h), rounded to whole minutes (at least 1).
"""

from __future__ import annotations

import math
import sqlite3

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from horizonrl.envs.web.sites.common import database, html, one, page_of
from horizonrl.envs.web.sites.html import (
    esc,
    form,
    link,
    page,
    page_number,
    pager,
    radios,
    table,
    textbox,
)

SITE = "OpenStreetMap"
NAV = [("/", "Home"), ("/directions", "Directions")]
MODES = {"car": ("Car", 40.0), "bicycle": ("Bicycle", 15.0), "foot": ("Foot", 5.0)}
EARTH_RADIUS_KM = 6371.0


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance between two points in km (haversine)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def travel_minutes(km: float, mode: str) -> int:
    return max(1, round(km / MODES[mode][1] * 60))


def _view(title: str, body: str) -> Response:
    return html(page(SITE, title, body, NAV))


def _search_sql(q: str) -> tuple[str, list[str]]:
    words = q.split()
    where = " AND ".join("(name LIKE ? OR kind LIKE ? OR city LIKE ?)" for _ in words) or "1"
    return where, [f"%{w}%" for w in words for _ in range(3)]


def find_place(db: sqlite3.Connection, text: str) -> sqlite3.Row | None:
    """The place named `text` (any case), else the first search match by name."""
    row = db.execute("SELECT * FROM places WHERE name = ? COLLATE NOCASE", (text.strip(),)).fetchone()
    if row is not None or not text.strip():
        return row
    where, args = _search_sql(text)
    return db.execute(f"SELECT * FROM places WHERE {where} ORDER BY name LIMIT 1", args).fetchone()


def _directions_form(src: str = "", dst: str = "", mode: str = "car") -> str:
    inner = (
        textbox("from", "From", src)
        + textbox("to", "To", dst)
        + radios("mode", "Travel mode", [(k, v[0]) for k, v in MODES.items()], mode)
    )
    return form("/directions", inner, "Go", method="get")


def home(request: Request) -> Response:
    search = form("/search", textbox("q", "Search", ""), "Search", method="get")
    return _view("OpenStreetMap", search + "<h2>Directions</h2>" + _directions_form())


def search(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    where, args = _search_sql(q)
    with database(request) as db:
        count, rows = page_of(
            db,
            f"SELECT COUNT(*) FROM places WHERE {where}",
            f"SELECT * FROM places WHERE {where} ORDER BY name",
            args,
            n,
        )
    cells = [
        (link(f"/place/{p['id']}", p["name"]), esc(p["kind"]), esc(f"{p['street']}, {p['city']}"))
        for p in rows
    ]
    body = (
        form("/search", textbox("q", "Search", q), "Search", method="get")
        + (table(["Name", "Type", "Address"], cells) if rows else "<p>No results found.</p>")
        + pager("/search", n, count, q=q)
    )
    return _view(f"Search results for '{q}'", body)


def place(request: Request) -> Response:
    with database(request) as db:
        p = one(db, "SELECT * FROM places WHERE id = ?", request.path_params["id"])
        others = db.execute("SELECT * FROM places WHERE id != ?", (p["id"],)).fetchall()
    near = sorted(others, key=lambda o: (distance_km(p["lat"], p["lon"], o["lat"], o["lon"]), o["name"]))[:5]
    cells = [
        (
            link(f"/place/{o['id']}", o["name"]),
            esc(o["kind"]),
            f"{distance_km(p['lat'], p['lon'], o['lat'], o['lon']):.1f} km",
        )
        for o in near
    ]
    body = (
        f"<p>Type: {esc(p['kind'])}</p><p>Address: {esc(p['street'])}, {esc(p['city'])}</p>"
        f"<p>Latitude: {p['lat']:.5f}, Longitude: {p['lon']:.5f}</p>"
        f"<p>{link('/directions?from=' + str(p['id']), 'Directions from here')}</p>"
        + table(["Name", "Type", "Distance"], cells, "Nearby places")
    )
    return _view(p["name"], body)


def directions(request: Request) -> Response:
    qp = request.query_params
    mode = qp.get("mode", "car")
    mode = mode if mode in MODES else "car"
    src_text, dst_text = qp.get("from", ""), qp.get("to", "")
    with database(request) as db:
        if src_text.isdigit():  # "Directions from here" passes the place id
            row = db.execute("SELECT name FROM places WHERE id = ?", (int(src_text),)).fetchone()
            src_text = row["name"] if row else src_text
        src = find_place(db, src_text) if src_text else None
        dst = find_place(db, dst_text) if dst_text else None
    result = ""
    if src_text and dst_text:
        missing = [t for t, p in ((src_text, src), (dst_text, dst)) if p is None]
        if missing:
            result = "".join(f"<p role='status'>No place found for '{esc(t)}'.</p>" for t in missing)
        else:
            assert src is not None and dst is not None
            km = distance_km(src["lat"], src["lon"], dst["lat"], dst["lon"])
            result = (
                f"<h2>Route</h2><p>From: {esc(src['name'])} ({esc(src['city'])})</p>"
                f"<p>To: {esc(dst['name'])} ({esc(dst['city'])})</p><p>Mode: {MODES[mode][0]}</p>"
                f"<p>Distance: {km:.1f} km</p><p>Time: {travel_minutes(km, mode)} min</p>"
            )
    return _view("Directions", _directions_form(src_text, dst_text, mode) + result)


ROUTES = [
    Route("/", home),
    Route("/search", search),
    Route("/place/{id:int}", place),
    Route("/directions", directions),
]
