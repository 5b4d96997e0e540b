"""Where the viewer's data comes from: runs found under one root folder, read lazily.

The root given to `horizonrl view` can be:

- a training run (`config.yaml`, `metrics.jsonl`, `trajectories/step_N.jsonl`,
  `eval/**/report.json` + `trajectories.jsonl`),
- an eval output folder (`report.json`, `report.md`, `trajectories.jsonl`),
- a single trajectory `.jsonl` file (e.g. `horizonrl solve --out FILE`),
- a folder holding any number of the above, nested a few levels deep.

Runs and trajectory files are addressed by ids that the scan hands out (`"runs~ppo"`,
`"step_3"`); a request only ever looks an id up in those tables, so no part of a URL is
joined onto a filesystem path and nothing outside the root can be reached.

Trajectory files can be large (token ids of every turn): a file is scanned once for the
byte offset and a small summary of each line, and the scan is cached until the file's
mtime or size changes. A record is read back with one seek. Lines that do not parse (the
last line of a file still being written) are skipped and counted.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUN_MARKERS = ("metrics.jsonl", "config.yaml", "report.json", "trajectories.jsonl")
SKIP_DIRS = {"checkpoints", "tensorboard", "wandb", "__pycache__", "node_modules"}
MAX_DEPTH = 4
"""How deep below the root to look for runs (runs/<group>/<name>/... is depth 2)."""

SUMMARY_FIELDS = (
    "item_id", "category", "success", "score", "reward", "num_turns", "terminated",
    "truncated", "failed", "fail_reason", "group_id", "sample_index", "max_turns",
)  # fmt: skip


@dataclass
class Run:
    id: str
    path: Path
    kind: str
    """`train` (a config, metrics or step files), `eval` (a report without them) or `file`."""
    sources: dict[str, Path] = field(default_factory=dict)
    """Trajectory files of this run by source id, in display order."""
    reports: dict[str, Path] = field(default_factory=dict)
    """`report.json` files by their folder relative to the run (`"."`, `"eval/step_10"`), in the
    order the evals ran (`eval/initial`, `eval/step_N`..., `eval/final`): the last is the latest."""


def _id(rel: Path) -> str:
    """URL-safe id of a relative path: one path segment, no dots-only names."""
    return "~".join(rel.parts) or "."


def _looks_like_trajectories(path: Path) -> bool:
    """True for a JSONL whose first record carries trajectory fields (not a corpus or QA file)."""
    try:
        with path.open("rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return b'"item_id"' in head and (b'"messages"' in head or b'"success"' in head)


def _step_key(path: Path) -> tuple[int, str]:
    digits = path.stem.rpartition("_")[2]
    return (int(digits), path.stem) if digits.isdigit() else (1 << 62, path.stem)


def _report_key(folder: Path) -> tuple[int, int, str]:
    """Evals in the order they ran: `initial` first, `step_N` by N, then others, `final` last."""
    name = folder.name
    digits = name.rpartition("_")[2]
    if name == "initial":
        return (0, 0, name)
    if digits.isdigit():
        return (1, int(digits), name)
    return (3, 0, name) if name == "final" else (2, 0, name)


def _collect(run: Run) -> None:
    """Fill a run's sources and reports (trainer steps first, then evals, then other files)."""
    base = run.path
    files: list[Path] = []
    traj_dir = base / "trajectories"
    if traj_dir.is_dir():
        files += sorted(traj_dir.glob("*.jsonl"), key=_step_key)
    files += sorted(p for p in base.glob("*.jsonl") if p.name != "metrics.jsonl")
    for report in sorted(_walk_files(base, "report.json"), key=lambda p: _report_key(p.parent)):
        rel = report.parent.relative_to(base)
        run.reports[rel.as_posix()] = report
        if report.parent != base and (report.parent / "trajectories.jsonl").is_file():
            files.append(report.parent / "trajectories.jsonl")
    for path in files:
        rel = path.relative_to(base).with_suffix("")
        if rel.parent == Path("trajectories"):
            rel = Path(rel.name)
        elif rel.name == "trajectories" and rel.parent != Path("."):
            rel = rel.parent
        sid = _id(rel)
        if sid in run.sources:  # e.g. ./step_3.jsonl beside trajectories/step_3.jsonl
            sid = _id(path.relative_to(base).with_suffix(""))
        run.sources.setdefault(sid, path)


