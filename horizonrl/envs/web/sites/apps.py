"""The five sites' Starlette apps over one tenant store (one module per site holds its routes)."""

from __future__ import annotations

from starlette.applications import Starlette

from horizonrl.envs.web.sites import admin, forum, gitlab, maps, shopping
from horizonrl.envs.web.sites.common import make_app
from horizonrl.envs.web.sites.tenants import TenantStore

SITE_MODULES = {"shopping": shopping, "shopping_admin": admin, "reddit": forum, "gitlab": gitlab, "map": maps}
"""Site name (as in `SITE_NAMES`) -> the module with its `SITE` title and `ROUTES`."""


def build_apps(store: TenantStore, admin_token: str) -> dict[str, Starlette]:
    """Site name -> app; every app serves the admin routes over the same `store`."""
    return {name: make_app(mod.SITE, mod.ROUTES, store, admin_token) for name, mod in SITE_MODULES.items()}
