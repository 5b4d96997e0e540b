"""Shopping-admin (CMS) tasks: reports, orders, customers, and product / order / customer edits."""

from __future__ import annotations

import sqlite3
from typing import Any

from horizonrl.envs.web.sites.admin import STATUSES, YEARS
from horizonrl.envs.web.taskgen.base import (
    Params,
    Template,
    click,
    db_eval,
    money,
    rows,
    scalar,
    stop,
    string_eval,
    type_,
    url_eval,
)

ADMIN = "__SHOPPING_ADMIN__"
CATEGORY = "shopping_admin"
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
COMMENTS = [
    "Customer called about the delivery date.",
    "Gift wrap requested.",
    "Address confirmed by phone.",
    "Refund approved by the manager.",
    "Ship with the next batch.",
]


def _task(eval_: dict, solution: list, show: Params) -> dict[str, Any]:
    return {
        "sites": ["shopping_admin"],
        "start_url": ADMIN,
        "eval": eval_,
        "solution": solution,
        "show": show,
    }


def _bestsellers(db: sqlite3.Connection, year: str) -> list[sqlite3.Row]:
    return rows(
        db,
        "SELECT i.name, SUM(i.qty) AS qty FROM order_items i JOIN orders o ON o.id = i.order_id"
        " WHERE o.status != 'canceled' AND o.created LIKE ? GROUP BY i.product_id ORDER BY qty DESC, i.name",
        f"{year}%",
    )


def _years_with_unique_top(db: sqlite3.Connection) -> list[Params]:
    return [{"year": y} for y in YEARS if (b := _bestsellers(db, y))[0]["qty"] != b[1]["qty"]]