def _walk_files(base: Path, name: str, depth: int = 3) -> list[Path]:
    found: list[Path] = []
    if (base / name).is_file():
        found.append(base / name)
    if depth == 0:
        return found
    try:
        children = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return found
    for child in children:
        if child.name not in SKIP_DIRS and not child.name.startswith("."):
            found += _walk_files(child, name, depth - 1)
    return found


def scan_runs(root: Path) -> dict[str, Run]:
    """Every run under `root` (or `root` itself), by id, in path order."""
    root = root.resolve()
    runs: dict[str, Run] = {}
    if root.is_file():
        run = Run(id=root.stem, path=root.parent, kind="file", sources={root.stem: root})
        return {run.id: run}

    def visit(folder: Path, depth: int) -> None:
        rel = folder.relative_to(root)
        is_run = any((folder / m).is_file() for m in RUN_MARKERS) or (folder / "trajectories").is_dir()
        if is_run:
            trained = any((folder / m).exists() for m in ("metrics.jsonl", "config.yaml", "trajectories"))
            run = Run(id=_id(rel) if rel.parts else folder.name or "run", path=folder,
                      kind="train" if trained else "eval")  # fmt: skip
            _collect(run)
            runs[run.id] = run
            return
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_file() and entry.suffix == ".jsonl" and _looks_like_trajectories(entry):
                sid = entry.stem
                run = Run(id=_id(entry.relative_to(root).with_suffix("")), path=folder, kind="file",
                          sources={sid: entry})  # fmt: skip
                runs[run.id] = run
            elif entry.is_dir() and entry.name not in SKIP_DIRS and depth < MAX_DEPTH:
                visit(entry, depth + 1)

    visit(root, 0)
    return runs


# --------------------------------------------------------------------------- file caches


