"""The sites' data: one SQLite schema for all five sites, filled from a fixed seed.

`template_path()` builds the template database once into the cache directory
(`$HORIZONRL_CACHE_DIR/web/<DATA_VERSION>-<hash>/template.sqlite`, default `~/.cache/horizonrl`) and
returns its path; every tenant's database is a copy of that file. Building takes well under a
second. Everything is drawn from `random.Random(SEED)` in a fixed order, so the same version
always yields the same rows (task answers are computed from these rows, see `tasks.py`).

Prices are integer cents; dates are ISO strings. The logged-in user of each site is a fixed
row: customer 1 (shopping), forum user 1, gitlab user 1.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import tempfile
from pathlib import Path

from horizonrl.envs.web.sites.words import (
    ADJECTIVES,
    APPAREL,
    CATEGORY_NOUNS,
    CITIES,
    COLORS,
    COMMENT_BODIES,
    FIRST,
    FORUMS,
    HANDLE_PARTS,
    ISSUE_OBJECTS,
    ISSUE_VERBS,
    LABELS,
    LAST,
    MAP_CITIES,
    ORDER_STATUSES,
    PLACE_KINDS,
    PLACE_NAMES,
    PROJECT_KINDS,
    PROJECT_WORDS,
    REVIEW_TITLES,
    ROLES,
    SHIPPING,
    SIZES,
    STREETS,
    THINGS,
    TOPICS,
)

DATA_VERSION = "v1"
"""Bumped whenever the schema or the generator changes, so a stale cached template is not reused."""
SEED = 13
TODAY = "2025-01-15"
"""The sites' fixed "today": new orders, posts and issues carry this date, so pages are reproducible."""

SCHEMA = """
CREATE TABLE categories(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, slug TEXT UNIQUE NOT NULL);
CREATE TABLE products(id INTEGER PRIMARY KEY, sku TEXT UNIQUE NOT NULL, name TEXT UNIQUE NOT NULL,
  category_id INTEGER NOT NULL, price_cents INTEGER NOT NULL, stock INTEGER NOT NULL,
  enabled INTEGER NOT NULL, description TEXT NOT NULL, colors TEXT NOT NULL, sizes TEXT NOT NULL);
CREATE TABLE reviews(id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL, nickname TEXT NOT NULL,
  rating INTEGER NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE customers(id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT, email TEXT UNIQUE,
  phone TEXT, street TEXT, city TEXT, state TEXT, zip TEXT, created TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, number TEXT UNIQUE NOT NULL, customer_id INTEGER NOT NULL,
  status TEXT NOT NULL, created TEXT NOT NULL, shipping_method TEXT NOT NULL, shipping_cents INTEGER NOT NULL,
  total_cents INTEGER NOT NULL, ship_name TEXT, ship_street TEXT, ship_city TEXT, ship_state TEXT,
  ship_zip TEXT);
CREATE TABLE order_items(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, product_id INTEGER NOT NULL,
  name TEXT NOT NULL, sku TEXT NOT NULL, options TEXT NOT NULL, qty INTEGER NOT NULL,
  price_cents INTEGER NOT NULL);
CREATE TABLE order_comments(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, body TEXT NOT NULL,
  created TEXT NOT NULL);
CREATE TABLE cart_items(id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL, options TEXT NOT NULL,
  qty INTEGER NOT NULL);
CREATE TABLE forum_users(id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, created TEXT NOT NULL);
CREATE TABLE forums(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, title TEXT NOT NULL,
  description TEXT NOT NULL);
CREATE TABLE posts(id INTEGER PRIMARY KEY, forum_id INTEGER NOT NULL, user_id INTEGER NOT NULL,
  title TEXT NOT NULL, body TEXT NOT NULL, score INTEGER NOT NULL, created TEXT NOT NULL);
CREATE TABLE comments(id INTEGER PRIMARY KEY, post_id INTEGER NOT NULL, user_id INTEGER NOT NULL,
  body TEXT NOT NULL, score INTEGER NOT NULL, created TEXT NOT NULL);
CREATE TABLE votes(id INTEGER PRIMARY KEY, target TEXT NOT NULL, target_id INTEGER NOT NULL,
  value INTEGER NOT NULL, UNIQUE(target, target_id));
CREATE TABLE gl_users(id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, name TEXT NOT NULL);
CREATE TABLE projects(id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
  description TEXT NOT NULL, stars INTEGER NOT NULL, created TEXT NOT NULL, UNIQUE(namespace, name));
CREATE TABLE members(project_id INTEGER NOT NULL, user_id INTEGER NOT NULL, role TEXT NOT NULL,
  PRIMARY KEY(project_id, user_id));
CREATE TABLE issues(id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, iid INTEGER NOT NULL,
  title TEXT NOT NULL, body TEXT NOT NULL, author_id INTEGER NOT NULL, assignee_id INTEGER,
  state TEXT NOT NULL, labels TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE issue_notes(id INTEGER PRIMARY KEY, issue_id INTEGER NOT NULL, author_id INTEGER NOT NULL,
  body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE merge_requests(id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, iid INTEGER NOT NULL,
  title TEXT NOT NULL, author_id INTEGER NOT NULL, source_branch TEXT NOT NULL,
  target_branch TEXT NOT NULL, state TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE repo_files(id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL, path TEXT NOT NULL,
  content TEXT NOT NULL);
CREATE TABLE places(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
  lat REAL NOT NULL, lon REAL NOT NULL, street TEXT NOT NULL, city TEXT NOT NULL);
CREATE INDEX reviews_product ON reviews(product_id);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX order_items_order ON order_items(order_id);
CREATE INDEX posts_forum ON posts(forum_id);
CREATE INDEX comments_post ON comments(post_id);
CREATE INDEX issues_project ON issues(project_id, iid);
"""


