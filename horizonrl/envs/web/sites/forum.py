"""The forum (WebArena's reddit, a Postmill site): forums, posts, comments, votes, profiles.
The logged-in user is forum user 1 (`alex_rivera`); their votes are the `votes` table.

    /?sort=&page=                  every post (sort: new, top, comments)
    /forums                        the forums, by name
    /f/{forum}?sort=&page=         a forum's posts; /f/{forum}/submit: the "Create submission" form
    /f/{forum}/{id}                a post: "Upvote" / "Downvote", its comments, "Post comment"
    /user/{username}               karma, submissions and comments of a user
"""

from __future__ import annotations

import sqlite3

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from horizonrl.envs.web.sites.common import database, form_data, html, one, page_of, redirect
from horizonrl.envs.web.sites.data import TODAY
from horizonrl.envs.web.sites.html import (
    PER_PAGE,
    esc,
    form,
    hidden,
    link,
    page,
    page_number,
    pager,
    table,
    textbox,
)

SITE = "Postmill"
USER = 1
NAV = [("/", "Home"), ("/forums", "Forums"), ("/user/alex_rivera", "My profile")]
SORTS = {
    "new": ("New", "p.created DESC, p.id DESC"),
    "top": ("Top", "p.score DESC, p.id"),
    "comments": ("Most commented", "n_comments DESC, p.id"),
}
_POSTS = (
    "SELECT p.*, f.name AS forum, u.username,"
    " (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id) AS n_comments"
    " FROM posts p JOIN forums f ON f.id = p.forum_id JOIN forum_users u ON u.id = p.user_id"
)


def _view(title: str, body: str, flash: str = "") -> Response:
    return html(page(SITE, title, body, NAV, flash))


def _sort(request: Request) -> str:
    sort = request.query_params.get("sort", "new")
    return sort if sort in SORTS else "new"


def _listing(db: sqlite3.Connection, request: Request, path: str, where: str, args: tuple) -> str:
    sort = _sort(request)
    n = page_number(request.query_params.get("page"))
    count, rows = page_of(
        db,
        f"SELECT COUNT(*) FROM posts p WHERE {where}",
        f"{_POSTS} WHERE {where} ORDER BY {SORTS[sort][1]}",
        args,
        n,
    )
    sorts = " ".join(
        link(f"{path}?sort={k}", f"Sort by {text}") for k, (text, _) in SORTS.items() if k != sort
    )
    cells = [
        (
            link(f"/f/{p['forum']}/{p['id']}", p["title"]),
            esc(p["score"]),
            link(f"/user/{p['username']}", p["username"]),
            link(f"/f/{p['forum']}", f"f/{p['forum']}"),
            esc(p["created"]),
            esc(p["n_comments"]),
        )
        for p in rows
    ]
    return (
        f"<p>Sorted by {SORTS[sort][0]}. {sorts}</p>"
        + table(["Title", "Score", "Submitted by", "Forum", "Date", "Comments"], cells)
        + pager(path, n, count, sort=sort if sort != "new" else None)
    )


def front(request: Request) -> Response:
    with database(request) as db:
        body = _listing(db, request, "/", "1", ())
    return _view("All posts", body)


def forums(request: Request) -> Response:
    with database(request) as db:
        rows = db.execute(
            "SELECT f.*, (SELECT COUNT(*) FROM posts p WHERE p.forum_id = f.id) AS n FROM forums f"
            " ORDER BY f.name"
        ).fetchall()
    cells = [
        (link(f"/f/{f['name']}", f["name"]), esc(f["title"]), esc(f["description"]), esc(f["n"]))
        for f in rows
    ]
    return _view("Forums", table(["Forum", "Title", "Description", "Submissions"], cells))


def forum(request: Request) -> Response:
    with database(request) as db:
        f = one(db, "SELECT * FROM forums WHERE name = ?", request.path_params["forum"])
        body = f"<p>{esc(f['description'])}</p><p>{link('/f/' + f['name'] + '/submit', 'Submit a post')}</p>"
        body += _listing(db, request, f"/f/{f['name']}", "p.forum_id = ?", (f["id"],))
    return _view(f"f/{f['name']}", body)


def _post(db: sqlite3.Connection, request: Request) -> sqlite3.Row:
    """The post of a `/f/{forum}/{id}` URL, or a 404 page when that forum has no such post."""
    return one(
        db,
        f"{_POSTS} WHERE p.id = ? AND f.name = ?",
        request.path_params["id"],
        request.path_params["forum"],
    )


def _post_vote(db: sqlite3.Connection, post_id: int) -> sqlite3.Row | None:
    """The user's vote on a post (its `value` is 1 or -1), or None when they have not voted."""
    return db.execute(
        "SELECT value FROM votes WHERE target = 'post' AND target_id = ?", (post_id,)
    ).fetchone()


