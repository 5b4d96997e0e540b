"""The code-hosting site (WebArena's gitlab): projects, issues, merge requests, members, files.
The logged-in user is gitlab user 1 (`arivera`).

    /?q=&page=                                  projects (search by name)
    /users/{username}                           a user's projects
    /{ns}/{project}                             README, stars, links to the sections below
    /{ns}/{project}/-/issues?state=&label=&page=   issues; /-/issues/new: the "Create issue" form
    /{ns}/{project}/-/issues/{iid}              an issue: notes, "Comment", "Close issue" / "Reopen issue"
    /{ns}/{project}/-/merge_requests?state=     merge requests; /-/merge_requests/{iid}
    /{ns}/{project}/-/project_members           members and roles, the "Invite" form
    /{ns}/{project}/-/tree/main, /-/blob/main/{path}   files
"""

from __future__ import annotations

import sqlite3

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from horizonrl.envs.web.sites.common import database, form_data, html, one, redirect
from horizonrl.envs.web.sites.data import TODAY
from horizonrl.envs.web.sites.html import (
    PER_PAGE,
    esc,
    form,
    link,
    page,
    page_number,
    pager,
    radios,
    search_form,
    table,
    textbox,
    url,
)
from horizonrl.envs.web.sites.words import LABELS, ROLES

SITE = "GitLab"
USER = 1
NAV = [("/", "Projects"), ("/users/arivera", "My profile")]
ISSUE_STATES = {"opened": "Open", "closed": "Closed", "all": "All"}
MR_STATES = {"opened": "Open", "merged": "Merged", "closed": "Closed", "all": "All"}


def _view(title: str, body: str, flash: str = "") -> Response:
    return html(page(SITE, title, body, NAV, flash))


def _bad(title: str, message: str) -> Response:
    return html(page(SITE, title, f'<p class="error">{esc(message)}</p>', NAV), 400)


def _project(db: sqlite3.Connection, request: Request) -> sqlite3.Row:
    return one(
        db,
        "SELECT * FROM projects WHERE namespace = ? AND name = ?",
        request.path_params["ns"],
        request.path_params["project"],
    )


def _base(p: sqlite3.Row) -> str:
    return f"/{p['namespace']}/{p['name']}"


def _tabs(p: sqlite3.Row) -> str:
    base = _base(p)
    return (
        "<p>"
        + " ".join(
            link(base + path, text)
            for path, text in (
                ("", "Project overview"),
                ("/-/tree/main", "Repository"),
                ("/-/issues", "Issues"),
                ("/-/merge_requests", "Merge requests"),
                ("/-/project_members", "Members"),
            )
        )
        + "</p>"
    )


