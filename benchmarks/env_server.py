"""Env-server throughput and latency: `horizonrl serve FAMILY` beside a bare echo app.

    python benchmarks/env_server.py --family textcraft --duration 5 --out benchmarks/results/env_server.md

Setup (all on this machine, measured in one run):
- `horizonrl serve FAMILY` is started as a subprocess (uvicorn, one worker, the same
  settings as a user gets: uvloop + httptools when installed, access log off).
- The HTTP ceiling is a bare FastAPI app under the same uvicorn settings, in another
  subprocess: `POST /echo` returns the request body (a plain route reading the body the
  leanest way, no parsing), and `POST /echo_model` is the textbook FastAPI route (a
  pydantic body model, dict answer) for comparison.
- The load generator is this process: one asyncio loop of raw HTTP/1.1 keep-alive
  connections (no httpx: its per-request overhead would make the client the bottleneck),
  C connections each with its own session, each sending its next request as soon as the
  previous answer arrives, for `--duration` seconds after a warm-up. Every answer's
  status is checked (a non-200 aborts the run).
- Env routes measured: v1 `POST /v1/sessions/{sid}/step` and the AgentGym `POST /step`.
  The action is `--action` (TextCraft: `inventory`, a valid action that never ends the
  episode), so every request really runs `env.step`.
- Client and servers share the machine's cores: the figures are what one box gives, and
  the ratio to echo (same box, same run, same client) is the comparable number.

For families other than textcraft it also reports the reset latency and the memory per
session (RSS of the server and its worker processes, divided by the sessions open). For
families whose sessions run in worker processes (sciworld, web) it also reports each
session's own memory: RSS and PSS (shared pages split between the processes sharing them)
of its worker and the worker's children (web: Playwright's driver and Chromium's browser,
zygote, GPU, network and renderer processes), and how many such sessions fit in 1 GiB.

    python benchmarks/env_server.py --family web --item 0 --action "click [3]" --concurrency 1,2,4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from horizonrl.server.agentgym import layout_for

ROOT = Path(__file__).resolve().parent.parent


# ---- the echo app (run in its own process with --echo-server) -------------------------------


class EchoBody(BaseModel):
    action: str


def run_echo_server(port: int) -> None:
    import uvicorn
    from fastapi import FastAPI
    from starlette.requests import Request
    from starlette.responses import Response

    sys.path.insert(0, str(ROOT))
    from horizonrl.server.app import uvicorn_options

    app = FastAPI(openapi_url=None)

    async def echo(request: Request) -> Response:
        # the leanest body read (one ASGI message), as the env server does it
        message = await request.receive()
        body = message.get("body", b"")
        while message.get("more_body", False):
            message = await request.receive()
            body += message.get("body", b"")
        return Response(body, media_type="application/json")

    @app.post("/echo_model")
    async def echo_model(body: EchoBody) -> dict[str, Any]:
        return {"action": body.action}

    app.add_route("/echo", echo, methods=["POST"])
    app.add_route("/healthz", lambda request: Response(b"{}", media_type="application/json"), methods=["GET"])
    uvicorn.run(app, host="127.0.0.1", port=port, **uvicorn_options("warning"))


# ---- a minimal HTTP/1.1 keep-alive client ---------------------------------------------------


class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def raw(self, method: str, path: str, body: Any = None) -> bytes:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
        return (head + f"content-length: {len(data)}\r\n\r\n").encode() + data

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        i = lower.find(b"content-length:")
        n = int(lower[i + 15 : lower.find(b"\r\n", i)]) if i >= 0 else 0
        return status, await self.reader.readexactly(n)

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self.send(self.raw(method, path, body))
        if status >= 300:
            raise RuntimeError(f"{method} {path} -> {status}: {data[:300]!r}")
        return json.loads(data) if data else None

    def close(self) -> None:
        self.writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (from /proc; Linux only)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(
    conns: list[Conn], requests: list[bytes], duration: float, warmup: float, pid: int
) -> dict[str, float]:
    """Each connection sends its request back to back; latencies after `warmup` are kept.

    Also measures the server's CPU time per request over the whole drive: unlike
    requests/s, that figure hardly moves when other processes compete for the cores.
    """
    cpu0 = cpu_seconds(pid)
    total = [0]
    start = time.perf_counter()
    t_measure, t_end = start + warmup, start + warmup + duration
    latencies: list[list[float]] = [[] for _ in conns]

    async def loop(i: int) -> None:
        conn, raw, lat = conns[i], requests[i], latencies[i]
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                return
            status, body = await conn.send(raw)
            if status != 200:
                raise RuntimeError(f"status {status}: {body[:300]!r}")
            total[0] += 1
            if t0 >= t_measure:
                lat.append(time.perf_counter() - t0)

    await asyncio.gather(*(loop(i) for i in range(len(conns))))
    flat = sorted(x for lat in latencies for x in lat)
    q = statistics.quantiles(flat, n=100, method="inclusive")
    cpu_us = (cpu_seconds(pid) - cpu0) / total[0] * 1e6
    return {"rps": len(flat) / duration, "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "cpu_us": cpu_us}


# ---- processes ------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(cmd: list[str], port: int) -> subprocess.Popen[bytes]:
    import httpx

    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd} exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{cmd} did not become ready")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """RSS of `pid` and all its descendants, in MiB (from /proc; Linux only); `field="Pss"` for PSS."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            source = "smaps_rollup" if field == "Pss" else "status"
            for line in Path(f"/proc/{p}/{source}").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


