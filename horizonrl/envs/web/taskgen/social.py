"""GitLab and forum (reddit) tasks: issues, licenses, merge requests, members; posts, votes,
comments, submissions."""

from __future__ import annotations

import sqlite3
from typing import Any

from horizonrl.envs.web.sites.words import LABELS
from horizonrl.envs.web.taskgen.base import (
    Params,
    Template,
    click,
    db_eval,
    next_pages,
    rows,
    scalar,
    stop,
    string_eval,
    type_,
    url_eval,
)

GITLAB, REDDIT = "__GITLAB__", "__REDDIT__"
CATEGORY = "gitlab+reddit"
ISSUE_TITLES = [
    "Crash when the config file is empty",
    "Typo in the install guide",
    "Add a --verbose flag",
    "Slow start-up on large repositories",
    "Support Python 3.13",
]
COMMENTS = ["Thanks, this was really helpful!", "I had the same problem last week.", "Great write-up."]
POST_TITLES = ["Weekend plans thread", "Looking for recommendations", "First post here, hello!"]


def _gl(eval_: dict, solution: list, show: Params) -> dict[str, Any]:
    return {"sites": ["gitlab"], "start_url": GITLAB, "eval": eval_, "solution": solution, "show": show}


def _rd(eval_: dict, solution: list, show: Params) -> dict[str, Any]:
    return {"sites": ["reddit"], "start_url": REDDIT, "eval": eval_, "solution": solution, "show": show}


def _projects(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, "SELECT id FROM projects ORDER BY id")]


def _project(db: sqlite3.Connection, pid: int) -> tuple[sqlite3.Row, str]:
    p = rows(db, "SELECT * FROM projects WHERE id = ?", pid)[0]
    return p, f"{p['namespace']}/{p['name']}"


def _open_project(p: sqlite3.Row) -> list[dict[str, Any]]:
    return [
        type_("textbox", "Search projects", p["name"], enter=True),
        click("link", f"{p['namespace']} / {p['name']}"),
    ]