def projects(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    args = (f"%{q}%",)
    with database(request) as db:
        count = db.execute("SELECT COUNT(*) FROM projects WHERE name LIKE ?", args).fetchone()[0]
        rows = db.execute(
            "SELECT * FROM projects WHERE name LIKE ? ORDER BY namespace, name LIMIT ? OFFSET ?",
            (*args, PER_PAGE, (n - 1) * PER_PAGE),
        ).fetchall()
    cells = [
        (link(_base(p), f"{p['namespace']} / {p['name']}"), esc(p["description"]), esc(p["stars"]))
        for p in rows
    ]
    body = (
        search_form("/", q, label="Search projects")
        + table(["Project", "Description", "Stars"], cells)
        + pager("/", n, count, q=q)
    )
    return _view("Projects", body)


def user(request: Request) -> Response:
    with database(request) as db:
        u = one(db, "SELECT * FROM gl_users WHERE username = ?", request.path_params["username"])
        rows = db.execute(
            "SELECT p.*, m.role FROM members m JOIN projects p ON p.id = m.project_id"
            " WHERE m.user_id = ? ORDER BY p.namespace, p.name",
            (u["id"],),
        ).fetchall()
    cells = [(link(_base(p), f"{p['namespace']} / {p['name']}"), esc(p["role"])) for p in rows]
    return _view(f"{u['name']} (@{u['username']})", table(["Project", "Role"], cells, "Projects"))


def project(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        readme = db.execute(
            "SELECT content FROM repo_files WHERE project_id = ? AND path = 'README.md'", (p["id"],)
        )
        text = (readme.fetchone() or {"content": ""})["content"]
        n_open = db.execute(
            "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'", (p["id"],)
        )
        opened = n_open.fetchone()[0]
    body = (
        _tabs(p) + f"<p>{esc(p['description'])}</p><p>Stars: {esc(p['stars'])}</p>"
        f"<p>Created: {esc(p['created'])}</p><p>Open issues: {opened}</p>"
        f"<h2>README.md</h2><pre>{esc(text)}</pre>"
    )
    return _view(f"{p['namespace']} / {p['name']}", body)


def issues(request: Request) -> Response:
    state = request.query_params.get("state", "opened")
    state = state if state in ISSUE_STATES else "opened"
    label = request.query_params.get("label", "")
    label = label if label in LABELS else ""
    n = page_number(request.query_params.get("page"))
    with database(request) as db:
        p = _project(db, request)
        where = (
            "i.project_id = ?"
            + ("" if state == "all" else " AND i.state = ?")
            + (" AND (',' || i.labels || ',') LIKE ?" if label else "")
        )
        args: list = [p["id"]] + ([] if state == "all" else [state]) + ([f"%,{label},%"] if label else [])
        count = db.execute(f"SELECT COUNT(*) FROM issues i WHERE {where}", args).fetchone()[0]
        rows = db.execute(
            "SELECT i.*, a.username AS author, s.username AS assignee FROM issues i"
            " JOIN gl_users a ON a.id = i.author_id LEFT JOIN gl_users s ON s.id = i.assignee_id"
            f" WHERE {where} ORDER BY i.iid DESC LIMIT ? OFFSET ?",
            [*args, PER_PAGE, (n - 1) * PER_PAGE],
        ).fetchall()
    base = _base(p)
    states = " ".join(
        link(url(f"{base}/-/issues", state=s, label=label), f"{t} issues")
        for s, t in ISSUE_STATES.items()
        if s != state
    )
    labels = " ".join(
        link(url(f"{base}/-/issues", state=state, label=lb), f"Label: {lb}") for lb in LABELS if lb != label
    )
    cells = [
        (
            f"#{i['iid']}",
            link(f"{base}/-/issues/{i['iid']}", i["title"], label=f"#{i['iid']} {i['title']}"),
            esc(i["labels"].replace(",", ", ")),
            esc(i["author"]),
            esc(i["assignee"] or ""),
            esc(i["created"]),
        )
        for i in rows
    ]
    shown = f"{ISSUE_STATES[state]} issues" + (f" labelled {label}" if label else "")
    body = (
        _tabs(p) + f"<p>{link(f'{base}/-/issues/new', 'New issue')}</p><p>Showing: {esc(shown)}. {states}</p>"
        f"<p>{labels}</p>"
        + table(["ID", "Title", "Labels", "Author", "Assignee", "Created"], cells)
        + pager(f"{base}/-/issues", n, count, state=state if state != "opened" else None, label=label)
    )
    return _view(f"Issues · {p['namespace']} / {p['name']}", body)


def issue(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        i = one(
            db,
            "SELECT i.*, a.username AS author, s.username AS assignee FROM issues i"
            " JOIN gl_users a ON a.id = i.author_id LEFT JOIN gl_users s ON s.id = i.assignee_id"
            " WHERE i.project_id = ? AND i.iid = ?",
            p["id"],
            request.path_params["iid"],
        )
        notes = db.execute(
            "SELECT n.*, u.username FROM issue_notes n JOIN gl_users u ON u.id = n.author_id"
            " WHERE n.issue_id = ? ORDER BY n.id",
            (i["id"],),
        ).fetchall()
    action = f"{_base(p)}/-/issues/{i['iid']}"
    toggle = "Close issue" if i["state"] == "opened" else "Reopen issue"
    items = "".join(
        f"<li>{esc(nt['username'])} ({esc(nt['created'])}): {esc(nt['body'])}</li>" for nt in notes
    )
    body = (
        _tabs(p) + f"<p>Status: {'Open' if i['state'] == 'opened' else 'Closed'}</p>"
        f"<p>Opened by {esc(i['author'])} on {esc(i['created'])}</p>"
        f"<p>Assignee: {esc(i['assignee'] or 'None')}</p>"
        f"<p>Labels: {esc(i['labels'].replace(',', ', ') or 'None')}</p><p>{esc(i['body'])}</p>"
        + form(f"{action}/state", "", toggle)
        + f'<h2>Activity</h2><ul aria-label="Activity">{items}</ul>'
        + form(f"{action}/notes", textbox("body", "Comment", kind="textarea", required=True), "Comment")
    )
    flash = {"new": "The issue was created.", "note": "Your comment was added."}.get(
        request.query_params.get("done", ""), ""
    )
    return _view(f"{i['title']} (#{i['iid']})", body, flash)


def new_issue_form(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        team = db.execute(
            "SELECT u.username FROM members m JOIN gl_users u ON u.id = m.user_id"
            " WHERE m.project_id = ? ORDER BY u.username",
            (p["id"],),
        ).fetchall()
    inner = (
        textbox("title", "Title", required=True)
        + textbox("body", "Description", kind="textarea")
        + textbox("labels", "Labels (comma-separated)")
        + radios(
            "assignee", "Assignee", [("", "Unassigned")] + [(u["username"], u["username"]) for u in team], ""
        )
    )
    return _view(
        f"New issue · {p['namespace']} / {p['name']}", form(f"{_base(p)}/-/issues/new", inner, "Create issue")
    )


async def create_issue(request: Request) -> Response:
    data = await form_data(request)
    title = data.get("title", "").strip()
    labels = sorted({lb.strip().lower() for lb in data.get("labels", "").split(",") if lb.strip()})
    if not title:
        return _bad("Issue not created", "The title is required.")
    with database(request) as db:
        p = _project(db, request)
        assignee = None
        if data.get("assignee"):
            row = db.execute(
                "SELECT u.id FROM members m JOIN gl_users u ON u.id = m.user_id WHERE m.project_id = ?"
                " AND u.username = ?",
                (p["id"], data["assignee"]),
            ).fetchone()
            if row is None:
                return _bad("Issue not created", f"{data['assignee']} is not a member of this project.")
            assignee = row["id"]
        iid = db.execute(
            "SELECT COALESCE(MAX(iid), 0) + 1 FROM issues WHERE project_id = ?", (p["id"],)
        ).fetchone()[0]
        db.execute(
            "INSERT INTO issues(project_id, iid, title, body, author_id, assignee_id, state, labels, created)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (
                p["id"],
                iid,
                title,
                data.get("body", "").strip(),
                USER,
                assignee,
                "opened",
                ",".join(labels),
                TODAY,
            ),
        )
    return redirect(f"{_base(p)}/-/issues/{iid}?done=new")


async def issue_state(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        i = one(
            db, "SELECT * FROM issues WHERE project_id = ? AND iid = ?", p["id"], request.path_params["iid"]
        )
        db.execute(
            "UPDATE issues SET state = ? WHERE id = ?",
            ("closed" if i["state"] == "opened" else "opened", i["id"]),
        )
    return redirect(f"{_base(p)}/-/issues/{i['iid']}")


async def issue_note(request: Request) -> Response:
    data = await form_data(request)
    text = data.get("body", "").strip()
    if not text:
        return _bad("Comment not added", "The comment is empty.")
    with database(request) as db:
        p = _project(db, request)
        i = one(
            db, "SELECT * FROM issues WHERE project_id = ? AND iid = ?", p["id"], request.path_params["iid"]
        )
        db.execute(
            "INSERT INTO issue_notes(issue_id, author_id, body, created) VALUES (?,?,?,?)",
            (i["id"], USER, text, TODAY),
        )
    return redirect(f"{_base(p)}/-/issues/{i['iid']}?done=note")


def merge_requests(request: Request) -> Response:
    state = request.query_params.get("state", "opened")
    state = state if state in MR_STATES else "opened"
    with database(request) as db:
        p = _project(db, request)
        where = "m.project_id = ?" + ("" if state == "all" else " AND m.state = ?")
        args = [p["id"]] + ([] if state == "all" else [state])
        rows = db.execute(
            f"SELECT m.*, u.username FROM merge_requests m JOIN gl_users u ON u.id = m.author_id"
            f" WHERE {where} ORDER BY m.iid DESC",
            args,
        ).fetchall()
    base = _base(p)
    states = " ".join(
        link(url(f"{base}/-/merge_requests", state=s), f"{t} merge requests")
        for s, t in MR_STATES.items()
        if s != state
    )
    cells = [
        (
            f"!{m['iid']}",
            link(f"{base}/-/merge_requests/{m['iid']}", m["title"], label=f"!{m['iid']} {m['title']}"),
            esc(m["username"]),
            esc(m["source_branch"]),
            esc(m["state"]),
            esc(m["created"]),
        )
        for m in rows
    ]
    body = (
        _tabs(p)
        + f"<p>Showing: {MR_STATES[state]} merge requests ({len(rows)}). {states}</p>"
        + table(["ID", "Title", "Author", "Source branch", "State", "Created"], cells)
    )
    return _view(f"Merge requests · {p['namespace']} / {p['name']}", body)


def merge_request(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        m = one(
            db,
            "SELECT m.*, u.username FROM merge_requests m JOIN gl_users u ON u.id = m.author_id"
            " WHERE m.project_id = ? AND m.iid = ?",
            p["id"],
            request.path_params["iid"],
        )
    body = (
        _tabs(p) + f"<p>State: {esc(m['state'])}</p><p>Author: {esc(m['username'])}</p>"
        f"<p>Merge {esc(m['source_branch'])} into {esc(m['target_branch'])}</p>"
        f"<p>Created: {esc(m['created'])}</p>"
    )
    return _view(f"{m['title']} (!{m['iid']})", body)


def members(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        rows = db.execute(
            "SELECT u.username, u.name, m.role FROM members m JOIN gl_users u ON u.id = m.user_id"
            " WHERE m.project_id = ? ORDER BY u.username",
            (p["id"],),
        ).fetchall()
    cells = [(link(f"/users/{m['username']}", m["username"]), esc(m["name"]), esc(m["role"])) for m in rows]
    inner = textbox("username", "Username", required=True) + radios(
        "role", "Role", [(r, r) for r in ROLES[:4]], "Developer"
    )
    body = (
        _tabs(p)
        + table(["Username", "Name", "Max role"], cells, f"Members ({len(rows)})")
        + "<h2>Invite member</h2>"
        + form(f"{_base(p)}/-/project_members", inner, "Invite")
    )
    flash = "The member was added." if request.query_params.get("done") else ""
    return _view(f"Members · {p['namespace']} / {p['name']}", body, flash)


async def invite(request: Request) -> Response:
    data = await form_data(request)
    role = data.get("role", "")
    if role not in ROLES[:4]:
        return _bad("Not invited", f"Choose a role: {', '.join(ROLES[:4])}.")
    with database(request) as db:
        p = _project(db, request)
        u = db.execute(
            "SELECT id FROM gl_users WHERE username = ?", (data.get("username", "").strip(),)
        ).fetchone()
        if u is None:
            return _bad("Not invited", f"No user named {data.get('username', '')!r}.")
        db.execute(
            "INSERT OR REPLACE INTO members(project_id, user_id, role) VALUES (?,?,?)",
            (p["id"], u["id"], role),
        )
    return redirect(f"{_base(p)}/-/project_members?done=1")


def tree(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        rows = db.execute(
            "SELECT path FROM repo_files WHERE project_id = ? ORDER BY path", (p["id"],)
        ).fetchall()
    cells = [(link(f"{_base(p)}/-/blob/main/{f['path']}", f["path"]),) for f in rows]
    return _view(f"Files · {p['namespace']} / {p['name']}", _tabs(p) + table(["Name"], cells))


def blob(request: Request) -> Response:
    with database(request) as db:
        p = _project(db, request)
        f = one(
            db,
            "SELECT * FROM repo_files WHERE project_id = ? AND path = ?",
            p["id"],
            request.path_params["path"],
        )
    return _view(f"{f['path']} · {p['name']}", _tabs(p) + f"<pre>{esc(f['content'])}</pre>")


ROUTES = [
    Route("/", projects),
    Route("/users/{username}", user),
    Route("/{ns}/{project}", project),
    Route("/{ns}/{project}/-/issues", issues),
    Route("/{ns}/{project}/-/issues/new", new_issue_form),
    Route("/{ns}/{project}/-/issues/new", create_issue, methods=["POST"]),
    Route("/{ns}/{project}/-/issues/{iid:int}", issue),
    Route("/{ns}/{project}/-/issues/{iid:int}/state", issue_state, methods=["POST"]),
    Route("/{ns}/{project}/-/issues/{iid:int}/notes", issue_note, methods=["POST"]),
    Route("/{ns}/{project}/-/merge_requests", merge_requests),
    Route("/{ns}/{project}/-/merge_requests/{iid:int}", merge_request),
    Route("/{ns}/{project}/-/project_members", members),
    Route("/{ns}/{project}/-/project_members", invite, methods=["POST"]),
    Route("/{ns}/{project}/-/tree/main", tree),
    Route("/{ns}/{project}/-/blob/main/{path:path}", blob),
]