# ---- the run --------------------------------------------------------------------------------


async def open_sessions(
    conns: list[Conn], family: str, item: str
) -> tuple[list[str], list[int], float, list[int]]:
    """One session per connection; returns v1 ids, AgentGym ids, the mean create+reset ms and the
    sessions' worker pids (none for families stepped in the server's process)."""
    t0 = time.perf_counter()
    created = await asyncio.gather(
        *(c.call("POST", "/v1/sessions", {"item_id": item, "seed": 0}) for c in conns)
    )
    reset_ms = (time.perf_counter() - t0) * 1000 / len(conns)
    sids = [s["session_id"] for s in created]
    states = await asyncio.gather(
        *(c.call("GET", f"/v1/sessions/{sid}") for c, sid in zip(conns, sids, strict=True))
    )
    workers = [int(st["worker_pid"]) for st in states if st.get("worker_pid")]
    return sids, [st["id"] for st in states], reset_ms, workers


async def bench(
    args: argparse.Namespace, env_port: int, echo_port: int, pid: int, echo_pid: int
) -> list[dict[str, Any]]:
    """Per concurrency, `--repeats` interleaved rounds of every target; the median round is kept."""
    rows: list[dict[str, Any]] = []
    for c in args.concurrency:
        env_conns = [Conn("127.0.0.1", env_port) for _ in range(c)]
        echo_conns = [Conn("127.0.0.1", echo_port) for _ in range(c)]
        await asyncio.gather(*(conn.open() for conn in env_conns + echo_conns))
        item = f"{args.family}_{args.item}"
        sids, nums, reset_ms, workers = await open_sessions(env_conns, args.family, item)
        rss = rss_mib(pid) / c
        worker_rss = statistics.mean(rss_mib(w) for w in workers) if workers else None
        worker_pss = statistics.mean(rss_mib(w, "Pss") for w in workers) if workers else None
        body = {"action": args.action}
        id_field = layout_for(args.family).id_field  # "id", or "env_idx" for search and web
        targets = {
            "echo, plain route (ceiling)": [k.raw("POST", "/echo", body) for k in echo_conns],
            "echo, pydantic route": [k.raw("POST", "/echo_model", body) for k in echo_conns],
            f"horizonrl serve {args.family}, v1 step": [
                k.raw("POST", f"/v1/sessions/{sid}/step", body)
                for k, sid in zip(env_conns, sids, strict=True)
            ],
            f"horizonrl serve {args.family}, agentgym /step": [
                k.raw("POST", "/step", {id_field: num, **body})
                for k, num in zip(env_conns, nums, strict=True)
            ],
        }
        results: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
        for _ in range(args.repeats):
            for name, raws in targets.items():
                conns = echo_conns if name.startswith("echo") else env_conns
                for conn in conns:  # fresh connections: the idle ones may have hit keep-alive expiry
                    conn.close()
                await asyncio.gather(*(conn.open() for conn in conns))
                server_pid = echo_pid if name.startswith("echo") else pid
                results[name].append(await drive(conns, raws, args.duration, args.warmup, server_pid))
        for name, runs in results.items():
            median = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]
            cpu_us = statistics.median(r["cpu_us"] for r in runs)
            rows.append(
                {"server": name, "c": c, **median, "cpu_us": cpu_us, "all_rps": [r["rps"] for r in runs]}
            )
        rows.append({"server": "sessions", "c": c, "reset_ms": reset_ms, "rss_per_session_mib": rss,
                     "worker_rss_mib": worker_rss, "worker_pss_mib": worker_pss})  # fmt: skip
        await asyncio.gather(
            *(k.call("DELETE", f"/v1/sessions/{sid}") for k, sid in zip(env_conns, sids, strict=True))
        )
        for conn in env_conns + echo_conns:
            conn.close()
    return rows


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    ceiling = {r["c"]: r for r in rows if r["server"].startswith("echo, plain")}
    lines = [
        "| server / route | connections | requests/s (median round) | p50 ms | p99 ms | ratio to echo "
        "| best round | ratio (best) | server CPU µs/request | CPU ratio (echo / this) "
        "| requests/s of each round |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "rps" not in r:
            continue
        ratio = r["rps"] / ceiling[r["c"]]["rps"]
        best = max(r["all_rps"])
        best_ratio = best / max(ceiling[r["c"]]["all_rps"])
        cpu_ratio = ceiling[r["c"]]["cpu_us"] / r["cpu_us"]
        rounds = ", ".join(f"{x:,.0f}" for x in r["all_rps"])
        lines.append(
            f"| {r['server']} | {r['c']} | {r['rps']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
            f"| {ratio:.2f} | {best:,.0f} | {best_ratio:.2f} | {r['cpu_us']:.0f} | {cpu_ratio:.2f} "
            f"| {rounds} |"
        )
    lines += [
        "",
        "| connections | create+reset ms (mean, concurrent) | RSS per session MiB (server + workers / "
        "sessions) | worker RSS per session MiB | worker PSS per session MiB | sessions per GiB (PSS) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "reset_ms" not in r:
            continue
        own = "| - | - | - |"
        if r.get("worker_rss_mib"):
            pss = r["worker_pss_mib"]
            own = f"| {r['worker_rss_mib']:.1f} | {pss:.1f} | {1024 / pss:.1f} |"
        lines.append(f"| {r['c']} | {r['reset_ms']:.1f} | {r['rss_per_session_mib']:.1f} {own}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="textcraft")
    parser.add_argument("--action", default="inventory", help="the step action sent by every request")
    parser.add_argument("--item", type=int, default=5, help="item index each session is reset to")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16, 64])
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds per cell (median kept)")
    parser.add_argument("--out", default=None, help="also write the Markdown table here")
    parser.add_argument("--echo-server", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server is not None:
        run_echo_server(args.echo_server)
        return
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    env_port, echo_port = free_port(), free_port()
    server = start([sys.executable, "-m", "horizonrl.cli", "serve", args.family, "--port", str(env_port),
                    "--max-sessions", "4096"], env_port)  # fmt: skip
    echo = start([sys.executable, __file__, "--echo-server", str(echo_port)], echo_port)
    load_before = os.getloadavg()[0]
    try:
        rows = asyncio.run(bench(args, env_port, echo_port, server.pid, echo.pid))
    finally:
        for proc in (server, echo):
            proc.terminate()
            proc.wait(30)
    text = table(rows, args)
    text += (
        f"\n\n{os.cpu_count()} CPUs; 1-min load average {load_before:.1f} before the run, "
        f"{os.getloadavg()[0]:.1f} after; {args.repeats} interleaved rounds of {args.duration:g} s per cell."
    )
    print(text)
    if args.out:
        command = "python benchmarks/env_server.py " + " ".join(sys.argv[1:])
        Path(args.out).write_text(f"`{command}`\n\n{text}\n")


if __name__ == "__main__":
    main()
