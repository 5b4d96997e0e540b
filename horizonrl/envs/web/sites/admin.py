"""The store's admin panel (WebArena's shopping_admin / CMS), over the shopping site's tables.

/                               dashboard: lifetime sales, links to every section
/orders?status=&q=&page=        orders, filtered by status links and a search (number or name)
/orders/{number}                one order: items, customer; "Update Status", "Submit Comment"
/products?q=&page=              products; /products/{id}/edit: name, price, quantity, status
/customers?q=&page=             customers; /customers/{id}: details, their orders, edit form
/reviews?page=                  the latest reviews
/reports/bestsellers?year=      quantity sold per product (orders not canceled)
/reports/sales?year=            orders and revenue per month
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from horizonrl.envs.web.sites.common import database, form_data, html, one, page_of, redirect
from horizonrl.envs.web.sites.data import TODAY
from horizonrl.envs.web.sites.html import (
    esc,
    form,
    link,
    money,
    page,
    page_number,
    pager,
    radios,
    search_form,
    searched_table,
    table,
    textbox,
    url,
)
from horizonrl.envs.web.sites.words import ORDER_STATUSES

SITE = "Store Admin"
NAV = [
    ("/", "Dashboard"),
    ("/orders", "Orders"),
    ("/products", "Products"),
    ("/customers", "Customers"),
    ("/reviews", "Reviews"),
    ("/reports/bestsellers", "Bestsellers"),
    ("/reports/sales", "Sales"),
]
STATUSES = sorted(set(ORDER_STATUSES))
YEARS = ("2022", "2023", "2024")


def _view(title: str, body: str, flash: str = "") -> Response:
    return html(page(SITE, title, body, NAV, flash))


def _bad(title: str, message: str) -> Response:
    return html(page(SITE, title, f'<p class="error">{esc(message)}</p>', NAV), 400)


def dashboard(request: Request) -> Response:
    with database(request) as db:
        total = db.execute("SELECT COALESCE(SUM(total_cents), 0) FROM orders WHERE status != 'canceled'")
        lifetime = total.fetchone()[0]
        counts = db.execute("SELECT status, COUNT(*) FROM orders GROUP BY status ORDER BY status").fetchall()
        last = db.execute(
            "SELECT o.number, c.first_name || ' ' || c.last_name AS customer, o.total_cents FROM orders o"
            " JOIN customers c ON c.id = o.customer_id ORDER BY o.created DESC, o.id DESC LIMIT 5"
        ).fetchall()
    rows = [
        (link(f"/orders/{o['number']}", o["number"]), esc(o["customer"]), money(o["total_cents"]))
        for o in last
    ]
    body = (
        f"<p>Lifetime Sales: {money(lifetime)}</p>"
        + table(["Status", "Orders"], [(esc(s.capitalize()), esc(n)) for s, n in counts], "Orders by status")
        + table(["Order #", "Customer", "Total"], rows, "Last orders")
    )
    return _view("Dashboard", body)


def orders(request: Request) -> Response:
    status = request.query_params.get("status", "")
    status = status if status in STATUSES else ""
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    where, args = ["1"], []
    if status:
        where.append("o.status = ?")
        args.append(status)
    if q:
        where.append("(o.number LIKE ? OR c.first_name || ' ' || c.last_name LIKE ?)")
        args += [f"%{q}%", f"%{q}%"]
    sql = " FROM orders o JOIN customers c ON c.id = o.customer_id WHERE " + " AND ".join(where)
    with database(request) as db:
        count, rows = page_of(
            db,
            "SELECT COUNT(*)" + sql,
            "SELECT o.*, c.first_name || ' ' || c.last_name AS customer"
            + sql
            + " ORDER BY o.created DESC, o.id DESC",
            args,
            n,
        )
    filters = " ".join(
        link(url("/orders", status=s, q=q), f"{s.capitalize()} orders" if s else "All orders")
        for s in ["", *STATUSES]
    )
    cells = [
        (
            link(f"/orders/{o['number']}", o["number"], label=f"Order {o['number']}"),
            esc(o["created"]),
            esc(o["customer"]),
            money(o["total_cents"]),
            esc(o["status"].capitalize()),
        )
        for o in rows
    ]
    body = (
        search_form(
            "/orders",
            q,
            label="Search orders",
            extra=f'<input type="hidden" name="status" value="{esc(status)}">',
        )
        + f"<p>{filters}</p>"
        + table(["Order #", "Purchase Date", "Customer", "Grand Total", "Status"], cells)
        + pager("/orders", n, count, status=status, q=q)
    )
    return _view("Orders", body)


def order(request: Request) -> Response:
    with database(request) as db:
        o = one(db, "SELECT * FROM orders WHERE number = ?", request.path_params["number"])
        c = one(db, "SELECT * FROM customers WHERE id = ?", o["customer_id"])
        items = db.execute("SELECT * FROM order_items WHERE order_id = ? ORDER BY id", (o["id"],)).fetchall()
        notes = db.execute(
            "SELECT * FROM order_comments WHERE order_id = ? ORDER BY id", (o["id"],)
        ).fetchall()
    rows = [
        (esc(i["name"]), esc(i["sku"]), esc(i["options"]), esc(i["qty"]), money(i["price_cents"]))
        for i in items
    ]
    body = (
        f"<p>Order Status: {esc(o['status'].capitalize())}</p><p>Order Date: {esc(o['created'])}</p>"
        f"<p>Customer: {link('/customers/' + str(c['id']), c['first_name'] + ' ' + c['last_name'])}"
        f" ({esc(c['email'])})</p>"
        + table(["Product", "SKU", "Options", "Qty", "Price"], rows, "Items Ordered")
        + f"<p>Shipping ({esc(o['shipping_method'])}): {money(o['shipping_cents'])}</p>"
        f"<p>Grand Total: {money(o['total_cents'])}</p>"
        f"<p>Ship to: {esc(o['ship_name'])}, {esc(o['ship_street'])}, {esc(o['ship_city'])}, "
        f"{esc(o['ship_state'])} {esc(o['ship_zip'])}</p>"
    )
    body += "<h2>Change status</h2>" + form(
        f"/orders/{o['number']}/status",
        radios("status", "Status", [(s, s.capitalize()) for s in STATUSES], o["status"]),
        "Update Status",
    )
    history = "".join(f"<li>{esc(nt['created'])}: {esc(nt['body'])}</li>" for nt in notes)
    body += f'<h2>Comments History</h2><ul aria-label="Comments history">{history}</ul>'
    body += form(
        f"/orders/{o['number']}/comments",
        textbox("comment", "Comment", kind="textarea", required=True),
        "Submit Comment",
    )
    flash = {"status": "You updated the order status.", "comment": "You added a comment."}.get(
        request.query_params.get("saved", ""), ""
    )
    return _view(f"Order # {o['number']}", body, flash)


async def order_status(request: Request) -> Response:
    data = await form_data(request)
    status = data.get("status", "")
    if status not in STATUSES:
        return _bad("Status not changed", f"Choose one of: {', '.join(STATUSES)}.")
    with database(request) as db:
        o = one(db, "SELECT id, number FROM orders WHERE number = ?", request.path_params["number"])
        db.execute("UPDATE orders SET status = ? WHERE id = ?", (status, o["id"]))
        db.execute(
            "INSERT INTO order_comments(order_id, body, created) VALUES (?,?,?)",
            (o["id"], f"Status changed to {status}", TODAY),
        )
    return redirect(f"/orders/{o['number']}?saved=status")


async def order_comment(request: Request) -> Response:
    data = await form_data(request)
    text = data.get("comment", "").strip()
    if not text:
        return _bad("Comment not added", "The comment is empty.")
    with database(request) as db:
        o = one(db, "SELECT id, number FROM orders WHERE number = ?", request.path_params["number"])
        db.execute(
            "INSERT INTO order_comments(order_id, body, created) VALUES (?,?,?)", (o["id"], text, TODAY)
        )
    return redirect(f"/orders/{o['number']}?saved=comment")


def products(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    where = "p.name LIKE ? OR p.sku LIKE ?"
    args = [f"%{q}%", f"%{q}%"]
    with database(request) as db:
        count, rows = page_of(
            db,
            f"SELECT COUNT(*) FROM products p WHERE {where}",
            "SELECT p.*, c.name AS category FROM products p JOIN categories c ON c.id = p.category_id"
            f" WHERE {where} ORDER BY p.id",
            args,
            n,
        )
    cells = [
        (
            esc(p["sku"]),
            esc(p["name"]),
            esc(p["category"]),
            money(p["price_cents"]),
            esc(p["stock"]),
            "Enabled" if p["enabled"] else "Disabled",
            link(f"/products/{p['id']}/edit", "Edit", label=f"Edit {p['name']}"),
        )
        for p in rows
    ]
    headers = ["SKU", "Name", "Category", "Price", "Quantity", "Status", ""]
    return _view("Products", searched_table("/products", q, "Search products", headers, cells, n, count))


def edit_product(request: Request) -> Response:
    with database(request) as db:
        p = one(db, "SELECT * FROM products WHERE id = ?", request.path_params["id"])
    inner = (
        textbox("name", "Product Name", p["name"], required=True)
        + textbox("price", "Price", f"{p['price_cents'] / 100:.2f}", required=True)
        + textbox("stock", "Quantity", p["stock"], kind="number", required=True)
        + radios("enabled", "Enable Product", [("1", "Enabled"), ("0", "Disabled")], str(p["enabled"]))
        + textbox("description", "Description", p["description"], kind="textarea")
    )
    flash = "You saved the product." if request.query_params.get("saved") else ""
    body = f"<p>SKU: {esc(p['sku'])}</p>" + form(f"/products/{p['id']}/edit", inner, "Save")
    return _view(f"Edit {p['name']}", body, flash)


async def save_product(request: Request) -> Response:
    data = await form_data(request)
    name = data.get("name", "").strip()
    try:
        price = round(float(data.get("price", "").replace("$", "").replace(",", "")) * 100)
        stock = int(data.get("stock", ""))
    except ValueError:
        return _bad("Product not saved", "Price must be a number (e.g. 19.99) and quantity a whole number.")
    enabled = data.get("enabled", "1")
    if not name or price < 0 or stock < 0 or enabled not in ("0", "1"):
        return _bad("Product not saved", "Name is required; price and quantity must not be negative.")
    pid = request.path_params["id"]
    with database(request) as db:
        one(db, "SELECT id FROM products WHERE id = ?", pid)
        db.execute(
            "UPDATE products SET name = ?, price_cents = ?, stock = ?, enabled = ?, description = ?"
            " WHERE id = ?",
            (name, price, stock, int(enabled), data.get("description", "").strip(), pid),
        )
    return redirect(f"/products/{pid}/edit?saved=1")


def customers(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    where = "first_name || ' ' || last_name LIKE ? OR email LIKE ?"
    args = [f"%{q}%", f"%{q}%"]
    with database(request) as db:
        count, rows = page_of(
            db,
            f"SELECT COUNT(*) FROM customers WHERE {where}",
            f"SELECT * FROM customers WHERE {where} ORDER BY id",
            args,
            n,
        )
    cells = [
        (
            esc(c["id"]),
            link(f"/customers/{c['id']}", f"{c['first_name']} {c['last_name']}"),
            esc(c["email"]),
            esc(c["phone"]),
            esc(f"{c['city']}, {c['state']}"),
        )
        for c in rows
    ]
    headers = ["ID", "Name", "Email", "Phone", "Location"]
    return _view("Customers", searched_table("/customers", q, "Search customers", headers, cells, n, count))


def customer(request: Request) -> Response:
    with database(request) as db:
        c = one(db, "SELECT * FROM customers WHERE id = ?", request.path_params["id"])
        rows = db.execute(
            "SELECT * FROM orders WHERE customer_id = ? ORDER BY created DESC, id DESC", (c["id"],)
        ).fetchall()
    cells = [
        (
            link(f"/orders/{o['number']}", o["number"]),
            esc(o["created"]),
            money(o["total_cents"]),
            esc(o["status"].capitalize()),
        )
        for o in rows
    ]
    inner = "".join(
        textbox(k, label, c[k], required=True)
        for k, label in (
            ("first_name", "First Name"),
            ("last_name", "Last Name"),
            ("email", "Email"),
            ("phone", "Phone"),
            ("street", "Street Address"),
            ("city", "City"),
            ("state", "State"),
            ("zip", "Zip"),
        )
    )
    body = (
        f"<p>Email: {esc(c['email'])}</p><p>Phone: {esc(c['phone'])}</p><p>Address: {esc(c['street'])}, "
        f"{esc(c['city'])}, {esc(c['state'])} {esc(c['zip'])}</p><p>Customer since: {esc(c['created'])}</p>"
        + table(["Order #", "Date", "Total", "Status"], cells, f"Orders ({len(rows)})")
        + "<h2>Edit customer</h2>"
        + form(f"/customers/{c['id']}", inner, "Save Customer")
    )
    flash = "You saved the customer." if request.query_params.get("saved") else ""
    return _view(f"{c['first_name']} {c['last_name']}", body, flash)


async def save_customer(request: Request) -> Response:
    data = await form_data(request)
    keys = ("first_name", "last_name", "email", "phone", "street", "city", "state", "zip")
    values = [data.get(k, "").strip() for k in keys]
    if not all(values):
        return _bad("Customer not saved", "Every field is required.")
    cid = request.path_params["id"]
    with database(request) as db:
        one(db, "SELECT id FROM customers WHERE id = ?", cid)
        db.execute(f"UPDATE customers SET {', '.join(f'{k} = ?' for k in keys)} WHERE id = ?", (*values, cid))
    return redirect(f"/customers/{cid}?saved=1")


def reviews(request: Request) -> Response:
    n = page_number(request.query_params.get("page"))
    with database(request) as db:
        count, rows = page_of(
            db,
            "SELECT COUNT(*) FROM reviews",
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.id = r.product_id"
            " ORDER BY r.created DESC, r.id DESC",
            (),
            n,
        )
    cells = [
        (esc(r["created"]), esc(r["product"]), esc(r["nickname"]), esc(r["rating"]), esc(r["title"]))
        for r in rows
    ]
    return _view(
        "Reviews",
        table(["Date", "Product", "Nickname", "Rating", "Title"], cells) + pager("/reviews", n, count),
    )


def _year(request: Request) -> str:
    year = request.query_params.get("year", "")
    return year if year in YEARS else ""


def _year_links(path: str, year: str) -> str:
    return (
        "<p>"
        + " ".join(link(url(path, year=y), y or "All years") for y in ("", *YEARS) if y != year)
        + "</p>"
    )


def bestsellers(request: Request) -> Response:
    year = _year(request)
    with database(request) as db:
        rows = db.execute(
            "SELECT i.name, SUM(i.qty) AS qty, SUM(i.qty * i.price_cents) AS revenue FROM order_items i"
            " JOIN orders o ON o.id = i.order_id WHERE o.status != 'canceled' AND o.created LIKE ?"
            " GROUP BY i.product_id ORDER BY qty DESC, i.name LIMIT 20",
            (f"{year}%",),
        ).fetchall()
    cells = [
        (esc(k), esc(r["name"]), esc(r["qty"]), money(r["revenue"])) for k, r in enumerate(rows, start=1)
    ]
    body = _year_links("/reports/bestsellers", year) + table(
        ["Rank", "Product", "Quantity", "Revenue"], cells
    )
    return _view(f"Bestsellers ({year or 'all years'})", body)


def sales(request: Request) -> Response:
    year = _year(request)
    with database(request) as db:
        rows = db.execute(
            "SELECT substr(created, 1, 7) AS month, COUNT(*) AS n, SUM(total_cents) AS total FROM orders"
            " WHERE status != 'canceled' AND created LIKE ? GROUP BY month ORDER BY month",
            (f"{year}%",),
        ).fetchall()
    cells = [(esc(r["month"]), esc(r["n"]), money(r["total"])) for r in rows]
    body = _year_links("/reports/sales", year) + table(["Month", "Orders", "Revenue"], cells)
    return _view(f"Sales report ({year or 'all years'})", body)


ROUTES = [
    Route("/", dashboard),
    Route("/orders", orders),
    Route("/orders/{number}", order),
    Route("/orders/{number}/status", order_status, methods=["POST"]),
    Route("/orders/{number}/comments", order_comment, methods=["POST"]),
    Route("/products", products),
    Route("/products/{id:int}/edit", edit_product),
    Route("/products/{id:int}/edit", save_product, methods=["POST"]),
    Route("/customers", customers),
    Route("/customers/{id:int}", customer),
    Route("/customers/{id:int}", save_customer, methods=["POST"]),
    Route("/reviews", reviews),
    Route("/reports/bestsellers", bestsellers),
    Route("/reports/sales", sales),
]