def _date(rng: random.Random, year0: int = 2022, years: int = 3) -> str:
    return f"{year0 + rng.randrange(years)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _datetime(rng: random.Random) -> str:
    return f"{_date(rng)} {rng.randrange(24):02d}:{rng.randrange(60):02d}"


def _shop(db: sqlite3.Connection, rng: random.Random) -> None:
    products = []
    for cid, (cat, nouns) in enumerate(CATEGORY_NOUNS.items(), start=1):
        slug = cat.lower().replace(" & ", "-").replace(" ", "-")
        db.execute("INSERT INTO categories VALUES (?,?,?)", (cid, cat, slug))
        names = sorted({f"{a} {n}" for a in ADJECTIVES for n in nouns})
        for name in rng.sample(names, 36):
            colors = ",".join(sorted(rng.sample(COLORS, rng.randint(2, 4)), key=COLORS.index))
            sizes = ",".join(SIZES[cat]) if cat in APPAREL else ""
            products.append((name, cid, cat, colors, sizes))
    for pid, (name, cid, cat, colors, sizes) in enumerate(products, start=1):
        price = rng.randrange(500, 15000, 25) - 1
        desc = f"The {name} from our {cat} range. Made to last, easy to care for."
        enabled = 0 if rng.random() < 0.05 else 1
        db.execute(
            "INSERT INTO products VALUES (?,?,?,?,?,?,?,?,?,?)",
            (pid, f"HR-{pid:04d}", name, cid, price, rng.randrange(0, 200), enabled, desc, colors, sizes),
        )
        for _ in range(rng.randrange(0, 7)):
            rating = rng.choices([1, 2, 3, 4, 5], weights=[1, 1, 2, 4, 5])[0]
            months = rng.randint(1, 11)
            body = f"{rng.choice(REVIEW_TITLES[rating])}. I bought the {name.lower()} {months} months ago."
            db.execute(
                "INSERT INTO reviews(product_id,nickname,rating,title,body,created) VALUES (?,?,?,?,?,?)",
                (
                    pid,
                    f"{rng.choice(FIRST)}{rng.choice(LAST)[0]}",
                    rating,
                    rng.choice(REVIEW_TITLES[rating]),
                    body,
                    _date(rng),
                ),
            )
    people = [("Alex", "Rivera")] + sorted({(f, ln) for f in FIRST for ln in LAST} - {("Alex", "Rivera")})
    people = people[:1] + rng.sample(people[1:], 119)
    for cid, (first, last) in enumerate(people, start=1):
        city, state = rng.choice(CITIES)
        db.execute(
            "INSERT INTO customers VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                cid,
                first,
                last,
                f"{first}.{last}@example.com".lower(),
                f"555-{rng.randrange(1000, 9999)}",
                f"{rng.randrange(10, 999)} {rng.choice(STREETS)}",
                city,
                state,
                f"{rng.randrange(10000, 99999)}",
                _date(rng, 2021, 2),
            ),
        )
    n_products = len(products)
    for oid in range(1, 401):
        cust = 1 if oid % 16 == 0 else rng.randint(2, len(people))
        method = rng.choice(list(SHIPPING))
        c = db.execute("SELECT first_name,last_name,street,city,state,zip FROM customers WHERE id=?", (cust,))
        first, last, street, city, state, zip_ = c.fetchone()
        subtotal = 0
        items = []
        for pid in rng.sample(range(1, n_products + 1), rng.randint(1, 4)):
            name, sku, price, colors, sizes = db.execute(
                "SELECT name,sku,price_cents,colors,sizes FROM products WHERE id=?", (pid,)
            ).fetchone()
            opts = f"Color: {rng.choice(colors.split(','))}"
            if sizes:
                opts += f", Size: {rng.choice(sizes.split(','))}"
            qty = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
            subtotal += qty * price
            items.append((oid, pid, name, sku, opts, qty, price))
        ship = SHIPPING[method][1]
        db.execute(
            "INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                oid,
                f"{oid:09d}",
                cust,
                rng.choice(ORDER_STATUSES),
                _date(rng),
                SHIPPING[method][0],
                ship,
                subtotal + ship,
                f"{first} {last}",
                street,
                city,
                state,
                zip_,
            ),
        )
        db.executemany(
            "INSERT INTO order_items(order_id,product_id,name,sku,options,qty,price_cents)"
            " VALUES (?,?,?,?,?,?,?)",
            items,
        )