def bestseller(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    name = _bestsellers(db, p["year"])[0]["name"]
    steps = [click("link", "Bestsellers"), click("link", p["year"]), stop(name)]
    return _task(string_eval(exact_match=name), steps, {"year": p["year"]})


def status_count(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    n = str(scalar(db, "SELECT COUNT(*) FROM orders WHERE status = ?", p["status"]))
    steps = [click("link", "Orders"), click("link", f"{p['status'].capitalize()} orders"), stop(n)]
    return _task(string_eval(must_include=[n]), steps, {"status": p["status"]})


def status_url(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    steps = [click("link", "Orders"), click("link", f"{p['status'].capitalize()} orders"), stop()]
    return _task(url_eval(f"{ADMIN}/orders?status={p['status']}"), steps, {"status": p["status"]})


def _customers(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, "SELECT id FROM customers WHERE id > 1 ORDER BY id")]


def _customer(db: sqlite3.Connection, p: Params) -> tuple[sqlite3.Row, str]:
    c = rows(db, "SELECT * FROM customers WHERE id = ?", p["id"])[0]
    return c, f"{c['first_name']} {c['last_name']}"


def _open_customer(name: str) -> list[dict[str, Any]]:
    return [
        click("link", "Customers"),
        type_("textbox", "Search customers", name, enter=True),
        click("link", name),
    ]


def customer_email(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    c, name = _customer(db, p)
    return _task(
        string_eval(must_include=[c["email"]]), [*_open_customer(name), stop(c["email"])], {"name": name}
    )


def _customers_with_orders(db: sqlite3.Connection) -> list[Params]:
    return [
        {"id": r["id"]}
        for r in rows(
            db,
            "SELECT id FROM customers c WHERE id > 1 AND EXISTS (SELECT 1 FROM"
            " orders o WHERE o.customer_id = c.id) ORDER BY id",
        )
    ]


def customer_orders(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    c, name = _customer(db, p)
    n = str(scalar(db, "SELECT COUNT(*) FROM orders WHERE customer_id = ?", c["id"]))
    return _task(string_eval(must_include=[n]), [*_open_customer(name), stop(n)], {"name": name})


def _orders(db: sqlite3.Connection) -> list[Params]:
    return [{"number": r["number"]} for r in rows(db, "SELECT number FROM orders ORDER BY id")]


def _open_order(number: str) -> list[dict[str, Any]]:
    return [
        click("link", "Orders"),
        type_("textbox", "Search orders", number, enter=True),
        click("link", f"Order {number}"),
    ]


def order_customer(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    name = scalar(
        db,
        "SELECT c.first_name || ' ' || c.last_name FROM orders o JOIN customers c ON c.id ="
        " o.customer_id WHERE o.number = ?",
        p["number"],
    )
    return _task(
        string_eval(must_include=[name]), [*_open_order(p["number"]), stop(name)], {"number": p["number"]}
    )


def order_total(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    total = money(scalar(db, "SELECT total_cents FROM orders WHERE number = ?", p["number"]))
    return _task(
        string_eval(must_include=[total]), [*_open_order(p["number"]), stop(total)], {"number": p["number"]}
    )


def _months(db: sqlite3.Connection) -> list[Params]:
    return [
        {"month": r[0]}
        for r in rows(
            db, "SELECT DISTINCT substr(created, 1, 7) AS m FROM orders WHERE status != 'canceled' ORDER BY m"
        )
    ]


def month_revenue(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    total = money(
        scalar(
            db,
            "SELECT SUM(total_cents) FROM orders WHERE status != 'canceled' AND created LIKE ?",
            f"{p['month']}%",
        )
    )
    year, month = p["month"].split("-")
    steps = [click("link", "Sales"), click("link", year), stop(total)]
    return _task(string_eval(must_include=[total]), steps, {"month": f"{MONTHS[int(month) - 1]} {year}"})


def lifetime_sales(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    total = money(scalar(db, "SELECT SUM(total_cents) FROM orders WHERE status != 'canceled'"))
    return _task(string_eval(must_include=[total]), [stop(total)], {})


def _products(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, "SELECT id FROM products ORDER BY id")]


def _edit_product(name: str) -> list[dict[str, Any]]:
    return [
        click("link", "Products"),
        type_("textbox", "Search products", name, enter=True),
        click("link", f"Edit {name}"),
    ]


def change_price(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = rows(db, "SELECT * FROM products WHERE id = ?", p["id"])[0]
    cents = prod["price_cents"] + (prod["id"] % 9 + 1) * 100
    price = f"{cents / 100:.2f}"
    steps = [*_edit_product(prod["name"]), type_("textbox", "Price", price), click("button", "Save"), stop()]
    check = (f"SELECT price_cents FROM products WHERE id = {prod['id']}", [[cents]])
    return _task(db_eval([check]), steps, {"product": prod["name"], "price": f"${price}"})


def set_stock(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = rows(db, "SELECT * FROM products WHERE id = ?", p["id"])[0]
    stock = 10 + (prod["id"] * 7) % 90
    steps = [
        *_edit_product(prod["name"]),
        type_("spinbutton", "Quantity", str(stock)),
        click("button", "Save"),
        stop(),
    ]
    check = (f"SELECT stock FROM products WHERE id = {prod['id']}", [[stock]])
    return _task(db_eval([check]), steps, {"product": prod["name"], "stock": stock})


def disable_product(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    prod = rows(db, "SELECT * FROM products WHERE id = ?", p["id"])[0]
    steps = [*_edit_product(prod["name"]), click("radio", "Disabled"), click("button", "Save"), stop()]
    check = (f"SELECT enabled FROM products WHERE id = {prod['id']}", [[0]])
    return _task(db_eval([check]), steps, {"product": prod["name"]})


def _open_orders(db: sqlite3.Connection) -> list[Params]:
    return [
        {"number": r["number"]}
        for r in rows(db, "SELECT number FROM orders WHERE status IN ('pending', 'processing') ORDER BY id")
    ]


def cancel_order(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    steps = [*_open_order(p["number"]), click("radio", "Canceled"), click("button", "Update Status"), stop()]
    check = (f"SELECT status FROM orders WHERE number = '{p['number']}'", [["canceled"]])
    return _task(db_eval([check]), steps, {"number": p["number"]})


def comment_order(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    comment = COMMENTS[int(p["number"]) % len(COMMENTS)]
    steps = [
        *_open_order(p["number"]),
        type_("textbox", "Comment", comment),
        click("button", "Submit Comment"),
        stop(),
    ]
    page = [
        {
            "url": f"{ADMIN}/orders/{p['number']}",
            "locator": "",
            "required_contents": {"must_include": [comment]},
        }
    ]
    check = (
        "SELECT c.body FROM order_comments c JOIN orders o ON o.id = c.order_id"
        f" WHERE o.number = '{p['number']}'",
        [[comment]],
    )
    return _task(db_eval([check], program_html=page), steps, {"number": p["number"], "comment": comment})


def change_email(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    c, name = _customer(db, p)
    email = f"{c['first_name']}.{c['last_name']}@mail.test".lower()
    steps = [
        *_open_customer(name),
        type_("textbox", "Email", email),
        click("button", "Save Customer"),
        stop(),
    ]
    check = (f"SELECT email FROM customers WHERE id = {c['id']}", [[email]])
    return _task(db_eval([check]), steps, {"name": name, "email": email})


TEMPLATES = [
    Template(
        "admin_bestseller",
        CATEGORY,
        "What is the top-1 best-selling product in {{year}}?",
        _years_with_unique_top,
        bestseller,
    ),
    Template(
        "admin_status_count",
        CATEGORY,
        "How many orders have the status {{status}}?",
        lambda db: [{"status": s} for s in STATUSES],
        status_count,
    ),
    Template(
        "admin_status_url",
        CATEGORY,
        "Show me all orders with the status {{status}}",
        lambda db: [{"status": s} for s in STATUSES],
        status_url,
    ),
    Template(
        "admin_customer_email",
        CATEGORY,
        "What is the email address of the customer {{name}}?",
        _customers,
        customer_email,
    ),
    Template(
        "admin_customer_orders",
        CATEGORY,
        "How many orders has the customer {{name}} placed?",
        _customers_with_orders,
        customer_orders,
    ),
    Template(
        "admin_order_customer", CATEGORY, "Which customer placed order #{{number}}?", _orders, order_customer
    ),
    Template(
        "admin_order_total", CATEGORY, "What is the grand total of order #{{number}}?", _orders, order_total
    ),
    Template(
        "admin_month_revenue",
        CATEGORY,
        "What was the revenue of orders not canceled in {{month}}?",
        _months,
        month_revenue,
    ),
    Template(
        "admin_lifetime_sales",
        CATEGORY,
        "What are the store's lifetime sales?",
        lambda db: [{}],
        lifetime_sales,
    ),
    Template(
        "admin_change_price",
        CATEGORY,
        "Change the price of {{product}} to {{price}}",
        _products,
        change_price,
    ),
    Template(
        "admin_set_stock",
        CATEGORY,
        "Set the stock quantity of {{product}} to {{stock}}",
        _products,
        set_stock,
    ),
    Template(
        "admin_disable_product",
        CATEGORY,
        "Disable the product {{product}}",
        lambda db: [{"id": r["id"]} for r in rows(db, "SELECT id FROM products WHERE enabled ORDER BY id")],
        disable_product,
    ),
    Template("admin_cancel_order", CATEGORY, "Cancel order #{{number}}", _open_orders, cancel_order),
    Template(
        "admin_comment_order",
        CATEGORY,
        "Add the comment '{{comment}}' to order #{{number}}",
        _orders,
        comment_order,
    ),
    Template(
        "admin_change_email",
        CATEGORY,
        "Change the email address of the customer {{name}} to {{email}}",
        _customers,
        change_email,
    ),
]
