"""`WebEnv`: one WebArena-style episode at a time in a real browser (see the package docstring)."""

from __future__ import annotations

import base64
import contextlib
import importlib
import secrets
from pathlib import Path
from typing import Any

from horizonrl.envs.core import EnvError, StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.envs.web.actions import Action, Tabs, parse_action
from horizonrl.envs.web.browser import Browser, BrowserConfig, origin_of
from horizonrl.envs.web.observation import DEFAULT_MAX_CHARS, format_observation, render_tree


def load_judge(path: str) -> Any:
    """The callable named by `module:function` (`env.kwargs.judge`)."""
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"env.kwargs.judge={path!r}: expected 'module:function'")
    judge = getattr(importlib.import_module(module), name, None)
    if not callable(judge):
        raise ValueError(f"env.kwargs.judge={path!r}: {module} has no function {name!r}")
    return judge


class _EvalContext:
    """What W1's evaluators read at the end of an episode (`evaluators.EvalContext`)."""

    def __init__(self, env: WebEnv, answer: str | None) -> None:
        self.env = env
        self.answer = answer
        assert env._tabs is not None
        self.url = str(env._tabs.page.url)

    def page_text(self, url: str, locator: str) -> str:
        """Open `url` (`last` or "": the final page) in a new page of the session's context, wait
        for it to load, and return the `locator` JavaScript's value (the page's text if "")."""
        tabs = self.env._tabs
        assert tabs is not None
        target = self.url if url in ("", "last") else url
        tabs.adopt_new_pages = False
        page = tabs.context.new_page()
        try:
            page.goto(target, wait_until="load")
            if not locator:
                return str(page.inner_text("body"))
            try:
                value = page.evaluate(f"() => {locator}")
            except Exception:  # noqa: BLE001 - WebArena scores a locator that finds nothing as ""
                return ""
            return "" if value is None else str(value)
        finally:
            page.close()
            tabs.adopt_new_pages = True

    def db_query(self, sql: str) -> list[list[Any]]:
        if self.env._sites is None:
            raise EnvError("db_state checks need the project's own sites (no admin route on this deployment)")
        return [list(row) for row in self.env._sites.query(self.env.token, sql)]


