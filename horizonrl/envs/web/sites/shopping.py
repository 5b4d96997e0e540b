"""The shopping site (WebArena's "One Stop Market"): catalogue, search, product pages with
options and reviews, cart, checkout, order history and the account of the logged-in
customer (customer 1).

    /                          categories and a search box
    /category/{slug}?sort=&page=   products of a category (sort: name, price_asc, price_desc)
    /search?q=&page=           products whose name has every word of q
    /product/{id}              details, colour/size radios, quantity, "Add to Cart", reviews
    /cart  /checkout           the cart; the checkout form ("Place Order")
    /orders  /orders/{number}  order history and one order
    /account                   the customer's details and the form that edits them
"""

from __future__ import annotations

import sqlite3

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from horizonrl.envs.web.sites.common import database, form_data, html, one, page_of, redirect
from horizonrl.envs.web.sites.data import TODAY
from horizonrl.envs.web.sites.html import (
    esc,
    form,
    hidden,
    link,
    money,
    page,
    page_number,
    pager,
    radios,
    search_form,
    table,
    textbox,
)
from horizonrl.envs.web.sites.words import SHIPPING

SITE = "One Stop Market"
CUSTOMER = 1
NAV = [("/", "Home"), ("/cart", "My Cart"), ("/orders", "My Orders"), ("/account", "My Account")]
SORTS = {
    "name": ("Sort by name", "p.name"),
    "price_asc": ("Sort by price: low to high", "p.price_cents, p.name"),
    "price_desc": ("Sort by price: high to low", "p.price_cents DESC, p.name"),
}
_RATED = (
    "SELECT p.*, c.name AS category, c.slug AS category_slug,"
    " (SELECT AVG(rating) FROM reviews r WHERE r.product_id = p.id) AS rating,"
    " (SELECT COUNT(*) FROM reviews r WHERE r.product_id = p.id) AS n_reviews"
    " FROM products p JOIN categories c ON c.id = p.category_id"
)


def _view(title: str, body: str, flash: str = "") -> Response:
    return html(page(SITE, title, body, NAV, flash))


def rating_text(rating: float | None, n: int) -> str:
    return f"{rating:.1f} out of 5 ({n} reviews)" if n else "No reviews yet"


def _product_list(rows: list[sqlite3.Row]) -> str:
    if not rows:
        return "<p>No products found.</p>"
    return table(
        ["Product", "Price", "Rating"],
        [
            (
                link(f"/product/{r['id']}", r["name"]),
                money(r["price_cents"]),
                esc(rating_text(r["rating"], r["n_reviews"])),
            )
            for r in rows
        ],
    )


def home(request: Request) -> Response:
    with database(request) as db:
        cats = db.execute("SELECT name, slug FROM categories ORDER BY name").fetchall()
    items = "".join(f"<li>{link('/category/' + c['slug'], c['name'])}</li>" for c in cats)
    body = search_form("/search") + f'<h2>Categories</h2><ul aria-label="Categories">{items}</ul>'
    return _view("Welcome to One Stop Market", body)


def category(request: Request) -> Response:
    sort = request.query_params.get("sort", "name")
    if sort not in SORTS:
        sort = "name"
    n = page_number(request.query_params.get("page"))
    slug = request.path_params["slug"]
    with database(request) as db:
        cat = one(db, "SELECT * FROM categories WHERE slug = ?", slug)
        count, rows = page_of(
            db,
            "SELECT COUNT(*) FROM products WHERE category_id = ? AND enabled",
            f"{_RATED} WHERE p.category_id = ? AND p.enabled ORDER BY {SORTS[sort][1]}",
            (cat["id"],),
            n,
        )
    sorts = " ".join(link(f"/category/{slug}?sort={k}", text) for k, (text, _) in SORTS.items() if k != sort)
    body = f"<p>{sorts}</p>{_product_list(rows)}{pager(f'/category/{slug}', n, count, sort=sort)}"
    return _view(cat["name"], body)


