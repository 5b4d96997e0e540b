"""Shopping tasks (One Stop Market, as customer 1): prices, reviews, categories, orders, cart,
checkout, account and reviews written."""

from __future__ import annotations

import sqlite3
from typing import Any

from horizonrl.envs.web.sites.words import ADJECTIVES, CATEGORY_NOUNS, SHIPPING
from horizonrl.envs.web.taskgen.base import (
    Params,
    Template,
    click,
    db_eval,
    money,
    next_pages,
    rows,
    scalar,
    stop,
    string_eval,
    type_,
    url_eval,
)

SHOP = "__SHOPPING__"
CATEGORY = "shopping"
_PRODUCTS = "SELECT * FROM products WHERE enabled ORDER BY id"
_MY_ORDERS = "SELECT * FROM orders WHERE customer_id = 1 ORDER BY created DESC, id DESC"
NICKNAMES = ["Sam", "Kit", "Robin", "Jules", "Ari", "Dee", "Max"]
SUMMARIES = {1: "Not worth it", 2: "Meh", 3: "Fine overall", 4: "Pretty good", 5: "Fantastic"}


def _open_product(name: str) -> list[dict[str, Any]]:
    return [type_("textbox", "Search", name, enter=True), click("link", name)]


def _task(eval_: dict, solution: list, show: Params, start: str = SHOP) -> dict[str, Any]:
    return {"sites": ["shopping"], "start_url": start, "eval": eval_, "solution": solution, "show": show}


def _products(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, _PRODUCTS)]


def _product(db: sqlite3.Connection, p: Params) -> sqlite3.Row:
    return rows(db, "SELECT * FROM products WHERE id = ?", p["id"])[0]


