"""What the code-hosting site's pages share: layout, errors, the project of a URL, its tabs."""

from __future__ import annotations

import sqlite3

from starlette.requests import Request
from starlette.responses import Response

from horizonrl.envs.web.sites.common import html, one
from horizonrl.envs.web.sites.html import (
    esc,
    link,
    page,
)

SITE = "GitLab"
USER = 1
NAV = [("/", "Projects"), ("/users/arivera", "My profile")]
ISSUE_STATES = {"opened": "Open", "closed": "Closed", "all": "All"}
MR_STATES = {"opened": "Open", "merged": "Merged", "closed": "Closed", "all": "All"}


def view(title: str, body: str, flash: str = "") -> Response:
    return html(page(SITE, title, body, NAV, flash))


def bad(title: str, message: str) -> Response:
    return html(page(SITE, title, f'<p class="error">{esc(message)}</p>', NAV), 400)


def project_row(db: sqlite3.Connection, request: Request) -> sqlite3.Row:
    return one(
        db,
        "SELECT * FROM projects WHERE namespace = ? AND name = ?",
        request.path_params["ns"],
        request.path_params["project"],
    )


def project_members(db: sqlite3.Connection, project_id: int) -> list[sqlite3.Row]:
    """The project's members (`username`, `name`, `role`), by username."""
    return db.execute(
        "SELECT u.username, u.name, m.role FROM members m JOIN gl_users u ON u.id = m.user_id"
        " WHERE m.project_id = ? ORDER BY u.username",
        (project_id,),
    ).fetchall()


def base_url(p: sqlite3.Row) -> str:
    return f"/{p['namespace']}/{p['name']}"


def tabs(p: sqlite3.Row) -> str:
    base = base_url(p)
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