class WebEnv:
    """WebArena's tasks in headless Chromium, as a `TextEnv`. One browser per env (per server
    worker process), one fresh browser context per episode.

    Args (all from `env.kwargs`):
        sites: JSON of running sites to attach to (set by the family's `host_services`; default
            `$HORIZONRL_WEB_SITES`, else this env starts its own sites and stops them at close).
        config_dir: a directory of WebArena `config_files/N.json`: item `web_N` is `N.json` there,
            played against `site_urls` (real WebArena; nothing is reset between episodes).
        site_urls: `{site: url}` for `config_dir` (default: WebArena's variables `SHOPPING`, ...).
        chromium: the Chromium binary (default: `browser.find_chromium`).
        screenshots: put a PNG of the page in every `info` (`info["screenshot"]`, base64).
        max_obs_chars: cap on the tree's text.
        settle_timeout_s, action_timeout_s, quiet_ms: see `BrowserConfig`.
        judge: `module:function` of the LLM judge for `fuzzy_match` answers
            (`evaluators.Judge`: `judge(intent, reference, answer) -> score`); none by default.
    """

    def __init__(
        self,
        sites: str | None = None,
        config_dir: str | None = None,
        site_urls: dict[str, str] | None = None,
        chromium: str | None = None,
        screenshots: bool = False,
        max_obs_chars: int = DEFAULT_MAX_CHARS,
        settle_timeout_s: float = 5.0,
        action_timeout_s: float = 10.0,
        quiet_ms: int = 50,
        judge: str | None = None,
    ) -> None:
        from horizonrl.envs.web import sites as web_sites
        from horizonrl.envs.web import tasks

        self.config_dir = Path(config_dir) if config_dir else None
        self.token = f"s{secrets.token_hex(8)}"
        self._owned: Any = None
        self._sites: Any = None
        if self.config_dir is not None:
            if not self.config_dir.is_dir():
                raise ValueError(f"env.kwargs.config_dir={config_dir!r} is not a directory")
            self.urls = dict(site_urls or tasks.site_urls_from_environ())
            if not self.urls:
                raise ValueError(
                    "config_dir needs site URLs: set env.kwargs.site_urls or SHOPPING, REDDIT, ..."
                )
        else:
            attached = web_sites.RunningSites.from_env({web_sites.ENV_VAR: sites} if sites else None)
            if attached is not None:
                self._sites = attached
            else:
                self._owned = self._sites = web_sites.start_sites()
            self.urls = dict(self._sites.urls)
        self.judge = load_judge(judge) if judge else None
        self.screenshots = bool(screenshots)
        self.max_obs_chars = int(max_obs_chars)
        origins = tuple(sorted({origin_of(u) for u in self.urls.values()}))
        self.config = BrowserConfig(
            allowed_origins=origins,
            chromium=chromium,
            settle_timeout_s=settle_timeout_s,
            action_timeout_s=action_timeout_s,
            quiet_ms=quiet_ms,
        )
        self.browser = Browser(self.config)
        self._tabs: Tabs | None = None
        self._task: dict[str, Any] | None = None
        self._category = ""
        self._score, self._done, self._previous, self._url = 0.0, False, "None", ""

    # ---- the TextEnv contract -------------------------------------------------------------------

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start `item_id`: restore this session's copy of the sites' data to the start state, open
        a fresh browser context at the task's start URL. `seed` changes nothing (the sites are
        fixed data); it is accepted for the contract."""
        task, category = self._load(item_id)
        if self._sites is not None:
            self._sites.reset_tenant(self.token)
        self._task, self._category = task, category
        self._score, self._done, self._previous = 0.0, False, "None"
        observation = self.browser.call(self._open, str(task.get("start_url", "")).split(" |AND| ")[0])
        info = self._info(
            sites=list(task.get("sites", [])),
            object={k: task.get(k) for k in ("task_id", "intent", "start_url", "sites")},
            site_urls=self.urls,
        )
        return observation, self._with_screenshot(info)

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            return StepResult("The episode is over; reset to play again.", 0.0, True, False, self._info())
        parsed = parse_action(str(action))
        if isinstance(parsed, Action) and parsed.kind == "stop":
            self._previous = str(parsed)
            score = self.browser.call(self._evaluate, parsed.arg)
            self._score, self._done = score, True
            observation = self.browser.call(self._observe, None)
            return StepResult(observation, score, True, False, self._with_screenshot(self._info()))
        observation = self.browser.call(self._act, parsed)
        return StepResult(observation, 0.0, False, False, self._with_screenshot(self._info()))

    def available_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.browser.close()
        if self._sites is not None:
            with contextlib.suppress(Exception):
                self._sites.drop_tenant(self.token)
            self._sites.stop()  # sites this env started stop; an attached handle closes its HTTP client
            self._sites = self._owned = None

    # ---- on the browser's thread ------------------------------------------------------------------

    def _open(self, start_url: str) -> str:
        if not self.browser.connected:  # Chromium died: a reset recovers the env
            self.browser.close()
            self.browser = Browser(self.config)
        if self._tabs is not None:
            with contextlib.suppress(Exception):
                self._tabs.context.close()
            self._tabs = None
        login = self._storage_state()
        self._tabs = Tabs(self.browser.new_context(self.token if self._sites else None, login), self.config)
        message = self._tabs.run(Action("goto", arg=start_url)) if start_url else None
        return self._observe(message)

    def _act(self, parsed: Action | str) -> str:
        assert self._tabs is not None
        if isinstance(parsed, str):
            return self._observe(parsed)
        self._previous = str(parsed)
        return self._observe(self._tabs.run(parsed))

    def _observe(self, message: str | None) -> str:
        from playwright.sync_api import Error as PlaywrightError

        tabs = self._tabs
        assert tabs is not None and self._task is not None
        try:
            nodes = tabs.cdp().send("Accessibility.getFullAXTree")["nodes"]
            titles = [page.title() for page in tabs.pages]
        except PlaywrightError as exc:
            if not self.browser.connected:
                raise EnvError(f"the browser died: {exc}") from exc
            raise
        tree = render_tree(nodes, self.max_obs_chars)
        tabs.backend_ids = tree.backend_ids
        url = self._url = str(tabs.page.url)
        if url.startswith("chrome-error://") and message is None:
            message = "The page could not be loaded: its host is unreachable or not allowed."
        text = format_observation(tree.text, titles, tabs.current, url, self._objective, self._previous)
        return f"{message}\n\n{text}" if message else text

    def _evaluate(self, answer: str) -> float:
        from horizonrl.envs.web import evaluators

        assert self._task is not None
        return float(evaluators.evaluate(self._task, _EvalContext(self, answer), judge=self.judge))

    # ---- helpers --------------------------------------------------------------------------------

    @property
    def _objective(self) -> str:
        return str((self._task or {}).get("intent", ""))

    def _load(self, item_id: str) -> tuple[dict[str, Any], str]:
        """The resolved task dict of `item_id` and its category."""
        from horizonrl.envs.web import tasks

        if self.config_dir is None:
            task = tasks.get_task(item_id)
            return tasks.resolve(task, self.urls), tasks.category_of(item_id)
        family, index = parse_item_id(item_id)
        path = self.config_dir / f"{index}.json"
        if family != "web" or not path.is_file():
            raise UnknownItemError(f"no WebArena config {path} for item {item_id!r}")
        task = tasks.resolve(tasks.load_config_file(path), self.urls)
        category = str(
            (task.get("horizonrl") or {}).get("category")
            or tasks.category_of_sites(list(task.get("sites", [])))
        )
        return task, category

    def _storage_state(self) -> str | None:
        """A WebArena config's `storage_state` file (its logins), found as given or beside `config_dir`."""
        raw = (self._task or {}).get("storage_state")
        if not raw or self.config_dir is None:
            return None
        for path in (Path(raw), self.config_dir.parent / raw, self.config_dir / raw):
            if path.is_file():
                return str(path)
        raise ValueError(
            f"storage_state {raw!r} of the task was not found (as given, or beside {self.config_dir})"
        )

    def _info(self, **extra: Any) -> dict[str, Any]:
        return make_info(self._score >= 1.0, self._score, self._category, url=self._url, **extra)

    def _with_screenshot(self, info: dict[str, Any]) -> dict[str, Any]:
        if self.screenshots and self._tabs is not None:
            png = self.browser.call(lambda: self._tabs.page.screenshot(type="png"))  # type: ignore[union-attr]
            info["screenshot"] = base64.b64encode(png).decode("ascii")
        return info