def _forum(db: sqlite3.Connection, rng: random.Random) -> None:
    handles = ["alex_rivera"] + sorted(
        {f"{a}_{b}{rng.randrange(10, 99)}" for a in HANDLE_PARTS for b in HANDLE_PARTS if a != b}
    )[:59]
    for uid, handle in enumerate(handles, start=1):
        db.execute("INSERT INTO forum_users VALUES (?,?,?)", (uid, handle, _date(rng, 2020, 2)))
    for fid, (name, title, desc) in enumerate(FORUMS, start=1):
        db.execute("INSERT INTO forums VALUES (?,?,?,?)", (fid, name, title, desc))
    titles: set[str] = set()
    pid = 0
    while pid < 420:
        fid = rng.randint(1, len(FORUMS))
        forum = FORUMS[fid - 1][0]
        title = f"{rng.choice(TOPICS)} {rng.choice(THINGS[forum])}".capitalize()
        title += f" ({rng.randint(2019, 2024)})" if title in titles else ""
        if title in titles:
            continue
        titles.add(title)
        pid += 1
        user = rng.randint(1, len(handles)) if pid % 25 else 1
        db.execute(
            "INSERT INTO posts VALUES (?,?,?,?,?,?,?)",
            (
                pid,
                fid,
                user,
                title,
                f"Here is {title.lower()}. What do you all think?",
                rng.randint(-5, 250),
                _datetime(rng),
            ),
        )
        for _ in range(rng.randrange(0, 8)):
            db.execute(
                "INSERT INTO comments(post_id,user_id,body,score,created) VALUES (?,?,?,?,?)",
                (
                    pid,
                    rng.randint(2, len(handles)),
                    rng.choice(COMMENT_BODIES),
                    rng.randint(-3, 60),
                    _datetime(rng),
                ),
            )


