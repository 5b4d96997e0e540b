"""`horizonrl view RUN_DIR`: browse saved runs and replay their trajectories in a browser.

    horizonrl view runs/                 # a folder of runs, one run, an eval folder or a .jsonl
    horizonrl view runs/ --port 0        # any free port; the URL is printed once it listens

A FastAPI app serves one static page (vanilla JS, no build step, no CDN) and the JSON API
behind it:

    GET /api/runs                                        runs under the root
    GET /api/runs/{run}                                  config, trajectory sources, eval reports
    GET /api/runs/{run}/metrics                          {"steps": [...], "series": {name: [...]}}
    GET /api/runs/{run}/trajectories?source=step_3&offset=0&limit=50
        &success=true|false&category=C&item=SUBSTR&sort=index|score|turns|reward|item_id&order=asc|desc
    GET /api/runs/{run}/trajectories/{source}/{index}         one record, split into turns
    GET /api/runs/{run}/trajectories/{source}/{index}/tokens  token ids, loss mask, logprobs, and
        the update's per-token advantages / learner and reference logprobs / KL / rewards when saved
    GET /api/runs/{run}/trajectories/{source}/{index}/screenshot/{turn}  a web page screenshot (PNG)
    GET /api/runs/{run}/groups?source=step_3                 the GRPO groups of a step
    GET /api/runs/{run}/groups/{source}/{key}                one group's samples side by side
    GET /api/reports                                         every eval report of every run

Ids come from the scan of the root (see `horizonrl.viewer.store`): an unknown run, source
or index is a 404, bad query values a 400, both as `{"error": {"code", "message"}}`. The
server binds 127.0.0.1 unless told otherwise: trajectories can hold private prompts.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from horizonrl.viewer.replay import TokenDecoder, find_tokenizer_file, token_stats, turns_of
from horizonrl.viewer.store import JsonlIndex, Run, Store, token_stats_file
from horizonrl.viewer.training import expand_token_stats, group_detail, groups_of

STATIC_DIR = Path(__file__).parent / "static"
STATIC_FILES = {
    "app.js": "text/javascript",
    "charts.js": "text/javascript",
    "pages.js": "text/javascript",
    "tokens.js": "text/javascript",
    "style.css": "text/css",
}
TOKEN_FIELDS = ("token_ids", "loss_mask", "logprobs")
HEADLINE_METRICS = ("reward/mean", "success/mean", "turns/mean", "schedule/max_turns", "eval/success")
MAX_CONFIG_CHARS = 100_000


def _error(status: int, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


def _source_info(run: Run, sid: str, path: Path) -> dict[str, Any]:
    rel = path.relative_to(run.path).as_posix()
    digits = sid.rpartition("_")[2]
    kind = (
        "train"
        if rel.startswith("trajectories/")
        else "eval"
        if rel.endswith("/trajectories.jsonl")
        else "file"
    )
    return {
        "id": sid,
        "path": rel,
        "kind": kind,
        "step": int(digits) if digits.isdigit() else None,
        "bytes": path.stat().st_size if path.exists() else 0,
    }


def _filtered(
    index: JsonlIndex, success: bool | None, category: str | None, item: str | None, failed: bool | None
) -> list[dict[str, Any]]:
    rows = index.summaries
    if success is not None:
        rows = [r for r in rows if bool(r["success"]) == success]
    if failed is not None:
        rows = [r for r in rows if bool(r["failed"]) == failed]
    if category:
        rows = [r for r in rows if r["category"] == category]
    if item:
        needle = item.lower()
        rows = [r for r in rows if needle in r["item_id"].lower()]
    return rows


_SORT_KEYS = {
    "index": "index",
    "score": "score",
    "turns": "num_turns",
    "reward": "reward",
    "item_id": "item_id",
}


def create_app(root: str | Path) -> FastAPI:
    """The viewer app over everything under `root` (a folder or one `.jsonl` file)."""
    store = Store(root)
    decoders: dict[Path, TokenDecoder | None] = {}
    app = FastAPI(title="horizonrl viewer", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": {"code": exc.status_code, "message": exc.detail}}, exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": {"code": 400, "message": problems}}, 400)

    def get_run(run_id: str) -> Run:
        run = store.run(run_id)
        if run is None:
            raise _error(404, f"no run {run_id!r} under {store.root}")
        return run

    def get_source(run: Run, source: str) -> Path:
        path = run.sources.get(source) or store.refresh(run).sources.get(source)
        if path is None or not path.is_file():
            raise _error(404, f"run {run.id!r} has no trajectory source {source!r}")
        return path

    def decoder(run: Run) -> TokenDecoder | None:
        if run.path not in decoders:
            path = find_tokenizer_file(run.path)
            try:
                decoders[run.path] = TokenDecoder(path) if path else None
            except Exception:  # noqa: BLE001 (an unreadable tokenizer only costs the token text)
                decoders[run.path] = None
        return decoders[run.path]

    @app.get("/", include_in_schema=False)
    def index_page() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "index.html", media_type="text/html", headers={"Cache-Control": "no-cache"}
        )

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        if name not in STATIC_FILES:
            raise _error(404, f"no static file {name!r}")
        return FileResponse(
            STATIC_DIR / name, media_type=STATIC_FILES[name], headers={"Cache-Control": "no-cache"}
        )

    @app.get("/api/runs")
    def list_runs() -> dict[str, Any]:
        rows = []
        for run in store.runs().values():
            metrics = store.metrics(run)
            last = {
                name: next((v for v in reversed(metrics["series"][name]) if v is not None), None)
                for name in HEADLINE_METRICS
                if name in metrics["series"]
            }
            latest_report = store.report(run, list(run.reports)[-1]) if run.reports else None  # in run order
            rows.append(
                {
                    "id": run.id,
                    "kind": run.kind,
                    "path": run.path.relative_to(store.base).as_posix(),
                    "n_steps": len(metrics["steps"]),
                    "last_step": metrics["steps"][-1] if metrics["steps"] else None,
                    "last": last,
                    "eval_success": (latest_report or {}).get("success_rate"),
                    "n_sources": len(run.sources),
                    "n_reports": len(run.reports),
                    "mtime": store.mtime(run),
                }
            )
        return {"root": str(store.root), "runs": rows}

    @app.get("/api/runs/{run_id}")
    def run_overview(run_id: str) -> dict[str, Any]:
        run = store.refresh(get_run(run_id))
        config_path = run.path / "config.yaml"
        config = config_path.read_text(errors="replace")[:MAX_CONFIG_CHARS] if config_path.is_file() else None
        sources = {sid: path for sid, path in run.sources.items()}
        report_sources = {
            path.parent.relative_to(run.path).as_posix(): sid
            for sid, path in sources.items()
            if path.name == "trajectories.jsonl"
        }
        reports = [
            {"name": name, "report": store.report(run, name), "source": report_sources.get(name)}
            for name in run.reports
        ]
        return {
            "id": run.id,
            "kind": run.kind,
            "path": str(run.path),
            "config": config,
            "sources": [_source_info(run, sid, path) for sid, path in sources.items()],
            "reports": reports,
        }

    @app.get("/api/runs/{run_id}/metrics")
    def run_metrics(run_id: str) -> dict[str, Any]:
        return store.metrics(get_run(run_id))

    @app.get("/api/runs/{run_id}/trajectories")
    def list_trajectories(
        run_id: str,
        source: str | None = None,
        offset: int = Query(0, ge=0),
        limit: int = Query(50, ge=1, le=500),
        success: bool | None = None,
        failed: bool | None = None,
        category: str | None = None,
        item: str | None = None,
        sort: Literal["index", "score", "turns", "reward", "item_id"] = "index",
        order: Literal["asc", "desc"] = "asc",
    ) -> dict[str, Any]:
        run = get_run(run_id)
        if source is None:
            if not run.sources:
                raise _error(404, f"run {run.id!r} has no trajectory files")
            source = next(iter(run.sources))
        path = get_source(run, source)
        index = store.index(path)
        rows = _filtered(index, success, category, item, failed)
        key = _SORT_KEYS[sort]
        rows = sorted(rows, key=lambda r: (r[key] is None, r[key] or 0, r["index"]), reverse=order == "desc")
        n_success = sum(bool(r["success"]) for r in index.summaries)
        return {
            "source": source,
            "total": len(rows),
            "offset": offset,
            "limit": limit,
            "items": rows[offset : offset + limit],
            "n_records": len(index.summaries),
            "n_success": n_success,
            "skipped_lines": index.skipped,
            "categories": sorted({r["category"] for r in index.summaries}),
        }

    @app.get("/api/runs/{run_id}/trajectories/{source}/{index}")
    def trajectory(run_id: str, source: str, index: int) -> dict[str, Any]:
        run = get_run(run_id)
        path = get_source(run, source)
        record = store.record(path, index)
        if record is None:
            raise _error(404, f"{source} has no trajectory {index}")
        n = len(store.index(path).offsets)
        return {
            "run": run.id,
            "source": source,
            "index": index,
            "count": n,
            "record": {k: v for k, v in record.items() if k not in TOKEN_FIELDS},
            "replay": turns_of(record),
            "tokens": token_stats(record),
        }

    @app.get("/api/runs/{run_id}/trajectories/{source}/{index}/tokens")
    def trajectory_tokens(run_id: str, source: str, index: int) -> dict[str, Any]:
        run = get_run(run_id)
        record = store.record(get_source(run, source), index)
        if record is None:
            raise _error(404, f"{source} has no trajectory {index}")
        ids = [int(i) for i in record.get("token_ids") or []]
        dec = decoder(run) if ids else None
        path = get_source(run, source)
        row = store.token_stats(path, index)
        return {
            "token_ids": ids,
            "loss_mask": record.get("loss_mask") or [],
            "logprobs": record.get("logprobs") or [],
            "prompt_length": record.get("prompt_length") or 0,
            "turn_ends": record.get("turn_ends") or [],
            "pieces": dec.pieces(ids) if dec else None,
            "tokenizer": str(dec.path) if dec else None,
            "token_stats_saved": token_stats_file(path).is_file(),
            "in_update": row is not None,
            "stats": expand_token_stats(row, len(ids)) if row else {},
        }

    @app.get("/api/runs/{run_id}/trajectories/{source}/{index}/screenshot/{turn}")
    def screenshot(run_id: str, source: str, index: int, turn: int) -> FileResponse:
        run = get_run(run_id)
        path = get_source(run, source)
        record = store.record(path, index)
        views = ((record or {}).get("meta") or {}).get("views") or {}
        name = (views.get(str(turn)) or {}).get("screenshot") if isinstance(views, dict) else None
        if not isinstance(name, str) or not name:
            raise _error(404, f"{source} #{index} has no screenshot at turn {turn}")
        image = (path.parent / name).resolve()
        if image.suffix.lower() != ".png" or not image.is_relative_to(store.base) or not image.is_file():
            raise _error(404, f"screenshot {name!r} is not a PNG file inside {store.base}")
        return FileResponse(image, media_type="image/png")

    @app.get("/api/runs/{run_id}/groups")
    def list_groups(run_id: str, source: str) -> dict[str, Any]:
        run = get_run(run_id)
        path = get_source(run, source)
        groups = groups_of(store.index(path).summaries)
        return {"source": source, "groups": groups, "token_stats_saved": token_stats_file(path).is_file()}

    @app.get("/api/runs/{run_id}/groups/{source}/{key}")
    def group(run_id: str, source: str, key: int) -> dict[str, Any]:
        run = get_run(run_id)
        path = get_source(run, source)
        found = next((g for g in groups_of(store.index(path).summaries) if g["key"] == key), None)
        if found is None:
            raise _error(404, f"{source} has no group starting at trajectory {key}")
        records = [(i, store.record(path, i) or {}) for i in found["indexes"]]
        stats = {i: store.token_stats(path, i) for i in found["indexes"]}
        return {
            **found,
            **group_detail(records, stats),
            "token_stats_saved": token_stats_file(path).is_file(),
        }

    @app.get("/api/reports")
    def list_reports() -> dict[str, Any]:
        rows = []
        for run in store.runs().values():
            for name in run.reports:
                report = store.report(run, name) or {}
                rows.append(
                    {
                        "run": run.id,
                        "name": name,
                        **{k: report.get(k) for k in ("model", "env", "split", "step", "n_items", "n")},
                        "success_rate": report.get("success_rate"),
                        "categories": sorted(report.get("by_category") or {}),
                    }
                )
        return {"reports": rows}

    return app


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, so the printed URL (with the real port when port=0) answers at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def view_main(args: argparse.Namespace) -> int:
    import uvicorn

    root = Path(args.run_dir)
    if not root.exists():
        print(f"horizonrl view: {root} does not exist", file=sys.stderr)
        return 2
    app = create_app(root)
    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        print(f"horizonrl view: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"horizonrl view: {root.resolve()} at http://{shown}:{port}/", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
    return 0