def search(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    words = q.split()
    where = " AND ".join("p.name LIKE ?" for _ in words) or "1"
    args = [f"%{w}%" for w in words]
    with database(request) as db:
        count, rows = page_of(
            db,
            f"SELECT COUNT(*) FROM products p WHERE p.enabled AND {where}",
            f"{_RATED} WHERE p.enabled AND {where} ORDER BY p.name",
            args,
            n,
        )
    body = search_form("/search", q) + _product_list(rows) + pager("/search", n, count, q=q)
    return _view(f"Search results for '{q}'", body)


def product(request: Request) -> Response:
    with database(request) as db:
        p = one(db, f"{_RATED} WHERE p.id = ? AND p.enabled", request.path_params["id"])
        reviews = db.execute("SELECT * FROM reviews WHERE product_id = ? ORDER BY id", (p["id"],)).fetchall()
    stock = f"In stock ({p['stock']} left)" if p["stock"] > 0 else "Out of stock"
    body = (
        f"<p>SKU: {esc(p['sku'])}</p><p>Price: {money(p['price_cents'])}</p><p>{stock}</p>"
        f"<p>Category: {link('/category/' + p['category_slug'], p['category'])}</p>"
        f"<p>Rating: {esc(rating_text(p['rating'], p['n_reviews']))}</p><p>{esc(p['description'])}</p>"
    )
    colors = p["colors"].split(",")
    inner = hidden("product_id", p["id"]) + radios("color", "Color", [(c, c) for c in colors], colors[0])
    if p["sizes"]:
        sizes = p["sizes"].split(",")
        inner += radios("size", "Size", [(s, s) for s in sizes], sizes[0])
    inner += textbox("qty", "Quantity", 1, kind="number")
    if p["stock"] > 0:
        body += form("/cart/add", inner, "Add to Cart")
    rows = [
        (esc(r["nickname"]), esc(r["rating"]), esc(r["title"]), esc(r["body"]), esc(r["created"]))
        for r in reviews
    ]
    body += "<h2>Reviews</h2>" + (
        table(["Nickname", "Rating", "Title", "Review", "Date"], rows) if rows else ""
    )
    review_form = (
        textbox("nickname", "Nickname", required=True)
        + radios(
            "rating", "Your rating", [(str(i), f"{i} stars" if i > 1 else "1 star") for i in range(1, 6)]
        )
        + textbox("title", "Summary", required=True)
        + textbox("body", "Review", kind="textarea", required=True)
    )
    body += "<h2>Write a review</h2>" + form(f"/product/{p['id']}/reviews", review_form, "Submit Review")
    flash = "You submitted your review." if request.query_params.get("reviewed") else ""
    return _view(p["name"], body, flash)


async def add_review(request: Request) -> Response:
    data = await form_data(request)
    pid = request.path_params["id"]
    try:
        rating = int(data.get("rating", ""))
    except ValueError:
        rating = 0
    fields = [data.get(k, "").strip() for k in ("nickname", "title", "body")]
    if not 1 <= rating <= 5 or not all(fields):
        return html(page(SITE, "Review not saved", "<p>Give a rating and fill in every field.</p>", NAV), 400)
    with database(request) as db:
        one(db, "SELECT id FROM products WHERE id = ?", pid)
        db.execute(
            "INSERT INTO reviews(product_id, nickname, rating, title, body, created) VALUES (?,?,?,?,?,?)",
            (pid, fields[0], rating, fields[1], fields[2], TODAY),
        )
    return redirect(f"/product/{pid}?reviewed=1")


async def cart_add(request: Request) -> Response:
    data = await form_data(request)
    with database(request) as db:
        p = one(db, "SELECT * FROM products WHERE id = ? AND enabled", data.get("product_id", ""))
        color = data.get("color", "")
        size = data.get("size", "")
        if color not in p["colors"].split(",") or (p["sizes"] and size not in p["sizes"].split(",")):
            return html(page(SITE, "Not added", "<p>Choose one of the product's options.</p>", NAV), 400)
        try:
            qty = max(1, int(data.get("qty", "1") or 1))
        except ValueError:
            qty = 1
        options = f"Color: {color}" + (f", Size: {size}" if p["sizes"] else "")
        row = db.execute("SELECT id FROM cart_items WHERE product_id = ? AND options = ?", (p["id"], options))
        found = row.fetchone()
        if found:
            db.execute("UPDATE cart_items SET qty = qty + ? WHERE id = ?", (qty, found["id"]))
        else:
            db.execute(
                "INSERT INTO cart_items(product_id, options, qty) VALUES (?,?,?)", (p["id"], options, qty)
            )
    return redirect(f"/cart?added={p['id']}")


def _cart_rows(db: sqlite3.Connection) -> list[sqlite3.Row]:
    return db.execute(
        "SELECT ci.*, p.name, p.sku, p.price_cents FROM cart_items ci JOIN products p ON p.id = ci.product_id"
        " ORDER BY ci.id"
    ).fetchall()


def cart(request: Request) -> Response:
    with database(request) as db:
        items = _cart_rows(db)
        added = request.query_params.get("added", "")
        name = db.execute("SELECT name FROM products WHERE id = ?", (added,)).fetchone() if added else None
    flash = f"You added {name['name']} to your shopping cart." if name else ""
    if not items:
        return _view("Shopping Cart", "<p>You have no items in your shopping cart.</p>", flash)
    rows = [
        (
            link(f"/product/{i['product_id']}", i["name"]),
            esc(i["options"]),
            esc(i["qty"]),
            money(i["qty"] * i["price_cents"]),
            form(
                "/cart/remove",
                hidden("item_id", i["id"]),
                "Remove",
                label=f"Remove {i['name']} ({i['options']})",
            ),
        )
        for i in items
    ]
    subtotal = sum(i["qty"] * i["price_cents"] for i in items)
    body = table(["Product", "Options", "Qty", "Subtotal", ""], rows)
    body += f"<p>Cart subtotal: {money(subtotal)}</p><p>{link('/checkout', 'Proceed to Checkout')}</p>"
    return _view("Shopping Cart", body, flash)


async def cart_remove(request: Request) -> Response:
    data = await form_data(request)
    with database(request) as db:
        db.execute("DELETE FROM cart_items WHERE id = ?", (data.get("item_id", ""),))
    return redirect("/cart")


def checkout(request: Request) -> Response:
    with database(request) as db:
        items = _cart_rows(db)
        c = one(db, "SELECT * FROM customers WHERE id = ?", CUSTOMER)
    if not items:
        return redirect("/cart")
    subtotal = sum(i["qty"] * i["price_cents"] for i in items)
    summary = "".join(f"<li>{esc(i['qty'])} x {esc(i['name'])} ({esc(i['options'])})</li>" for i in items)
    inner = (
        textbox("name", "Full name", f"{c['first_name']} {c['last_name']}", required=True)
        + textbox("street", "Street address", c["street"], required=True)
        + textbox("city", "City", c["city"], required=True)
        + textbox("state", "State", c["state"], required=True)
        + textbox("zip", "Zip code", c["zip"], required=True)
        + radios(
            "shipping",
            "Shipping method",
            [(k, f"{n} ({money(v)})") for k, (n, v) in SHIPPING.items()],
            "flatrate",
        )
    )
    body = f"<h2>Order summary</h2><ul>{summary}</ul><p>Subtotal: {money(subtotal)}</p>"
    return _view("Checkout", body + form("/checkout", inner, "Place Order"))


async def place_order(request: Request) -> Response:
    data = await form_data(request)
    fields = {k: data.get(k, "").strip() for k in ("name", "street", "city", "state", "zip")}
    method = data.get("shipping", "")
    if method not in SHIPPING or not all(fields.values()):
        return html(
            page(SITE, "Order not placed", "<p>Fill in the address and pick a shipping method.</p>", NAV), 400
        )
    with database(request) as db:
        items = _cart_rows(db)
        if not items:
            return redirect("/cart")
        oid = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM orders").fetchone()[0]
        label, ship = SHIPPING[method]
        subtotal = sum(i["qty"] * i["price_cents"] for i in items)
        db.execute(
            "INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (oid, f"{oid:09d}", CUSTOMER, "pending", TODAY, label, ship, subtotal + ship, *fields.values()),
        )
        db.executemany(
            "INSERT INTO order_items(order_id, product_id, name, sku, options, qty, price_cents)"
            " VALUES (?,?,?,?,?,?,?)",
            [
                (oid, i["product_id"], i["name"], i["sku"], i["options"], i["qty"], i["price_cents"])
                for i in items
            ],
        )
        db.execute("DELETE FROM cart_items")
    return redirect(f"/orders/{oid:09d}?placed=1")


def orders(request: Request) -> Response:
    n = page_number(request.query_params.get("page"))
    with database(request) as db:
        count, rows = page_of(
            db,
            "SELECT COUNT(*) FROM orders WHERE customer_id = ?",
            "SELECT * FROM orders WHERE customer_id = ? ORDER BY created DESC, id DESC",
            (CUSTOMER,),
            n,
        )
    cells = [
        (
            esc(o["number"]),
            esc(o["created"]),
            money(o["total_cents"]),
            esc(o["status"].capitalize()),
            link(f"/orders/{o['number']}", "View Order", label=f"View order {o['number']}"),
        )
        for o in rows
    ]
    body = table(["Order #", "Date", "Order Total", "Status", ""], cells) + pager("/orders", n, count)
    return _view("My Orders", body)


def order(request: Request) -> Response:
    with database(request) as db:
        o = one(
            db,
            "SELECT * FROM orders WHERE number = ? AND customer_id = ?",
            request.path_params["number"],
            CUSTOMER,
        )
        items = db.execute("SELECT * FROM order_items WHERE order_id = ? ORDER BY id", (o["id"],)).fetchall()
    rows = [
        (
            link(f"/product/{i['product_id']}", i["name"]),
            esc(i["sku"]),
            esc(i["options"]),
            esc(i["qty"]),
            money(i["price_cents"]),
        )
        for i in items
    ]
    body = (
        f"<p>Status: {esc(o['status'].capitalize())}</p><p>Order Date: {esc(o['created'])}</p>"
        + table(["Product", "SKU", "Options", "Qty", "Price"], rows)
        + f"<p>Shipping ({esc(o['shipping_method'])}): {money(o['shipping_cents'])}</p>"
        f"<p>Grand Total: {money(o['total_cents'])}</p>"
        f"<p>Ship to: {esc(o['ship_name'])}, {esc(o['ship_street'])}, {esc(o['ship_city'])}, "
        f"{esc(o['ship_state'])} {esc(o['ship_zip'])}</p>"
    )
    flash = (
        f"Thank you for your purchase! Your order number is {o['number']}."
        if request.query_params.get("placed")
        else ""
    )
    return _view(f"Order # {o['number']}", body, flash)


def account(request: Request) -> Response:
    with database(request) as db:
        c = one(db, "SELECT * FROM customers WHERE id = ?", CUSTOMER)
    info = (
        f"<p>{esc(c['first_name'])} {esc(c['last_name'])}</p><p>Email: {esc(c['email'])}</p>"
        f"<p>Phone: {esc(c['phone'])}</p><p>Address: {esc(c['street'])}, {esc(c['city'])}, {esc(c['state'])} "
        f"{esc(c['zip'])}</p>"
    )
    inner = "".join(
        textbox(k, label, c[k], required=True)
        for k, label in (
            ("first_name", "First name"),
            ("last_name", "Last name"),
            ("email", "Email"),
            ("phone", "Phone"),
            ("street", "Street address"),
            ("city", "City"),
            ("state", "State"),
            ("zip", "Zip code"),
        )
    )
    flash = "You saved the account information." if request.query_params.get("saved") else ""
    return _view("My Account", info + "<h2>Edit account</h2>" + form("/account", inner, "Save"), flash)


async def save_account(request: Request) -> Response:
    data = await form_data(request)
    keys = ("first_name", "last_name", "email", "phone", "street", "city", "state", "zip")
    values = [data.get(k, "").strip() for k in keys]
    if not all(values):
        return html(page(SITE, "Not saved", "<p>Every field is required.</p>", NAV), 400)
    with database(request) as db:
        db.execute(
            f"UPDATE customers SET {', '.join(f'{k} = ?' for k in keys)} WHERE id = ?", (*values, CUSTOMER)
        )
    return redirect("/account?saved=1")


ROUTES = [
    Route("/", home),
    Route("/category/{slug}", category),
    Route("/search", search),
    Route("/product/{id:int}", product),
    Route("/product/{id:int}/reviews", add_review, methods=["POST"]),
    Route("/cart", cart),
    Route("/cart/add", cart_add, methods=["POST"]),
    Route("/cart/remove", cart_remove, methods=["POST"]),
    Route("/checkout", checkout),
    Route("/checkout", place_order, methods=["POST"]),
    Route("/orders", orders),
    Route("/orders/{number}", order),
    Route("/account", account),
    Route("/account", save_account, methods=["POST"]),
]
