"""The web family's sites: five small server-rendered apps in the image of WebArena's.

    shopping        One Stop Market: catalogue, search, product options and reviews, cart,
                    checkout, order history, account (`shopping.py`)
    shopping_admin  the store's admin: orders, products, customers, reviews, reports (`admin.py`)
    reddit          a forum: subforums, posts, comments, votes, profiles (`forum.py`)
    gitlab          code hosting: projects, issues, merge requests, members, files (`gitlab.py`)
    map             places with coordinates, search, directions and distances (`maps.py`)

All five read one SQLite database per tenant (`tenants.py`), a copy of a template built from a
fixed seed (`data.py`); `start_sites()` serves them from one child process (`runner.py`).
Pages are plain HTML with links and forms, no JavaScript, no external assets, no `<select>`,
20 items per page, every control labelled. The logged-in user is implicit.
"""

from horizonrl.envs.web.sites.runner import ENV_VAR, SITE_NAMES, RunningSites, SitesError, start_sites
from horizonrl.envs.web.sites.tenants import ADMIN_HEADER, DEFAULT_TENANT, TENANT_HEADER

PLACEHOLDERS = {
    "shopping": "__SHOPPING__",
    "shopping_admin": "__SHOPPING_ADMIN__",
    "reddit": "__REDDIT__",
    "gitlab": "__GITLAB__",
    "map": "__MAP__",
    "wikipedia": "__WIKIPEDIA__",
    "homepage": "__HOMEPAGE__",
}
"""Site name -> the placeholder WebArena's task files use for its URL."""

__all__ = [
    "ADMIN_HEADER",
    "DEFAULT_TENANT",
    "ENV_VAR",
    "PLACEHOLDERS",
    "SITE_NAMES",
    "TENANT_HEADER",
    "RunningSites",
    "SitesError",
    "start_sites",
]