def _gitlab(db: sqlite3.Connection, rng: random.Random) -> None:
    people = [("arivera", "Alex Rivera")] + [
        (f"{f.lower()}{ln.lower()[:3]}", f"{f} {ln}")
        for f, ln in zip(FIRST, rng.sample(LAST * 2, len(FIRST)), strict=True)
    ]
    for uid, (username, name) in enumerate(people, start=1):
        db.execute("INSERT INTO gl_users VALUES (?,?,?)", (uid, username, name))
    names = sorted({f"{w}-{k}" for w in PROJECT_WORDS for k in PROJECT_KINDS})
    for prid, pname in enumerate(rng.sample(names, 30), start=1):
        owner = 1 if prid % 3 == 1 else rng.randint(2, len(people))
        namespace = people[owner - 1][0]
        db.execute(
            "INSERT INTO projects VALUES (?,?,?,?,?,?)",
            (
                prid,
                namespace,
                pname,
                f"{pname.replace('-', ' ').title()}: a small {pname.split('-')[1]} project.",
                rng.randint(0, 400),
                _date(rng, 2019, 4),
            ),
        )
        team = {owner: "Owner"}
        for uid in rng.sample(range(2, len(people) + 1), rng.randint(2, 7)):
            team.setdefault(uid, rng.choice(ROLES[:4]))
        db.executemany("INSERT INTO members VALUES (?,?,?)", [(prid, u, r) for u, r in sorted(team.items())])
        for iid in range(1, rng.randint(5, 35) + 1):
            title = f"{rng.choice(ISSUE_VERBS)} {rng.choice(ISSUE_OBJECTS)}"
            labels = ",".join(sorted(rng.sample(LABELS, rng.randint(0, 2))))
            assignee = rng.choice([None, *team])
            db.execute(
                "INSERT INTO issues(project_id,iid,title,body,author_id,assignee_id,state,labels,created)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    prid,
                    iid,
                    title,
                    f"{title} in {pname}. Steps and details to follow.",
                    rng.choice(list(team)),
                    assignee,
                    rng.choice(["opened", "opened", "closed"]),
                    labels,
                    _date(rng),
                ),
            )
        for mid in range(1, rng.randint(1, 10) + 1):
            title = f"{rng.choice(ISSUE_VERBS)} {rng.choice(ISSUE_OBJECTS)}"
            branch = title.lower().replace(" ", "-")
            db.execute(
                "INSERT INTO merge_requests(project_id,iid,title,author_id,source_branch,target_branch,"
                "state,created) VALUES (?,?,?,?,?,?,?,?)",
                (
                    prid,
                    mid,
                    title,
                    rng.choice(list(team)),
                    f"{branch}-{mid}",
                    "main",
                    rng.choice(["opened", "merged", "merged", "closed"]),
                    _date(rng),
                ),
            )
        files = {
            "README.md": f"# {pname}\n\n{pname} does one thing well.\n",
            "LICENSE": rng.choice(["MIT License", "Apache License 2.0", "BSD 3-Clause License"]) + "\n",
            f"src/{pname.split('-')[0]}.py": f"def main():\n    print('{pname}')\n",
            "CONTRIBUTING.md": f"Open an issue before sending a merge request to {pname}.\n",
        }
        for path, content in sorted(files.items()):
            db.execute(
                "INSERT INTO repo_files(project_id,path,content) VALUES (?,?,?)", (prid, path, content)
            )


def _maps(db: sqlite3.Connection, rng: random.Random) -> None:
    seen: set[str] = set()
    while len(seen) < 240:
        kind = rng.choice(sorted(PLACE_KINDS))
        city, lat0, lon0 = rng.choice(MAP_CITIES)
        name = f"{rng.choice(PLACE_NAMES)} {rng.choice(PLACE_KINDS[kind])}"
        if name in seen:
            continue
        seen.add(name)
        lat, lon = round(lat0 + rng.uniform(-0.05, 0.05), 5), round(lon0 + rng.uniform(-0.07, 0.07), 5)
        db.execute(
            "INSERT INTO places(name,kind,lat,lon,street,city) VALUES (?,?,?,?,?,?)",
            (name, kind, lat, lon, f"{rng.randrange(1, 999)} {rng.choice(STREETS)}", city),
        )


def build_database(path: str | Path) -> None:
    """Write a fresh database with the schema and the seeded rows to `path`."""
    rng = random.Random(SEED)
    db = sqlite3.connect(path)
    try:
        db.executescript(SCHEMA)
        for fill in (_shop, _forum, _gitlab, _maps):
            fill(db, rng)
        db.commit()
    finally:
        db.close()


def cache_dir() -> Path:
    """`<cache>/web/<DATA_VERSION>-<hash of the generator and its word lists>`: an edited generator never
    reuses an old template."""
    root = Path(os.environ.get("HORIZONRL_CACHE_DIR", Path.home() / ".cache" / "horizonrl"))
    source = Path(__file__).read_bytes() + (Path(__file__).parent / "words.py").read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:12]
    return root / "web" / f"{DATA_VERSION}-{digest}"


def template_path() -> Path:
    """The template database of this `DATA_VERSION`, built on first use (atomically, so
    concurrent first users never see half a file)."""
    path = cache_dir() / "template.sqlite"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        try:
            os.unlink(tmp)
            build_database(tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return path
