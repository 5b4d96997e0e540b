"""AgentGym compatibility: the reference's env-server routes, served and spoken.

The reference's env clients talk to one server per family with `POST /create`,
`POST /reset`, `POST /step`, `GET /observation` and `POST /close`, and each family
names its fields a little differently. A `Layout` records one family's dialect; the
server routes here answer in it (over the same sessions as the v1 routes), and
`horizonrl.server.client.RemoteEnv(protocol="agentgym")` uses it to drive the
reference's own servers.

Layouts (id field; reset body; answers of create / reset / step):
- textcraft: `id`; `{id, data_idx}`; `{id, observation, done, reward}` /
  `{id, observation, done, reward}` / `{observation, reward, done}`
- babyai: `id`; `{id, data_idx}`; `{id}` / `{observation, reward, score, done}` /
  `{observation, reward, score, done}`
- sciworld: `id`; `{id, data_idx}`; `{id}` / `{task_name, var_num, task_description,
  observation, reward, score, done}` / `{observation, reward, score, done}`
- search: `env_idx`; `{env_idx, id}`; a bare int / a bare string (the question) /
  `{observation, reward, done, info}`
- web: `env_idx`; `{env_idx, seed, idx}`; `{env_idx}` / `{observation, sites, object}` /
  `{observation, reward, terminated, truncated, info}`

- Data index `i` is item `<family>_<i>`. `done` = terminated or truncated.
- Reset uses the body's `seed` when present (the web layout sends one; our client
  always sends one) and seed 0 otherwise, so a data index always gives the same
  episode, as in the reference.
- `score` is `info["score"]` times the layout's scale: 100 for sciworld (the
  reference reports ScienceWorld's 0-100 score), 1 otherwise.
- What the server reads from the env's `info`: sciworld reset reads `task_name`,
  `variation` (or `var_num`) and `task_description`; web reset reads `sites` and
  `object`; missing keys give empty values.
- A family picks its layout by name (the five above), or with
  `FamilySpec.extra["agentgym_layout"]`; any other family speaks the babyai layout.
- TextCraft's `create` may carry `commands` / `goal` (a custom task); we accept only
  null values there (400 otherwise) and start the session on item `textcraft_0`.
- Unlike the reference, errors are real HTTP statuses with `{"error": {...}}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from horizonrl.envs.registry import FamilySpec
from horizonrl.server.schemas import ApiError, get_action, get_int, json_response, parse_body
from horizonrl.server.sessions import Session, SessionStore


@dataclass(frozen=True)
class Layout:
    """One family's dialect of the reference protocol (see the module table)."""

    name: str
    id_field: str = "id"
    data_field: str = "data_idx"
    score_scale: float = 1.0


LAYOUTS: dict[str, Layout] = {
    "textcraft": Layout("textcraft"),
    "babyai": Layout("babyai"),
    "sciworld": Layout("sciworld", score_scale=100.0),
    "search": Layout("search", id_field="env_idx", data_field="id"),
    "web": Layout("web", id_field="env_idx", data_field="idx"),
}


def layout_for(family: str, spec: FamilySpec | None = None) -> Layout:
    """The layout of a family: `spec.extra["agentgym_layout"]`, its own name, else babyai's."""
    if spec is not None and "agentgym_layout" in spec.extra:
        return LAYOUTS[str(spec.extra["agentgym_layout"])]
    return LAYOUTS.get(family, LAYOUTS["babyai"])


# ---- server side ----------------------------------------------------------------------------


def _score(layout: Layout, info: dict[str, Any]) -> float:
    return float(info.get("score", 0.0)) * layout.score_scale


def reset_payload(layout: Layout, session: Session, observation: str, info: dict[str, Any]) -> Any:
    """The body the reference answers `/reset` with, for this layout."""
    if layout.name == "textcraft":
        return {"id": session.num, "observation": observation, "done": False, "reward": 0}
    if layout.name == "sciworld":
        description = str(info.get("task_description", ""))
        if description and observation.startswith(description):
            observation = observation[len(description) :].lstrip("\n")
        return {
            "task_name": info.get("task_name", ""),
            "var_num": info.get("variation", info.get("var_num", 0)),
            "task_description": description,
            "observation": observation,
            "reward": 0,
            "score": _score(layout, info),
            "done": False,
        }
    if layout.name == "search":
        return observation
    if layout.name == "web":
        return {"observation": observation, "sites": info.get("sites", []), "object": info.get("object", {})}
    return {"observation": observation, "reward": 0, "score": _score(layout, info), "done": False}


