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

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from horizonrl.envs.web.sites.common import database, form_data, one, page_of, redirect
from horizonrl.envs.web.sites.gitlab_common import (
    SITE,
    bad,
    base_url,
    project_members,
    project_row,
    tabs,
    view,
)
from horizonrl.envs.web.sites.gitlab_issues import (
    create_issue,
    issue,
    issue_note,
    issue_state,
    issues,
    merge_request,
    merge_requests,
    new_issue_form,
)
from horizonrl.envs.web.sites.html import (
    esc,
    form,
    link,
    page_number,
    radios,
    searched_table,
    table,
    textbox,
)
from horizonrl.envs.web.sites.words import ROLES

__all__ = ["ROUTES", "SITE"]


def projects(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    n = page_number(request.query_params.get("page"))
    args = (f"%{q}%",)
    with database(request) as db:
        count, rows = page_of(
            db,
            "SELECT COUNT(*) FROM projects WHERE name LIKE ?",
            "SELECT * FROM projects WHERE name LIKE ? ORDER BY namespace, name",
            args,
            n,
        )
    cells = [
        (link(base_url(p), f"{p['namespace']} / {p['name']}"), esc(p["description"]), esc(p["stars"]))
        for p in rows
    ]
    headers = ["Project", "Description", "Stars"]
    return view("Projects", searched_table("/", q, "Search projects", headers, cells, n, count))


def user(request: Request) -> Response:
    with database(request) as db:
        u = one(db, "SELECT * FROM gl_users WHERE username = ?", request.path_params["username"])
        rows = db.execute(
            "SELECT p.*, m.role FROM members m JOIN projects p ON p.id = m.project_id"
            " WHERE m.user_id = ? ORDER BY p.namespace, p.name",
            (u["id"],),
        ).fetchall()
    cells = [(link(base_url(p), f"{p['namespace']} / {p['name']}"), esc(p["role"])) for p in rows]
    return view(f"{u['name']} (@{u['username']})", table(["Project", "Role"], cells, "Projects"))


def project(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        readme = db.execute(
            "SELECT content FROM repo_files WHERE project_id = ? AND path = 'README.md'", (p["id"],)
        )
        text = (readme.fetchone() or {"content": ""})["content"]
        n_open = db.execute(
            "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'", (p["id"],)
        )
        opened = n_open.fetchone()[0]
    body = (
        tabs(p) + f"<p>{esc(p['description'])}</p><p>Stars: {esc(p['stars'])}</p>"
        f"<p>Created: {esc(p['created'])}</p><p>Open issues: {opened}</p>"
        f"<h2>README.md</h2><pre>{esc(text)}</pre>"
    )
    return view(f"{p['namespace']} / {p['name']}", body)


def members(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        rows = project_members(db, p["id"])
    cells = [(link(f"/users/{m['username']}", m["username"]), esc(m["name"]), esc(m["role"])) for m in rows]
    inner = textbox("username", "Username", required=True) + radios(
        "role", "Role", [(r, r) for r in ROLES[:4]], "Developer"
    )
    body = (
        tabs(p)
        + table(["Username", "Name", "Max role"], cells, f"Members ({len(rows)})")
        + "<h2>Invite member</h2>"
        + form(f"{base_url(p)}/-/project_members", inner, "Invite")
    )
    flash = "The member was added." if request.query_params.get("done") else ""
    return view(f"Members · {p['namespace']} / {p['name']}", body, flash)


async def invite(request: Request) -> Response:
    data = await form_data(request)
    role = data.get("role", "")
    if role not in ROLES[:4]:
        return bad("Not invited", f"Choose a role: {', '.join(ROLES[:4])}.")
    with database(request) as db:
        p = project_row(db, request)
        u = db.execute(
            "SELECT id FROM gl_users WHERE username = ?", (data.get("username", "").strip(),)
        ).fetchone()
        if u is None:
            return bad("Not invited", f"No user named {data.get('username', '')!r}.")
        db.execute(
            "INSERT OR REPLACE INTO members(project_id, user_id, role) VALUES (?,?,?)",
            (p["id"], u["id"], role),
        )
    return redirect(f"{base_url(p)}/-/project_members?done=1")


def tree(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        rows = db.execute(
            "SELECT path FROM repo_files WHERE project_id = ? ORDER BY path", (p["id"],)
        ).fetchall()
    cells = [(link(f"{base_url(p)}/-/blob/main/{f['path']}", f["path"]),) for f in rows]
    return view(f"Files · {p['namespace']} / {p['name']}", tabs(p) + table(["Name"], cells))


def blob(request: Request) -> Response:
    with database(request) as db:
        p = project_row(db, request)
        f = one(
            db,
            "SELECT * FROM repo_files WHERE project_id = ? AND path = ?",
            p["id"],
            request.path_params["path"],
        )
    return view(f"{f['path']} · {p['name']}", tabs(p) + f"<pre>{esc(f['content'])}</pre>")


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
