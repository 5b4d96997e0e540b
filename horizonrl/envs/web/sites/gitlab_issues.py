"""The code-hosting site's issues (list, view, create, close/reopen, comment) and merge requests."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from horizonrl.envs.web.sites.common import database, form_data, one, page_of, redirect
from horizonrl.envs.web.sites.data import TODAY
from horizonrl.envs.web.sites.gitlab_common import (
    ISSUE_STATES,
    MR_STATES,
    USER,
    bad,
    base_url,
    project_members,
    project_row,
    tabs,
    view,
)
from horizonrl.envs.web.sites.html import (
    esc,
    form,
    link,
    page_number,
    pager,
    radios,
    table,
    textbox,
    url,
)
from horizonrl.envs.web.sites.words import LABELS


def issues(request: Request) -> Response:
    state = request.query_params.get("state", "opened")
    state = state if state in ISSUE_STATES else "opened"
    label = request.query_params.get("label", "")
    label = label if label in LABELS else ""
    n = page_number(request.query_params.get("page"))
    with database(request) as db:
        p = project_row(db, request)
        where = (
            "i.project_id = ?"
            + ("" if state == "all" else " AND i.state = ?")
            + (" AND (',' || i.labels || ',') LIKE ?" if label else "")
        )
        args: list = [p["id"]] + ([] if state == "all" else [state]) + ([f"%,{label},%"] if label else [])
        count, rows = page_of(
            db,
            f"SELECT COUNT(*) FROM issues i WHERE {where}",
            "SELECT i.*, a.username AS author, s.username AS assignee FROM issues i"
            " JOIN gl_users a ON a.id = i.author_id LEFT JOIN gl_users s ON s.id = i.assignee_id"
            f" WHERE {where} ORDER BY i.iid DESC",
            args,
            n,
        )
    base = base_url(p)
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
        tabs(p) + f"<p>{link(f'{base}/-/issues/new', 'New issue')}</p><p>Showing: {esc(shown)}. {states}</p>"
        f"<p>{labels}</p>"
        + table(["ID", "Title", "Labels", "Author", "Assignee", "Created"], cells)
        + pager(f"{base}/-/issues", n, count, state=state if state != "opened" else None, label=label)
    )
    return view(f"Issues · {p['namespace']} / {p['name']}", body)


def issue(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
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
    action = f"{base_url(p)}/-/issues/{i['iid']}"
    toggle = "Close issue" if i["state"] == "opened" else "Reopen issue"
    items = "".join(
        f"<li>{esc(nt['username'])} ({esc(nt['created'])}): {esc(nt['body'])}</li>" for nt in notes
    )
    body = (
        tabs(p) + f"<p>Status: {'Open' if i['state'] == 'opened' else 'Closed'}</p>"
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
    return view(f"{i['title']} (#{i['iid']})", body, flash)


def new_issue_form(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        team = project_members(db, p["id"])
    inner = (
        textbox("title", "Title", required=True)
        + textbox("body", "Description", kind="textarea")
        + textbox("labels", "Labels (comma-separated)")
        + radios(
            "assignee", "Assignee", [("", "Unassigned")] + [(u["username"], u["username"]) for u in team], ""
        )
    )
    return view(
        f"New issue · {p['namespace']} / {p['name']}",
        form(f"{base_url(p)}/-/issues/new", inner, "Create issue"),
    )


async def create_issue(request: Request) -> Response:
    data = await form_data(request)
    title = data.get("title", "").strip()
    labels = sorted({lb.strip().lower() for lb in data.get("labels", "").split(",") if lb.strip()})
    if not title:
        return bad("Issue not created", "The title is required.")
    with database(request) as db:
        p = project_row(db, request)
        assignee = None
        if data.get("assignee"):
            row = db.execute(
                "SELECT u.id FROM members m JOIN gl_users u ON u.id = m.user_id WHERE m.project_id = ?"
                " AND u.username = ?",
                (p["id"], data["assignee"]),
            ).fetchone()
            if row is None:
                return bad("Issue not created", f"{data['assignee']} is not a member of this project.")
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
    return redirect(f"{base_url(p)}/-/issues/{iid}?done=new")


async def issue_state(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        i = one(
            db, "SELECT * FROM issues WHERE project_id = ? AND iid = ?", p["id"], request.path_params["iid"]
        )
        db.execute(
            "UPDATE issues SET state = ? WHERE id = ?",
            ("closed" if i["state"] == "opened" else "opened", i["id"]),
        )
    return redirect(f"{base_url(p)}/-/issues/{i['iid']}")


async def issue_note(request: Request) -> Response:
    data = await form_data(request)
    text = data.get("body", "").strip()
    if not text:
        return bad("Comment not added", "The comment is empty.")
    with database(request) as db:
        p = project_row(db, request)
        i = one(
            db, "SELECT * FROM issues WHERE project_id = ? AND iid = ?", p["id"], request.path_params["iid"]
        )
        db.execute(
            "INSERT INTO issue_notes(issue_id, author_id, body, created) VALUES (?,?,?,?)",
            (i["id"], USER, text, TODAY),
        )
    return redirect(f"{base_url(p)}/-/issues/{i['iid']}?done=note")


def merge_requests(request: Request) -> Response:
    state = request.query_params.get("state", "opened")
    state = state if state in MR_STATES else "opened"
    with database(request) as db:
        p = project_row(db, request)
        where = "m.project_id = ?" + ("" if state == "all" else " AND m.state = ?")
        args = [p["id"]] + ([] if state == "all" else [state])
        rows = db.execute(
            f"SELECT m.*, u.username FROM merge_requests m JOIN gl_users u ON u.id = m.author_id"
            f" WHERE {where} ORDER BY m.iid DESC",
            args,
        ).fetchall()
    base = base_url(p)
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
        tabs(p)
        + f"<p>Showing: {MR_STATES[state]} merge requests ({len(rows)}). {states}</p>"
        + table(["ID", "Title", "Author", "Source branch", "State", "Created"], cells)
    )
    return view(f"Merge requests · {p['namespace']} / {p['name']}", body)


def merge_request(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        m = one(
            db,
            "SELECT m.*, u.username FROM merge_requests m JOIN gl_users u ON u.id = m.author_id"
            " WHERE m.project_id = ? AND m.iid = ?",
            p["id"],
            request.path_params["iid"],
        )
    body = (
        tabs(p) + f"<p>State: {esc(m['state'])}</p><p>Author: {esc(m['username'])}</p>"
        f"<p>Merge {esc(m['source_branch'])} into {esc(m['target_branch'])}</p>"
        f"<p>Created: {esc(m['created'])}</p>"
    )
    return view(f"{m['title']} (!{m['iid']})", body)
