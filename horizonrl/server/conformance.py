"""`horizonrl check-env FAMILY [--server URL] [--items N]`: the conformance checker from the CLI.

    $ horizonrl check-env guess --server http://127.0.0.1:36200
    check-env guess via http://127.0.0.1:36200 (v1), items guess_6, guess_7, guess_8
      PASS  v1 routes and fields
      FAIL  v1 error statuses: unknown session: answered 200 with an error body; ...
      PASS  types
      ...
    guess: 8 passed, 1 failed

Locally it runs `horizonrl.envs.checker.run_checks` on `spec.make_env()`. With `--server` (or
for an external family, which has its own URL) it first probes the v1 protocol itself, raw
HTTP without the client's leniency, as docs/protocol.md specifies it:
- `v1 routes and fields`: `/healthz` and `/v1/info` answer 200; creating a session answers 201
  with `session_id`, `observation`, `info`; a step answers exactly `observation`, `reward`,
  `terminated`, `truncated`, `info`; `/actions` answers `{"actions": null | [str]}`; a delete 200;
- `v1 error statuses`: an unknown session (404 `unknown_session`), an unknown item (404
  `unknown_item`), a body that is not JSON (400) and a step without `action` (400/422) each get
  that status and the body `{"error": {"code", "message"}}`; a 2xx carrying an error is named
  as such (never 200-with-error);
then runs every checker property through `RemoteEnv`. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from horizonrl.envs.checker import CheckResult, run_checks
from horizonrl.envs.registry import FamilySpec
from horizonrl.server.client import RemoteEnv
from horizonrl.server.external import is_external, resolve_family

STEP_FIELDS = ("observation", "reward", "terminated", "truncated", "info")
CREATE_FIELDS = ("session_id", "observation", "info")


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _fields(what: str, payload: Any, expected: tuple[str, ...], exact: bool) -> list[str]:
    if not isinstance(payload, dict):
        return [f"{what}: answer is not a JSON object ({str(payload)[:80]!r})"]
    missing = [k for k in expected if k not in payload]
    extra = sorted(set(payload) - set(expected)) if exact else []
    problems = []
    if missing:
        problems.append(
            f"{what}: answer lacks {', '.join(map(repr, missing))} (has {', '.join(map(repr, payload))})"
        )
    if extra:
        problems.append(f"{what}: unexpected fields {', '.join(map(repr, extra))}")
    return problems


def _error_answer(
    what: str, response: httpx.Response, statuses: tuple[int, ...], code: str | None
) -> list[str]:
    payload = _json(response)
    body = payload.get("error") if isinstance(payload, dict) else None
    if response.status_code < 400:
        if body is not None:
            return [
                f"{what}: answered {response.status_code} with an error body; use HTTP status {statuses[0]}"
            ]
        return [f"{what}: answered {response.status_code}; expected status {' or '.join(map(str, statuses))}"]
    problems = []
    if response.status_code not in statuses:
        problems.append(f"{what}: status {response.status_code}; expected {' or '.join(map(str, statuses))}")
    if not (
        isinstance(body, dict) and isinstance(body.get("code"), str) and isinstance(body.get("message"), str)
    ):
        problems.append(
            f'{what}: body must be {{"error": {{"code", "message"}}}}, got {response.text[:80]!r}'
        )
    elif code is not None and body["code"] != code:
        problems.append(f"{what}: error code {body['code']!r}; expected {code!r}")
    return problems


def probe_v1(url: str, spec: FamilySpec, item_id: str, timeout: float = 30.0) -> list[CheckResult]:
    """The two protocol properties of a v1 server (see the module docstring)."""
    fields: list[str] = []
    errors: list[str] = []
    with httpx.Client(base_url=url, timeout=timeout, trust_env=False) as http:
        health = http.get("/healthz")
        if health.status_code != 200:
            fields.append(f"GET /healthz: status {health.status_code}; expected 200")
        info = http.get("/v1/info")
        if info.status_code != 200:
            fields.append(f"GET /v1/info: status {info.status_code}; expected 200")
        else:
            fields += _fields("GET /v1/info", _json(info), ("family", "splits", "categories"), exact=False)
        created = http.post("/v1/sessions", json={"item_id": item_id, "seed": 0})
        payload = _json(created)
        if created.status_code != 201:
            fields.append(f"POST /v1/sessions: status {created.status_code}; expected 201")
        fields += _fields("POST /v1/sessions", payload, CREATE_FIELDS, exact=False)
        sid = payload.get("session_id") if isinstance(payload, dict) else None
        if sid is not None:
            step = http.post(f"/v1/sessions/{sid}/step", json={"action": "look"})
            if step.status_code != 200:
                fields.append(f"POST /v1/sessions/{{sid}}/step: status {step.status_code}; expected 200")
            fields += _fields("POST /v1/sessions/{sid}/step", _json(step), STEP_FIELDS, exact=True)
            actions = http.get(f"/v1/sessions/{sid}/actions")
            listed = _json(actions)
            ok = isinstance(listed, dict) and (
                listed.get("actions") is None
                or (
                    isinstance(listed["actions"], list) and all(isinstance(a, str) for a in listed["actions"])
                )
            )
            if actions.status_code != 200 or not ok or "actions" not in listed:
                fields.append(
                    f'GET /v1/sessions/{{sid}}/actions: expected 200 {{"actions": null or [str]}}, got '
                    f"{actions.status_code} {actions.text[:80]!r}"
                )
            errors += _error_answer(
                "step without 'action'", http.post(f"/v1/sessions/{sid}/step", json={}), (400, 422), None
            )
            errors += _error_answer(
                "body that is not JSON",
                http.post(
                    f"/v1/sessions/{sid}/step",
                    content=b"{not json",
                    headers={"content-type": "application/json"},
                ),
                (400,),
                None,
            )
            deleted = http.delete(f"/v1/sessions/{sid}")
            if deleted.status_code != 200:
                fields.append(f"DELETE /v1/sessions/{{sid}}: status {deleted.status_code}; expected 200")
        errors += _error_answer(
            "step on an unknown session",
            http.post("/v1/sessions/no-such-session/step", json={"action": "look"}),
            (404,),
            "unknown_session",
        )
        errors += _error_answer(
            "create on an unknown item",
            http.post("/v1/sessions", json={"item_id": f"{spec.name}_999999999", "seed": 0}),
            (404,),
            "unknown_item",
        )
    return [
        CheckResult("v1 routes and fields", not fields, "; ".join(fields)),
        CheckResult("v1 error statuses", not errors, "; ".join(errors)),
    ]


def check_family(
    spec: FamilySpec, *, server: str | None = None, items: int = 3, protocol: str | None = None
) -> tuple[str, list[CheckResult]]:
    """`(heading, results)` of every check on `spec`, locally or through the server at `server`."""
    test = spec.split("test")
    item_ids = test[: max(1, items)]
    url = server or spec.extra.get("external_url")
    protocol = protocol or str(spec.extra.get("protocol", "v1"))
    shown = ", ".join(item_ids)
    if url is None:
        env = spec.make_env()
        try:
            return f"check-env {spec.name} (local), items {shown}", run_checks(env, spec, item_ids)
        finally:
            env.close()
    url = str(url).rstrip("/")
    results: list[CheckResult] = []
    if protocol == "v1":
        try:
            results = probe_v1(url, spec, item_ids[0])
        except httpx.HTTPError as exc:
            results = [CheckResult("v1 routes and fields", False, f"cannot talk to {url}: {exc!r}")]
    remote = RemoteEnv(url, spec.name, protocol=protocol, retries=0)  # type: ignore[arg-type]
    try:
        results += run_checks(remote, spec, item_ids)
    finally:
        remote.close()
    return f"check-env {spec.name} via {url} ({protocol}), items {shown}", results


def check_env_main(args: argparse.Namespace) -> int:
    """Entry point of `horizonrl check-env` (arguments parsed in `horizonrl.cli`)."""
    spec = resolve_family(args.family)
    if args.server is None and is_external(spec):
        print(f"{spec.name} is an external family: checking its server {spec.extra['external_url']}")
    heading, results = check_family(spec, server=args.server, items=args.items, protocol=args.protocol)
    print(heading)
    for result in results:
        print(f"  {result.line()}")
    failed = sum(not r.ok for r in results)
    print(f"{spec.name}: {len(results) - failed} passed, {failed} failed")
    sys.stdout.flush()
    return 1 if failed else 0