def step_payload(layout: Layout, observation: str, reward: float, terminated: bool, truncated: bool,
                 info: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The body the reference answers `/step` with, for this layout."""
    done = terminated or truncated
    if layout.name == "textcraft":
        return {"observation": observation, "reward": reward, "done": done}
    if layout.name == "search":
        return {"observation": observation, "reward": reward, "done": done, "info": info}
    if layout.name == "web":
        return {"observation": observation, "reward": reward, "terminated": terminated,
                "truncated": truncated, "info": info}  # fmt: skip
    return {"observation": observation, "reward": reward, "score": _score(layout, info), "done": done}


class AgentGymRoutes:
    """Handlers of the compatibility routes over a `SessionStore` (wired up in `app.py`)."""

    def __init__(self, store: SessionStore, read_body: Any) -> None:
        self.store = store
        self.spec = store.spec
        self.layout = layout_for(store.spec.name, store.spec)
        self.read_body = read_body

    def _session(self, data: dict[str, Any]) -> Session:
        num = get_int(data, self.layout.id_field, required=True)
        assert num is not None
        return self.store.get_num(num)

    async def hello(self, request: Request) -> Response:
        return json_response(f"This is environment {self.spec.name} (horizonrl).")

    async def create(self, request: Request) -> Response:
        data = parse_body(await self.read_body(request), allow_empty=True)
        if self.layout.name == "textcraft" and (
            data.get("commands") is not None or data.get("goal") is not None
        ):
            raise ApiError(
                400, "bad_request", "custom 'commands'/'goal' are not supported; use /reset with data_idx"
            )
        session = await self.store.create()
        if self.layout.name == "textcraft":  # the reference's create already holds an episode
            try:
                observation, _ = await self.store.reset(session, f"{self.spec.name}_0", 0)
            except ApiError:
                await self.store.delete(session, "unused")
                raise
            return json_response({"id": session.num, "observation": observation, "done": False, "reward": 0})
        if self.layout.name == "search":
            return json_response(session.num)
        return json_response({self.layout.id_field: session.num})

    async def reset(self, request: Request) -> Response:
        data = parse_body(await self.read_body(request))
        session = self._session(data)
        index = get_int(data, self.layout.data_field, 0)
        seed = get_int(data, "seed", 0)
        if index is None or index < 0:
            raise ApiError(
                422, "bad_field", f"field {self.layout.data_field!r} must be a non-negative integer"
            )
        observation, info = await self.store.reset(session, f"{self.spec.name}_{index}", seed)
        return json_response(reset_payload(self.layout, session, observation, info))

    async def step(self, request: Request) -> Response:
        data = parse_body(await self.read_body(request))
        session = self._session(data)
        result = await self.store.step(session, get_action(data))
        payload = step_payload(
            self.layout, result.observation, result.reward, result.terminated, result.truncated, result.info
        )
        return json_response(payload)

    async def observation(self, request: Request) -> Response:
        raw = request.query_params.get(self.layout.id_field)
        if raw is None or not raw.lstrip("-").isdigit():
            raise ApiError(
                422, "missing_field", f"query parameter {self.layout.id_field!r} (an integer) is required"
            )
        return json_response(self.store.get_num(int(raw)).observation)

    async def close(self, request: Request) -> Response:
        data = parse_body(await self.read_body(request))
        session = self._session(data)
        if await self.store.delete(session):
            return json_response({self.layout.id_field: session.num, "closed": True})
        # 200 as the reference always answers; the session closes when its call returns
        return json_response({self.layout.id_field: session.num, "closed": False, "closing": True})

    def routes(self) -> list[tuple[str, str, Any]]:
        """(method, path, handler) of every compatibility route."""
        return [
            ("GET", "/", self.hello),
            ("POST", "/create", self.create),
            ("POST", "/reset", self.reset),
            ("POST", "/step", self.step),
            ("GET", "/observation", self.observation),
            ("POST", "/close", self.close),
        ]


# ---- client side: build the reference's requests, read its answers ----------------------------

ERROR_HINTS_UNKNOWN_ITEM = ("index", "range", "invalid", "not found", "unknown", "keyerror")
"""Words in a reference server's 200-with-error reply to `/reset` that mean a bad data index."""


def create_body(layout: Layout) -> dict[str, Any]:
    return {"id": 0} if layout.name == "search" else {}


def parse_create(layout: Layout, payload: Any) -> int:
    """The session id from a `/create` answer (an object, or a bare int for search)."""
    if layout.name == "search" and isinstance(payload, int):
        return payload
    if isinstance(payload, dict) and layout.id_field in payload:
        return int(payload[layout.id_field])
    raise ValueError(f"unexpected /create answer {str(payload)[:200]!r}")


def reset_body(layout: Layout, num: int, index: int, seed: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {layout.id_field: num, layout.data_field: index}
    if seed is not None:  # the reference ignores unknown fields; ours honours it
        body["seed"] = seed
    return body


def parse_reset(layout: Layout, payload: Any) -> str:
    """The first observation from a `/reset` answer, as the reference's own clients build it."""
    if layout.name == "search" and isinstance(payload, str):
        return payload
    if not isinstance(payload, dict) or "observation" not in payload:
        raise ValueError(f"unexpected /reset answer {str(payload)[:200]!r}")
    observation = str(payload["observation"])
    if layout.name == "sciworld" and payload.get("task_description"):
        observation = f"{payload['task_description']}\n{observation}"
    return observation


def parse_step(layout: Layout, payload: Any) -> tuple[str, float, bool, bool, float, dict[str, Any]]:
    """`(observation, reward, terminated, truncated, score in [0, 1], extra info)` from a `/step` answer."""
    if not isinstance(payload, dict) or "observation" not in payload or "reward" not in payload:
        raise ValueError(f"unexpected /step answer {str(payload)[:200]!r}")
    reward = float(payload["reward"])
    info = dict(payload.get("info") or {})
    if "terminated" in payload:
        terminated, truncated = bool(payload["terminated"]), bool(payload.get("truncated", False))
    else:
        terminated, truncated = bool(payload.get("done", False)), False
    if "score" in payload:
        score = float(payload["score"]) / layout.score_scale
    else:
        score = float(info.get("score", reward))
    return str(payload["observation"]), reward, terminated, truncated, min(max(score, 0.0), 1.0), info


def success_of(layout: Layout, reward: float, score: float, done: bool, info: dict[str, Any]) -> bool:
    """Best guess of `info["success"]` from the reference's thinner answers."""
    if "success" in info:
        return bool(info["success"])
    if layout.name == "babyai":
        return done and score > 0  # minigrid rewards only a completed mission
    if layout.name == "sciworld":
        return score >= 1.0
    return reward >= 1.0