class _Cache:
    """Parsed results per file, kept while the file's (mtime, size) is unchanged; LRU-bounded."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.items: OrderedDict[Path, tuple[tuple[int, int], Any]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, path: Path, build: Any) -> Any:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        with self.lock:
            hit = self.items.get(path)
            if hit is not None and hit[0] == stamp:
                self.items.move_to_end(path)
                return hit[1]
        value = build(path)
        with self.lock:
            self.items[path] = (stamp, value)
            self.items.move_to_end(path)
            while len(self.items) > self.capacity:
                self.items.popitem(last=False)
        return value


@dataclass
class JsonlIndex:
    offsets: list[tuple[int, int]]
    """(byte offset, byte length) of each parsed record, in file order."""
    summaries: list[dict[str, Any]]
    skipped: int
    """Lines that did not parse (typically a half-written last line)."""


def _summary(record: dict[str, Any], index: int) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, **{k: record.get(k) for k in SUMMARY_FIELDS}}
    mask = record.get("loss_mask") or []
    out["n_tokens"] = len(record.get("token_ids") or [])
    out["n_sampled"] = int(sum(mask))
    out["n_messages"] = len(record.get("messages") or [])
    out["category"] = str(out["category"] or "")
    out["item_id"] = str(out["item_id"] or "")
    return out


def _build_index(path: Path) -> JsonlIndex:
    offsets: list[tuple[int, int]] = []
    summaries: list[dict[str, Any]] = []
    skipped = 0
    with path.open("rb") as f:
        pos = 0
        for line in f:
            start, pos = pos, pos + len(line)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if not isinstance(record, dict):
                skipped += 1
                continue
            summaries.append(_summary(record, len(offsets)))
            offsets.append((start, len(line)))
    return JsonlIndex(offsets, summaries, skipped)


def token_stats_file(path: Path) -> Path:
    """`trajectories/token_stats/step_N.jsonl` beside `trajectories/step_N.jsonl`."""
    return path.parent / "token_stats" / path.name


def _build_stats_index(path: Path) -> dict[int, tuple[int, int]]:
    """Trajectory index -> (byte offset, length) of its line in a token-stats file."""
    offsets: dict[int, tuple[int, int]] = {}
    with path.open("rb") as f:
        pos = 0
        for line in f:
            start, pos = pos, pos + len(line)
            head = line[:40]  # lines start with {"index": N, (the writer's key order)
            try:
                index = int(head.split(b":", 1)[1].split(b",", 1)[0])
            except (IndexError, ValueError):
                continue
            offsets[index] = (start, len(line))
    return offsets


def _read_metrics(path: Path) -> dict[str, Any]:
    """Merge `metrics.jsonl` lines by step (eval metrics arrive as a second line of a step)."""
    by_step: dict[int, dict[str, float]] = {}
    skipped = 0
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                step = int(record["step"])
            except (ValueError, KeyError, TypeError):
                skipped += 1
                continue
            row = by_step.setdefault(step, {})
            for key, value in record.items():
                if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                    row[key] = float(value)
    steps = sorted(by_step)
    names = sorted({k for row in by_step.values() for k in row})
    series = {name: [by_step[s].get(name) for s in steps] for name in names}
    return {"steps": steps, "series": series, "skipped": skipped}


class Store:
    """Runs under a root, their metrics, reports and trajectory files (all read on demand)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.exists():
            raise FileNotFoundError(f"{root} does not exist")
        self.base = self.root if self.root.is_dir() else self.root.parent
        """The folder everything served must lie in (the root, or the folder of a root file)."""
        self._runs: dict[str, Run] = {}
        self._indexes = _Cache()
        self._metrics = _Cache(capacity=16)
        self._stats = _Cache(capacity=16)

    def runs(self, rescan: bool = True) -> dict[str, Run]:
        if rescan or not self._runs:
            self._runs = scan_runs(self.root)
        return self._runs

    def run(self, run_id: str) -> Run | None:
        """The run with this id; rescans once so that a run started after launch shows up."""
        return self.runs(rescan=False).get(run_id) or self.runs().get(run_id)

    def refresh(self, run: Run) -> Run:
        """Re-collect a run's files (new steps and evals appear while it trains)."""
        fresh = Run(id=run.id, path=run.path, kind=run.kind)
        if run.kind == "file":
            fresh.sources = dict(run.sources)
        else:
            _collect(fresh)
        self._runs[run.id] = fresh
        return fresh

    def _inside(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.base)

    def metrics(self, run: Run) -> dict[str, Any]:
        path = run.path / "metrics.jsonl"
        if run.kind == "file" or not path.is_file() or not self._inside(path):
            return {"steps": [], "series": {}, "skipped": 0, "stamp": None}
        result: dict[str, Any] = self._metrics.get(path, _read_metrics)
        st = path.stat()
        return {**result, "stamp": f"{st.st_mtime_ns}-{st.st_size}"}

    def report(self, run: Run, name: str) -> dict[str, Any] | None:
        path = run.reports.get(name)
        if path is None or not path.is_file() or not self._inside(path):
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def index(self, path: Path) -> JsonlIndex:
        if not self._inside(path):
            raise FileNotFoundError(path)
        result: JsonlIndex = self._indexes.get(path, _build_index)
        return result

    def record(self, path: Path, index: int) -> dict[str, Any] | None:
        """The full record at position `index` of the file, or None when there is none."""
        idx = self.index(path)
        if not 0 <= index < len(idx.offsets):
            return None
        start, length = idx.offsets[index]
        with path.open("rb") as f:
            f.seek(start)
            data = f.read(length)
        try:
            record = json.loads(data)
        except ValueError:  # the file was rewritten between the index and this read
            return None
        return record if isinstance(record, dict) else None

    def token_stats(self, path: Path, index: int) -> dict[str, Any] | None:
        """The update's per-token data for record `index` of trajectory file `path` (written with
        `logging.save_token_stats`, see `horizonrl.trainer.token_stats`), or None."""
        sidecar = token_stats_file(path)
        if not sidecar.is_file() or not self._inside(sidecar):
            return None
        offsets: dict[int, tuple[int, int]] = self._stats.get(sidecar, _build_stats_index)
        if index not in offsets:
            return None
        start, length = offsets[index]
        with sidecar.open("rb") as f:
            f.seek(start)
            data = f.read(length)
        try:
            row = json.loads(data)
        except ValueError:
            return None
        return row if isinstance(row, dict) else None

    def mtime(self, run: Run) -> float:
        paths = [run.path / "metrics.jsonl", *run.sources.values(), *run.reports.values()]
        stamps = [p.stat().st_mtime for p in paths if p.exists()]
        return max(stamps, default=os.path.getmtime(run.path))
