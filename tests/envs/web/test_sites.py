"""The web family's sites over real HTTP: pages, pagination, forms, tenants, admin routes, and the
sites' child process (gone after stop and after its parent is killed)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from horizonrl.envs.web.sites import (
    ADMIN_HEADER,
    SITE_NAMES,
    TENANT_HEADER,
    RunningSites,
    SitesError,
    start_sites,
)

PAGES = {
    "shopping": ["/", "/category/clothing", "/search?q=tee", "/product/5", "/cart", "/orders", "/account"],
    "shopping_admin": [
        "/",
        "/orders",
        "/orders/000000010",
        "/products",
        "/products/3/edit",
        "/customers",
        "/customers/5",
        "/reviews",
        "/reports/bestsellers?year=2023",
        "/reports/sales",
    ],
    "reddit": ["/", "/?sort=top", "/forums", "/f/books", "/f/books/submit", "/user/alex_rivera"],
    "gitlab": ["/", "/users/arivera"],
    "map": ["/", "/search?q=cafe", "/place/1", "/directions?from=1"],
}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (killed, not yet reaped by its dead parent's reaper) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_every_site_serves_html_pages_without_select_elements(sites: RunningSites) -> None:
    assert set(sites.urls) == set(SITE_NAMES)
    with httpx.Client() as client:
        for site, paths in PAGES.items():
            for path in paths:
                r = client.get(sites.urls[site] + path)
                assert r.status_code == 200, (site, path)
                assert r.headers["content-type"].startswith("text/html")
                assert "<select" not in r.text and "<script" not in r.text, (site, path)
                assert "<h1>" in r.text


def test_pages_hold_20_items_with_next_and_previous_links(sites: RunningSites) -> None:
    base = sites.urls["shopping_admin"] + "/products"
    first, second = httpx.get(base).text, httpx.get(base + "?page=2").text
    assert first.count("<tr>") - 1 == 20 and second.count("<tr>") - 1 == 20
    assert ">Next page<" in first and ">Previous page<" not in first
    assert ">Previous page<" in second
    skus = lambda text: set(re.findall(r"HR-\d{4}", text))  # noqa: E731
    assert skus(first).isdisjoint(skus(second))
    n_products = sites.query("default", "SELECT COUNT(*) FROM products")[0][0]
    last = httpx.get(f"{base}?page={(n_products + 19) // 20}").text
    assert ">Next page<" not in last and f"({n_products} items)" in last


def test_a_form_post_changes_only_its_tenants_database(sites: RunningSites, tenant: str) -> None:
    other = tenant + "-other"
    sites.reset_tenant(other)
    r = httpx.post(
        sites.urls["shopping"] + "/cart/add",
        headers={TENANT_HEADER: tenant},
        data={
            "product_id": "5",
            "color": sites.query(tenant, "SELECT colors FROM products WHERE id = 5")[0][0].split(",")[0],
            "size": "M",
            "qty": "2",
        },
    )
    assert r.status_code == 303 and r.headers["location"] == "/cart?added=5"
    assert sites.query(tenant, "SELECT product_id, qty FROM cart_items") == [[5, 2]]
    assert sites.query(other, "SELECT COUNT(*) FROM cart_items") == [[0]]
    cart = httpx.get(sites.urls["shopping"] + "/cart", headers={TENANT_HEADER: tenant}).text
    assert "Proceed to Checkout" in cart
    assert "no items" in httpx.get(sites.urls["shopping"] + "/cart", headers={TENANT_HEADER: other}).text
    sites.drop_tenant(other)


def test_reset_restores_the_exact_start_state(sites: RunningSites, tenant: str) -> None:
    dump = "SELECT id, status, total_cents FROM orders ORDER BY id"
    start = sites.query(tenant, dump), sites.query(tenant, "SELECT * FROM posts ORDER BY id")
    headers = {TENANT_HEADER: tenant}
    httpx.post(
        sites.urls["shopping_admin"] + "/orders/000000010/status",
        headers=headers,
        data={"status": "canceled"},
    )
    httpx.post(
        sites.urls["reddit"] + "/f/books/submit", headers=headers, data={"title": "New", "body": "Text"}
    )
    assert sites.query(tenant, dump) != start[0]
    sites.reset_tenant(tenant)
    assert (sites.query(tenant, dump), sites.query(tenant, "SELECT * FROM posts ORDER BY id")) == start
    assert sites.query(tenant, dump) == start[0]  # the same result twice


def test_admin_routes_need_the_token_and_queries_are_read_only(sites: RunningSites, tenant: str) -> None:
    base = sites.urls["gitlab"] + f"/__horizonrl__/tenants/{tenant}"
    for method, path, kwargs in (
        ("POST", "/reset", {}),
        ("POST", "/query", {"json": {"sql": "SELECT 1"}}),
        ("DELETE", "", {}),
    ):
        assert httpx.request(method, base + path, **kwargs).status_code == 403
        assert (
            httpx.request(method, base + path, headers={ADMIN_HEADER: "wrong"}, **kwargs).status_code == 403
        )
    assert httpx.get(base + "/reset", headers={ADMIN_HEADER: sites.admin_token}).status_code == 405
    with pytest.raises(SitesError, match="readonly"):
        sites.query(tenant, "DELETE FROM orders")
    with pytest.raises(SitesError, match="HTTP 400"):
        sites.query(tenant, "SELECT nope FROM nowhere")
    assert sites.query(tenant, "SELECT COUNT(*) FROM orders") == [[400]]


def test_unknown_routes_and_bad_tenants(sites: RunningSites) -> None:
    for site in SITE_NAMES:
        assert httpx.get(sites.urls[site] + "/no/such/page/here").status_code == 404
    assert httpx.get(sites.urls["shopping"] + "/product/99999").status_code == 404
    r = httpx.get(sites.urls["shopping"] + "/", headers={TENANT_HEADER: "../etc"})
    assert r.status_code == 400 and "bad tenant token" in r.text


def test_attached_handle_from_env_reaches_the_same_sites(sites: RunningSites, tenant: str) -> None:
    attached = RunningSites.from_env({"HORIZONRL_WEB_SITES": sites.to_env()})
    assert attached is not None and attached.urls == sites.urls and attached.process is None
    assert attached.query(tenant, "SELECT COUNT(*) FROM posts") == sites.query(
        tenant, "SELECT COUNT(*) FROM posts"
    )
    attached.stop()  # no-op: the sites keep running
    assert httpx.get(sites.urls["map"] + "/").status_code == 200
    assert RunningSites.from_env({}) is None


def test_the_child_is_gone_after_stop() -> None:
    with start_sites() as running:
        assert running.pid is not None and _alive(running.pid)
    assert _wait_gone(running.pid)


@pytest.mark.parametrize("from_thread", [False, True], ids=["pdeathsig", "watchdog"])
def test_the_child_dies_when_its_parent_is_killed(from_thread: bool) -> None:
    """From the main thread PR_SET_PDEATHSIG ends the child; from another thread (where that signal
    would follow the thread, so it is not set) the parent-pid watchdog does."""
    start = "start_sites()" if not from_thread else "ThreadPoolExecutor(1).submit(start_sites).result()"
    script = (
        "import time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from horizonrl.envs.web.sites import start_sites\n"
        f"s = {start}\n"
        "print(s.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert _wait_gone(child), "the sites process outlived its killed parent"


def test_a_taken_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SitesError, match="before it bound its ports"):
            start_sites(ports={"reddit": taken.getsockname()[1]})


def _as_in_a_terminal() -> None:
    """Ctrl-C's default disposition in the child: a suite started in the background (`cmd &` in a
    script, nohup) runs with SIGINT ignored, which a child inherits, and Python then installs no
    KeyboardInterrupt handler, so the CLI would never see the test's SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_cli_web_sites_serves_until_interrupted() -> None:
    cmd = [sys.executable, "-m", "horizonrl.cli", "web-sites", "--port-base", "0"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal) as proc:
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline() for _ in range(7)]
            urls = dict(line.split()[:2] for line in lines[:5])
            assert set(urls) == set(SITE_NAMES)
            assert lines[6].startswith("WebArena's variables: export SHOPPING=")
            assert "One Stop Market" in httpx.get(urls["shopping"] + "/").text
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) in (0, 130)
        finally:  # a failed assertion must not leave the server running into the next tests
            if proc.poll() is None:
                proc.kill()