def post(request: Request) -> Response:
    with database(request) as db:
        p = _post(db, request)
        comments = db.execute(
            "SELECT c.*, u.username FROM comments c JOIN forum_users u ON u.id = c.user_id"
            " WHERE c.post_id = ? ORDER BY c.created, c.id",
            (p["id"],),
        ).fetchall()
        vote = _post_vote(db, p["id"])
    mine = {1: "You upvoted this post.", -1: "You downvoted this post."}.get(vote["value"] if vote else 0, "")
    action = f"/f/{p['forum']}/{p['id']}"
    body = (
        f"<p>Submitted by {link('/user/' + p['username'], p['username'])}"
        f" in {link('/f/' + p['forum'], 'f/' + p['forum'])}"
        f" on {esc(p['created'])}</p><p>Score: {esc(p['score'])}</p><p>{esc(mine)}</p><p>{esc(p['body'])}</p>"
        + form(f"{action}/vote", hidden("value", 1), "Upvote")
        + form(f"{action}/vote", hidden("value", -1), "Downvote")
    )
    items = "".join(
        f"<li><p>{link('/user/' + c['username'], c['username'])} ({esc(c['score'])} points,"
        f" {esc(c['created'])})</p>"
        f"<p>{esc(c['body'])}</p></li>"
        for c in comments
    )
    body += f'<h2>{len(comments)} comments</h2><ul aria-label="Comments">{items}</ul>'
    body += form(
        f"{action}/comment", textbox("body", "Comment", kind="textarea", required=True), "Post comment"
    )
    flash = {"comment": "Your comment was posted.", "post": "Your submission was created."}.get(
        request.query_params.get("done", ""), ""
    )
    return _view(p["title"], body, flash)


async def vote(request: Request) -> Response:
    data = await form_data(request)
    value = {"1": 1, "-1": -1}.get(data.get("value", ""))
    if value is None:
        return html(page(SITE, "Vote not counted", "<p>A vote is 1 or -1.</p>", NAV), 400)
    with database(request) as db:
        p = _post(db, request)
        old = _post_vote(db, p["id"])
        delta = value - (old["value"] if old else 0)
        db.execute(
            "INSERT OR REPLACE INTO votes(target, target_id, value) VALUES ('post', ?, ?)", (p["id"], value)
        )
        db.execute("UPDATE posts SET score = score + ? WHERE id = ?", (delta, p["id"]))
    return redirect(f"/f/{p['forum']}/{p['id']}")


async def comment(request: Request) -> Response:
    data = await form_data(request)
    text = data.get("body", "").strip()
    if not text:
        return html(page(SITE, "Comment not posted", "<p>The comment is empty.</p>", NAV), 400)
    with database(request) as db:
        p = _post(db, request)
        db.execute(
            "INSERT INTO comments(post_id, user_id, body, score, created) VALUES (?,?,?,?,?)",
            (p["id"], USER, text, 1, f"{TODAY} 12:00"),
        )
    return redirect(f"/f/{p['forum']}/{p['id']}?done=comment")


def submit_form(request: Request) -> Response:
    with database(request) as db:
        f = one(db, "SELECT * FROM forums WHERE name = ?", request.path_params["forum"])
    inner = textbox("title", "Title", required=True) + textbox("body", "Body", kind="textarea", required=True)
    return _view(
        f"Create submission in f/{f['name']}", form(f"/f/{f['name']}/submit", inner, "Create submission")
    )


async def submit(request: Request) -> Response:
    data = await form_data(request)
    title, text = data.get("title", "").strip(), data.get("body", "").strip()
    if not title or not text:
        return html(page(SITE, "Not submitted", "<p>A submission needs a title and a body.</p>", NAV), 400)
    with database(request) as db:
        f = one(db, "SELECT * FROM forums WHERE name = ?", request.path_params["forum"])
        cur = db.execute(
            "INSERT INTO posts(forum_id, user_id, title, body, score, created) VALUES (?,?,?,?,?,?)",
            (f["id"], USER, title, text, 1, f"{TODAY} 12:00"),
        )
    return redirect(f"/f/{f['name']}/{cur.lastrowid}?done=post")


def user(request: Request) -> Response:
    with database(request) as db:
        u = one(db, "SELECT * FROM forum_users WHERE username = ?", request.path_params["username"])
        posts = db.execute(
            f"{_POSTS} WHERE p.user_id = ? ORDER BY p.created DESC, p.id DESC", (u["id"],)
        ).fetchall()
        comments = db.execute(
            "SELECT c.*, p.title, f.name AS forum FROM comments c JOIN posts p ON p.id = c.post_id"
            " JOIN forums f ON f.id = p.forum_id WHERE c.user_id = ? ORDER BY c.created DESC, c.id DESC",
            (u["id"],),
        ).fetchall()
    karma = sum(p["score"] for p in posts) + sum(c["score"] for c in comments)
    post_cells = [
        (link(f"/f/{p['forum']}/{p['id']}", p["title"]), esc(p["score"]), esc(p["created"])) for p in posts
    ]
    comment_cells = [
        (esc(c["body"]), link(f"/f/{c['forum']}/{c['post_id']}", c["title"]), esc(c["score"]))
        for c in comments[:PER_PAGE]
    ]
    body = (
        f"<p>Joined {esc(u['created'])}</p><p>Karma: {karma}</p>"
        + table(["Title", "Score", "Date"], post_cells, f"Submissions ({len(posts)})")
        + table(
            ["Comment", "On", "Score"], comment_cells, f"Comments ({len(comments)}, latest {PER_PAGE} shown)"
        )
    )
    return _view(u["username"], body)


ROUTES = [
    Route("/", front),
    Route("/forums", forums),
    Route("/f/{forum}", forum),
    Route("/f/{forum}/submit", submit_form),
    Route("/f/{forum}/submit", submit, methods=["POST"]),
    Route("/f/{forum}/{id:int}", post),
    Route("/f/{forum}/{id:int}/{slug}", post),
    Route("/f/{forum}/{id:int}/vote", vote, methods=["POST"]),
    Route("/f/{forum}/{id:int}/comment", comment, methods=["POST"]),
    Route("/user/{username}", user),
]