def open_issues(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    proj, full = _project(db, p["id"])
    n = str(scalar(db, "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'", proj["id"]))
    return _gl(
        string_eval(must_include=[n]),
        [*_open_project(proj), click("link", "Issues"), stop(n)],
        {"project": full},
    )


def license_(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    proj, full = _project(db, p["id"])
    text = scalar(
        db, "SELECT content FROM repo_files WHERE project_id = ? AND path = 'LICENSE'", proj["id"]
    ).strip()
    steps = [*_open_project(proj), click("link", "Repository"), click("link", "LICENSE"), stop(text)]
    return _gl(string_eval(must_include=[text.split()[0]]), steps, {"project": full})


def merged(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    proj, full = _project(db, p["id"])
    n = str(
        scalar(
            db, "SELECT COUNT(*) FROM merge_requests WHERE project_id = ? AND state = 'merged'", proj["id"]
        )
    )
    steps = [
        *_open_project(proj),
        click("link", "Merge requests"),
        click("link", "Merged merge requests"),
        stop(n),
    ]
    return _gl(string_eval(must_include=[n]), steps, {"project": full})


def create_issue(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    proj, full = _project(db, p["id"])
    title, label = ISSUE_TITLES[proj["id"] % len(ISSUE_TITLES)], LABELS[proj["id"] % len(LABELS)]
    last = scalar(db, "SELECT MAX(iid) FROM issues WHERE project_id = ?", proj["id"])
    steps = [
        *_open_project(proj),
        click("link", "Issues"),
        click("link", "New issue"),
        type_("textbox", "Title", title),
        type_("textbox", "Labels (comma-separated)", label),
        click("button", "Create issue"),
        stop(),
    ]
    check = (
        "SELECT title, labels, author_id, state FROM issues"
        f" WHERE project_id = {proj['id']} AND iid > {last}",
        [[title, label, 1, "opened"]],
    )
    return _gl(db_eval([check]), steps, {"project": full, "title": title, "label": label})


def _non_members(db: sqlite3.Connection) -> list[Params]:
    out = []
    for p in _projects(db):
        outside = rows(
            db,
            "SELECT id FROM gl_users WHERE id NOT IN (SELECT user_id FROM members WHERE project_id = ?)"
            " ORDER BY id",
            p["id"],
        )
        out += [{"id": p["id"], "user": u["id"]} for u in outside[:3]]
    return out


def invite(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    proj, full = _project(db, p["id"])
    username = scalar(db, "SELECT username FROM gl_users WHERE id = ?", p["user"])
    role = ["Guest", "Reporter", "Developer", "Maintainer"][p["user"] % 4]
    steps = [
        *_open_project(proj),
        click("link", "Members"),
        type_("textbox", "Username", username),
        click("radio", role),
        click("button", "Invite"),
        stop(),
    ]
    check = (f"SELECT role FROM members WHERE project_id = {proj['id']} AND user_id = {p['user']}", [[role]])
    return _gl(db_eval([check]), steps, {"project": full, "username": username, "role": role})


def _open_issue_list(db: sqlite3.Connection) -> list[Params]:
    out = []
    for p in _projects(db):
        opened = rows(
            db, "SELECT iid FROM issues WHERE project_id = ? AND state = 'opened' ORDER BY iid DESC", p["id"]
        )
        out += [{"id": p["id"], "iid": r["iid"], "index": i} for i, r in enumerate(opened) if i % 4 == 1]
    return out


def close_issue(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    proj, full = _project(db, p["id"])
    title = scalar(db, "SELECT title FROM issues WHERE project_id = ? AND iid = ?", proj["id"], p["iid"])
    steps = [
        *_open_project(proj),
        click("link", "Issues"),
        *next_pages(p["index"]),
        click("link", f"#{p['iid']} {title}"),
        click("button", "Close issue"),
        stop(),
    ]
    check = (f"SELECT state FROM issues WHERE project_id = {proj['id']} AND iid = {p['iid']}", [["closed"]])
    return _gl(db_eval([check]), steps, {"project": full, "iid": p["iid"], "title": title})


def _forums(db: sqlite3.Connection) -> list[Params]:
    return [{"id": r["id"]} for r in rows(db, "SELECT id FROM forums ORDER BY id")]


def _forum_name(db: sqlite3.Connection, fid: int) -> str:
    return str(scalar(db, "SELECT name FROM forums WHERE id = ?", fid))


def _unique_top(db: sqlite3.Connection) -> list[Params]:
    out = []
    for f in _forums(db):
        top = rows(db, "SELECT score FROM posts WHERE forum_id = ? ORDER BY score DESC LIMIT 2", f["id"])
        if top[0][0] != top[1][0]:
            out.append(f)
    return out


def top_post(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    forum = _forum_name(db, p["id"])
    title = scalar(db, "SELECT title FROM posts WHERE forum_id = ? ORDER BY score DESC, id LIMIT 1", p["id"])
    steps = [click("link", "Forums"), click("link", forum), click("link", "Sort by Top"), stop(title)]
    return _rd(string_eval(exact_match=title), steps, {"forum": forum})


def top_url(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    forum = _forum_name(db, p["id"])
    steps = [click("link", "Forums"), click("link", forum), click("link", "Sort by Top"), stop()]
    return _rd(url_eval(f"{REDDIT}/f/{forum}?sort=top"), steps, {"forum": forum})


def _posts(db: sqlite3.Connection) -> list[Params]:
    out = []
    for f in _forums(db):
        posts = rows(db, "SELECT id FROM posts WHERE forum_id = ? ORDER BY created DESC, id DESC", f["id"])
        out += [{"id": r["id"], "index": i} for i, r in enumerate(posts)]
    return sorted(out, key=lambda p: p["id"])


def _open_post(db: sqlite3.Connection, p: Params) -> tuple[list[dict[str, Any]], str, str]:
    post = rows(
        db, "SELECT p.title, f.name FROM posts p JOIN forums f ON f.id = p.forum_id WHERE p.id = ?", p["id"]
    )
    title, forum = post[0]
    return (
        [click("link", "Forums"), click("link", forum), *next_pages(p["index"]), click("link", title)],
        title,
        forum,
    )


def upvote(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    steps, title, forum = _open_post(db, p)
    check = (f"SELECT value FROM votes WHERE target = 'post' AND target_id = {p['id']}", [[1]])
    return _rd(
        db_eval([check]), [*steps, click("button", "Upvote"), stop()], {"title": title, "forum": forum}
    )


def comment(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    steps, title, forum = _open_post(db, p)
    text = COMMENTS[p["id"] % len(COMMENTS)]
    steps += [type_("textbox", "Comment", text), click("button", "Post comment"), stop()]
    page = [
        {
            "url": "func:reddit_get_post_url('__last_url__')",
            "locator": "",
            "required_contents": {"must_include": [text]},
        }
    ]
    check = (
        f"SELECT COUNT(*) FROM comments WHERE post_id = {p['id']} AND user_id = 1 AND body = '{text}'",
        [[1]],
    )
    return _rd(db_eval([check], program_html=page), steps, {"title": title, "forum": forum, "comment": text})


def create_post(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    forum = _forum_name(db, p["id"])
    title = POST_TITLES[p["id"] % len(POST_TITLES)]
    body = f"Hi f/{forum}, what is everyone up to?"
    last = scalar(db, "SELECT MAX(id) FROM posts")
    steps = [
        click("link", "Forums"),
        click("link", forum),
        click("link", "Submit a post"),
        type_("textbox", "Title", title),
        type_("textbox", "Body", body),
        click("button", "Create submission"),
        stop(),
    ]
    check = (
        f"SELECT f.name, p.title, p.body, p.user_id FROM posts p JOIN forums f ON f.id = p.forum_id"
        f" WHERE p.id > {last}",
        [[forum, title, body, 1]],
    )
    return _rd(db_eval([check]), steps, {"forum": forum, "title": title, "body": body})


def comment_count(db: sqlite3.Connection, p: Params) -> dict[str, Any]:
    steps, title, forum = _open_post(db, p)
    n = str(scalar(db, "SELECT COUNT(*) FROM comments WHERE post_id = ?", p["id"]))
    return _rd(string_eval(must_include=[n]), [*steps, stop(n)], {"title": title, "forum": forum})


TEMPLATES = [
    Template(
        "gitlab_open_issues",
        CATEGORY,
        "How many open issues does the project {{project}} have?",
        _projects,
        open_issues,
    ),
    Template(
        "gitlab_license", CATEGORY, "Which license does the project {{project}} use?", _projects, license_
    ),
    Template(
        "gitlab_merged",
        CATEGORY,
        "How many merge requests of {{project}} have been merged?",
        _projects,
        merged,
    ),
    Template(
        "gitlab_create_issue",
        CATEGORY,
        "Create an issue titled '{{title}}' with the label {{label}} in the project {{project}}",
        _projects,
        create_issue,
    ),
    Template(
        "gitlab_invite",
        CATEGORY,
        "Add {{username}} to the project {{project}} as {{role}}",
        _non_members,
        invite,
    ),
    Template(
        "gitlab_close_issue",
        CATEGORY,
        "Close the issue #{{iid}} '{{title}}' of the project {{project}}",
        _open_issue_list,
        close_issue,
    ),
    Template(
        "reddit_top_post",
        CATEGORY,
        "What is the title of the most upvoted post in f/{{forum}}?",
        _unique_top,
        top_post,
    ),
    Template(
        "reddit_top_url", CATEGORY, "Show me the posts of f/{{forum}} sorted by top score", _forums, top_url
    ),
    Template("reddit_upvote", CATEGORY, "Upvote the post '{{title}}' in f/{{forum}}", _posts, upvote),
    Template(
        "reddit_comment",
        CATEGORY,
        "Reply '{{comment}}' to the post '{{title}}' in f/{{forum}}",
        _posts,
        comment,
    ),
    Template(
        "reddit_create_post",
        CATEGORY,
        "Create a post titled '{{title}}' in f/{{forum}} with the text '{{body}}'",
        _forums,
        create_post,
    ),
    Template(
        "reddit_comment_count",
        CATEGORY,
        "How many comments does the post '{{title}}' in f/{{forum}} have?",
        _posts,
        comment_count,
    ),
]
