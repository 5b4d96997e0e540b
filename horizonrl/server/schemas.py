"""Request validation and JSON responses for the env server, without pydantic on the hot path.

A TextCraft step costs microseconds, so per-request overhead decides the server's
throughput: bodies are parsed once with `orjson` (stdlib `json` when it is absent),
fields are checked by the small helpers below, and every error leaves as a real HTTP
status with one body shape:

    {"error": {"code": "unknown_session", "message": "no session 'ab12' on this server ..."}}

Codes in use: `bad_json` (400), `bad_request` (400), `missing_field` / `bad_field` (422),
`unknown_item` (404), `unknown_session` (404), `not_found` (404), `method_not_allowed`
(405), `session_busy` (409), `payload_too_large` (413), `over_capacity` (429),
`env_failed` (500: the env raised), `backend_failed` (503: the env's worker died or hung).
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from starlette.responses import Response

try:  # orjson is optional: 3-5x faster than json on these small payloads
    import orjson

    def dumps(value: Any) -> bytes:
        return orjson.dumps(value)

    def loads(data: bytes) -> Any:
        return orjson.loads(data)

except ImportError:  # pragma: no cover - depends on the environment

    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

    def loads(data: bytes) -> Any:
        return json.loads(data)


MAX_ACTION_BYTES = 64 * 1024
"""Actions longer than this (UTF-8 bytes) are refused with 413."""
MAX_BODY_BYTES = 256 * 1024
"""Request bodies longer than this are refused with 413 before they are parsed."""


class ApiError(Exception):
    """An error answered with `status` and `{"error": {"code", "message"}}`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> Response:
        return json_response({"error": {"code": self.code, "message": self.message}}, self.status)


class SessionCreated(TypedDict):
    """`POST /v1/sessions` -> 201."""

    session_id: str
    observation: str
    info: dict[str, Any]


class StepReply(TypedDict):
    """`POST /v1/sessions/{sid}/step` -> 200 (the fields of `StepResult`)."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(dumps(payload), status_code=status, media_type="application/json")


def parse_body(body: bytes, *, allow_empty: bool = False) -> dict[str, Any]:
    """Parse a JSON object body; 413 when oversized, 400 when not JSON or not an object."""
    if len(body) > MAX_BODY_BYTES:
        raise ApiError(413, "payload_too_large", f"request body is {len(body)} bytes; limit {MAX_BODY_BYTES}")
    if not body.strip():
        if allow_empty:
            return {}
        raise ApiError(400, "bad_json", "request body is empty; expected a JSON object")
    try:
        data = loads(body)
    except ValueError as exc:
        raise ApiError(400, "bad_json", f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "bad_json", f"request body must be a JSON object, got {type(data).__name__}")
    return data


def get_str(data: dict[str, Any], key: str) -> str:
    """A required string field (422 when missing or not a string)."""
    if key not in data:
        raise ApiError(422, "missing_field", f"field {key!r} is required")
    value = data[key]
    if not isinstance(value, str):
        raise ApiError(422, "bad_field", f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def get_int(
    data: dict[str, Any], key: str, default: int | None = None, *, required: bool = False
) -> int | None:
    """An integer field (bools and floats refused); `default` when absent or null."""
    value = data.get(key)
    if value is None:
        if required:
            raise ApiError(422, "missing_field", f"field {key!r} is required")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(422, "bad_field", f"field {key!r} must be an integer, got {value!r:.40}")
    return value


def get_action(data: dict[str, Any]) -> str:
    """The `action` field, capped at `MAX_ACTION_BYTES` (413 past it)."""
    action = get_str(data, "action")
    # len(str) <= len(utf-8 bytes) <= 4 * len(str): encode only when it could matter
    if len(action) * 4 > MAX_ACTION_BYTES and len(action.encode()) > MAX_ACTION_BYTES:
        raise ApiError(
            413, "payload_too_large", f"action is {len(action.encode())} bytes; limit {MAX_ACTION_BYTES}"
        )
    return action