def price(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    answer = money(prod["price_cents"])
    return _task(
        string_eval(must_include=[answer]),
        [*_open_product(prod["name"]), stop(answer)],
        {"product": prod["name"]},
    )


def review_count(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    n = scalar(db, "SELECT COUNT(*) FROM reviews WHERE product_id = ?", prod["id"])
    return _task(
        string_eval(must_include=[str(n)]),
        [*_open_product(prod["name"]), stop(str(n))],
        {"product": prod["name"]},
    )


def _reviewed(db: sqlite3.Connection, at_least: int) -> list[Params]:
    return [
        {"id": r["id"]}
        for r in rows(
            db,
            "SELECT p.id FROM products p WHERE p.enabled AND (SELECT COUNT(*)"
            " FROM reviews r WHERE r.product_id = p.id) >= ? ORDER BY p.id",
            at_least,
        )
    ]


def avg_rating(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    avg = f"{scalar(db, 'SELECT AVG(rating) FROM reviews WHERE product_id = ?', prod['id']):.1f}"
    return _task(
        string_eval(must_include=[avg]), [*_open_product(prod["name"]), stop(avg)], {"product": prod["name"]}
    )


def colors(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    cs = prod["colors"].split(",")
    return _task(
        string_eval(must_include=cs),
        [*_open_product(prod["name"]), stop(", ".join(cs))],
        {"product": prod["name"]},
    )


def _categories(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, "SELECT id FROM categories ORDER BY id")]


def _cheapest_unique(db: sqlite3.Connection) -> list[Params]:
    out = []
    for c in _categories(db):
        prices = rows(
            db,
            "SELECT price_cents FROM products WHERE category_id = ? AND enabled ORDER BY price_cents LIMIT 2",
            c["id"],
        )
        if prices[0][0] != prices[1][0]:
            out.append(c)
    return out


def cheapest(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    cat = rows(db, "SELECT * FROM categories WHERE id = ?", p["id"])[0]
    name = scalar(
        db,
        "SELECT name FROM products WHERE category_id = ? AND enabled ORDER BY price_cents, name LIMIT 1",
        cat["id"],
    )
    steps = [click("link", cat["name"]), click("link", "Sort by price: low to high"), stop(name)]
    return _task(string_eval(exact_match=name), steps, {"category": cat["name"]})


def category_sorted(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    cat = rows(db, "SELECT * FROM categories WHERE id = ?", p["id"])[0]
    steps = [click("link", cat["name"]), click("link", "Sort by price: high to low"), stop()]
    return _task(url_eval(f"{SHOP}/category/{cat['slug']}?sort=price_desc"), steps, {"category": cat["name"]})


def _search_words(db: sqlite3.Connection) -> list[Params]:
    words = sorted({*ADJECTIVES, *(n for ns in CATEGORY_NOUNS.values() for n in ns)})
    return [
        {"q": w}
        for w in words
        if scalar(db, "SELECT COUNT(*) FROM products WHERE enabled AND name LIKE ?", f"%{w}%")
    ]


def search_count(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    n = str(scalar(db, "SELECT COUNT(*) FROM products WHERE enabled AND name LIKE ?", f"%{p['q']}%"))
    return _task(
        string_eval(must_include=[n]),
        [type_("textbox", "Search", p["q"], enter=True), stop(n)],
        {"q": p["q"]},
    )


def _my_orders(db: sqlite3.Connection) -> list[Params]:
    return [{"number": r["number"], "index": i} for i, r in enumerate(rows(db, _MY_ORDERS))]


def _order_steps(p: Params) -> list[dict[str, Any]]:
    return [click("link", "My Orders"), *next_pages(p["index"]), click("link", f"View order {p['number']}")]


def order_total(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    total = money(scalar(db, "SELECT total_cents FROM orders WHERE number = ?", p["number"]))
    return _task(string_eval(must_include=[total]), [*_order_steps(p), stop(total)], {"number": p["number"]})


def order_status(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    status = scalar(db, "SELECT status FROM orders WHERE number = ?", p["number"]).capitalize()
    return _task(string_eval(exact_match=status), [*_order_steps(p), stop(status)], {"number": p["number"]})


def orders_in_year(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    n = str(
        scalar(db, "SELECT COUNT(*) FROM orders WHERE customer_id = 1 AND created LIKE ?", f"{p['year']}%")
    )
    steps = [click("link", "My Orders"), click("link", "Next page"), stop(n)]
    return _task(string_eval(must_include=[n]), steps, {"year": p["year"]})


def _options(prod: sqlite3.Row) -> tuple[str, str]:
    cs = prod["colors"].split(",")
    color = cs[prod["id"] % len(cs)]
    size = prod["sizes"].split(",")[prod["id"] % 5] if prod["sizes"] else ""
    return color, size


def _in_stock(db: sqlite3.Connection) -> list[Params]:
    return [
        {"id": r["id"]} for r in rows(db, "SELECT id FROM products WHERE enabled AND stock > 0 ORDER BY id")
    ]


def _add_steps(prod: sqlite3.Row, qty: int) -> tuple[list[dict[str, Any]], str, Params]:
    color, size = _options(prod)
    steps = [*_open_product(prod["name"]), click("radio", color)] + ([click("radio", size)] if size else [])
    if qty != 1:
        steps.append(type_("spinbutton", "Quantity", str(qty)))
    steps.append(click("button", "Add to Cart"))
    options = f"Color: {color}" + (f", Size: {size}" if size else "")
    show = {"product": prod["name"], "options": f"color {color}" + (f", size {size}" if size else "")}
    return steps, options, show


def add_to_cart(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    qty = 1 + prod["id"] % 3
    steps, options, show = _add_steps(prod, qty)
    check = (
        "SELECT p.name, c.options, c.qty FROM cart_items c JOIN products p ON p.id = c.product_id",
        [[prod["name"], options, qty]],
    )
    return _task(db_eval([check]), [*steps, stop()], {**show, "qty": qty})


def place_order(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    steps, options, show = _add_steps(prod, 1)
    method, (label, cents) = list(SHIPPING.items())[prod["id"] % len(SHIPPING)]
    last = scalar(db, "SELECT MAX(id) FROM orders")
    steps += [
        click("link", "Proceed to Checkout"),
        click("radio", f"{label} ({money(cents)})"),
        click("button", "Place Order"),
        stop(),
    ]
    checks = [
        (
            "SELECT o.customer_id, o.shipping_method, i.name, i.options, i.qty FROM orders o"
            f" JOIN order_items i ON i.order_id = o.id WHERE o.id > {last}",
            [[1, label, prod["name"], options, 1]],
        ),
        ("SELECT COUNT(*) FROM cart_items", [[0]]),
    ]
    return _task(db_eval(checks), steps, {**show, "shipping": label})


def _phones(db: sqlite3.Connection) -> list[Params]:
    return [{"phone": f"412-555-{n:04d}"} for n in range(100, 160)]


def change_phone(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    steps = [
        click("link", "My Account"),
        type_("textbox", "Phone", p["phone"]),
        click("button", "Save"),
        stop(),
    ]
    return _task(
        db_eval([("SELECT phone FROM customers WHERE id = 1", [[p["phone"]]])]), steps, {"phone": p["phone"]}
    )


def write_review(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = _product(db, p)
    stars = 1 + prod["id"] % 5
    nick, summary = NICKNAMES[prod["id"] % len(NICKNAMES)], SUMMARIES[stars]
    body = f"{summary}: my {prod['name'].lower()} arrived on time."
    last = scalar(db, "SELECT MAX(id) FROM reviews")
    steps = [
        *_open_product(prod["name"]),
        type_("textbox", "Nickname", nick),
        click("radio", f"{stars} stars" if stars > 1 else "1 star"),
        type_("textbox", "Summary", summary),
        type_("textbox", "Review", body),
        click("button", "Submit Review"),
        stop(),
    ]
    check = (
        f"SELECT product_id, nickname, rating, title, body FROM reviews WHERE id > {last}",
        [[prod["id"], nick, stars, summary, body]],
    )
    return _task(
        db_eval([check]),
        steps,
        {"product": prod["name"], "stars": stars, "nickname": nick, "summary": summary, "body": body},
    )


TEMPLATES = [
    Template("shop_price", CATEGORY, "What is the price of {{product}}?", _products, price),
    Template(
        "shop_review_count",
        CATEGORY,
        "How many reviews does {{product}} have?",
        lambda db: _reviewed(db, 1),
        review_count,
    ),
    Template(
        "shop_avg_rating",
        CATEGORY,
        "What is the average star rating of {{product}}, to one decimal?",
        lambda db: _reviewed(db, 2),
        avg_rating,
    ),
    Template("shop_colors", CATEGORY, "In which colors is {{product}} available?", _products, colors),
    Template(
        "shop_cheapest",
        CATEGORY,
        "Which product in the {{category}} category is the cheapest?",
        _cheapest_unique,
        cheapest,
    ),
    Template(
        "shop_sorted_url",
        CATEGORY,
        "Show me the {{category}} products sorted by price from high to low",
        _categories,
        category_sorted,
    ),
    Template(
        "shop_search_count",
        CATEGORY,
        "How many products does a search for '{{q}}' find?",
        _search_words,
        search_count,
    ),
    Template(
        "shop_order_total",
        CATEGORY,
        "What was the grand total of my order #{{number}}?",
        _my_orders,
        order_total,
    ),
    Template(
        "shop_order_status", CATEGORY, "What is the status of my order #{{number}}?", _my_orders, order_status
    ),
    Template(
        "shop_orders_in_year",
        CATEGORY,
        "How many orders did I place in {{year}}?",
        lambda db: [{"year": y} for y in ("2022", "2023", "2024")],
        orders_in_year,
    ),
    Template(
        "shop_add_to_cart",
        CATEGORY,
        "Add {{qty}} {{product}} ({{options}}) to my cart",
        _in_stock,
        add_to_cart,
    ),
    Template(
        "shop_place_order",
        CATEGORY,
        "Buy one {{product}} ({{options}}) with {{shipping}}",
        _in_stock,
        place_order,
    ),
    Template(
        "shop_change_phone",
        CATEGORY,
        "Change the phone number of my account to {{phone}}",
        _phones,
        change_phone,
    ),
    Template(
        "shop_write_review",
        CATEGORY,
        "Review {{product}}: {{stars}} stars, nickname {{nickname}}, summary '{{summary}}', text '{{body}}'",
        _products,
        write_review,
    ),
]
