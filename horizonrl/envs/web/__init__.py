"""Web: WebArena-style tasks in a real browser (Playwright driving headless Chromium) on sites
that ship with the project.

Description:
    The agent browses five small server-rendered sites made in the image of WebArena's
    (`horizonrl.envs.web.sites`: a shop, its admin, a forum, a code host, a map) to answer a
    question or change something: find a price, add an item to the cart, edit an order,
    comment on a post, measure a route. Every episode gets its own copy of the sites'
    database (a tenant: the browser context sends `X-Horizonrl-Tenant`), restored to the
    exact start state at reset in a few ms. The same env also plays WebArena's own
    `config_files/N.json` against a user's WebArena deployment (`env.kwargs.config_dir`).
    One Chromium per env (per server worker process: `isolate=True`), one context per
    episode; the browser reaches only the sites' hosts (`browser.py`).

Observation:
    WebArena's text form (`observation.py`): the tabs, the page's accessibility tree (CDP
    `Accessibility.getFullAXTree`, filtered as WebArena does, whole page) as lines
    `[id] role 'name' props` with our own ids 1, 2, ..., then `URL:`, `OBJECTIVE:` (the
    task's intent) and `PREVIOUS ACTION:`. A failed action puts a line saying why above it.
    Trees longer than `max_obs_chars` (16000) are cut with a marker line.

Actions:
    Inside triple backticks or bare (`actions.py`): `click [id]`, `type [id] [text] [0|1]`,
    `hover [id]`, `press [key_comb]`, `scroll [up|down]`, `new_tab`, `tab_focus [i]`,
    `close_tab`, `goto [url]`, `go_back`, `go_forward`, `stop [answer]`. Anything else, an
    unknown id, a blocked or unreachable URL is answered with an observation saying so.

Reward:
    0 on every step but `stop`; at `stop` the task's evaluators
    (`horizonrl.envs.web.evaluators.evaluate`: string match on the answer, URL match,
    program_html on pages re-read in the session's context, db_state on the session's
    database) give the score in [0, 1], which is the reward. `info["success"]` is score 1.
    `info` also carries `url` and, at reset, `sites`, `object` (task id, intent, start URL)
    and `site_urls`; with `env.kwargs.screenshots=true`, `screenshot` (PNG, base64).

Termination:
    At `stop`.

Truncation:
    Never by the env; the turn cap (eval: 15, WebArena's) is the rollout engine's
    `max_turns` (`TurnLimit` when the env is stepped directly). An episode cut before `stop`
    scores 0.

Categories:
    The paper's four groups, from the task's sites: `shopping`, `shopping_admin` (the CMS),
    `maps`, `gitlab+reddit`.

Registered ids:
    `web_<i>` (`horizonrl.envs.web.tasks`): `test` = `web_0`..`web_49` (15 shopping, 15
    shopping_admin, 10 maps, 10 gitlab+reddit, as the reference's test set), `train` =
    `web_50`... generated from templates over the sites' data. With `config_dir`, `web_N`
    is that directory's `N.json`. Expert: replays each task's `horizonrl.solution` steps
    through the observation (`horizonrl.envs.web.expert`).

Sites: the process that hosts the envs (`horizonrl serve web`, or `solve` / `eval` / `train`
with local envs) starts the sites once (`host_services`), and every env, in any worker
process, attaches to them; an env made on its own starts its own and stops them at close.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from horizonrl.envs.registry import FamilySpec

CATEGORIES = ("shopping", "shopping_admin", "maps", "gitlab+reddit")
"""The report groups (`tasks.CATEGORIES`, repeated here so that importing the family, as the
sites' worker processes do, does not load the task files)."""


def load_splits() -> dict[str, list[str]]:
    from horizonrl.envs.web import tasks

    return tasks.load_splits()


def category_of(item_id: str) -> str:
    from horizonrl.envs.web import tasks

    return tasks.category_of(item_id)


def make_env(**kwargs: Any) -> Any:
    """A `WebEnv` (starts its Chromium); kwargs are `env.kwargs` (see `WebEnv`)."""
    from horizonrl.envs.web.env import WebEnv

    return WebEnv(**kwargs)


def make_expert() -> Any:
    from horizonrl.envs.web.expert import WebExpert

    return WebExpert()


@contextlib.contextmanager
def host_sites(env_kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Start the sites once for every env the calling process makes (none are started when the
    envs already know where sites are: `sites`, `config_dir`, or `$HORIZONRL_WEB_SITES`)."""
    from horizonrl.envs.web.sites import ENV_VAR, start_sites

    if env_kwargs.get("sites") or env_kwargs.get("config_dir") or os.environ.get(ENV_VAR):
        yield {}
        return
    with start_sites() as running:
        yield {"sites": running.to_env()}


SPEC = FamilySpec(
    name="web",
    make_env=make_env,
    load_splits=load_splits,
    categories=CATEGORIES,
    category_of=category_of,
    make_expert=make_expert,
    isolate=True,
    default_port=36004,
    host_services=host_sites,
    description="WebArena-style tasks in headless Chromium on five bundled sites; evaluator score in [0, 1]",
)
