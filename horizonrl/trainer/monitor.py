"""Per-step metrics: `metrics.jsonl`, TensorBoard events, W&B (when configured), a console line.

    monitor = Monitor(run_dir, cfg.logging, config_dict)
    monitor.log(step, {"reward/mean": 0.4, ...}, histograms={"turns": [3, 5, 2]})
    monitor.close()

`metrics.jsonl` holds one JSON object per step (`{"step": N, name: value, ...}`), the
histograms as `{"<name>/hist": {value: count}}`. Names use `/` groups (`loss/policy`, `time/rollout`).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from horizonrl.config import LoggingConfig


class PhaseTimer:
    """Wall time per named phase: `with timer("rollout"): ...`, then `timer.seconds`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


class Monitor:
    def __init__(self, run_dir: Path, cfg: LoggingConfig, config: dict[str, Any] | None = None) -> None:
        self.cfg = cfg
        self.path = run_dir / "metrics.jsonl"
        self.tb: Any = None
        self.wandb: Any = None
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        if cfg.wandb_project:
            try:
                import wandb
            except ImportError as exc:
                raise SystemExit(
                    "logging.wandb_project is set but wandb is not installed: pip install wandb"
                ) from exc
            self.wandb = wandb.init(
                project=cfg.wandb_project, dir=str(run_dir), config=config, resume="allow"
            )

    def truncate_after(self, step: int) -> None:
        """Drop lines of steps after `step` (a resumed run rewrites them)."""
        if not self.path.exists():
            return
        keep = [
            line for line in self.path.read_text().splitlines() if line and json.loads(line)["step"] <= step
        ]
        self.path.write_text("".join(line + "\n" for line in keep))

    def log(
        self, step: int, metrics: dict[str, float], histograms: dict[str, list[int]] | None = None
    ) -> None:
        record: dict[str, Any] = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        for name, values in (histograms or {}).items():
            record[f"{name}/hist"] = {str(k): v for k, v in sorted(Counter(values).items())}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for name, value in metrics.items():
                self.tb.add_scalar(name, value, step)
            for name, values in (histograms or {}).items():
                if values:
                    import numpy as np

                    self.tb.add_histogram(name, np.asarray(values), step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(metrics, step=step)

    def console(self, step: int, total: int, metrics: dict[str, float]) -> None:
        if not self.cfg.console:
            return
        parts = [f"step {step}/{total}"]
        for key, label, fmt in (
            ("schedule/max_turns", "cap", "{:.0f}"),
            ("success/mean", "success", "{:.3f}"),
            ("reward/mean", "reward", "{:.3f}"),
            ("turns/mean", "turns", "{:.1f}"),
            ("loss/policy", "pg", "{:+.4f}"),
            ("kl/mean", "kl", "{:.4f}"),
            ("entropy/mean", "ent", "{:.3f}"),
            ("grad/norm", "gnorm", "{:.3f}"),
            ("throughput/tokens_per_s", "learn tok/s", "{:.0f}"),
            ("time/step", "s", "{:.1f}"),
            ("memory/rss_gb", "GB", "{:.1f}"),
        ):
            if key in metrics:
                parts.append(f"{label} {fmt.format(metrics[key])}")
        print(" | ".join(parts), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _clean(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value
