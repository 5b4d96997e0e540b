"""Eval figures (avg@k, pass@k, per category, several families) and the report files."""

from __future__ import annotations

import json

import pytest

from horizonrl.eval.metrics import eval_summary
from horizonrl.eval.report import combine, write_report
from horizonrl.rollout.trajectory import Trajectory


def _t(item: str, group: int, success: bool, *, cat: str = "a", score: float | None = None, turns: int = 2,
       failed: bool = False) -> Trajectory:  # fmt: skip
    return Trajectory(
        item_id=item, category=cat, group_id=group, success=success, failed=failed, num_turns=turns,
        score=float(success) if score is None else score,
    )  # fmt: skip


TRAJS = [
    _t("x_0", 0, True, turns=3),
    _t("x_0", 0, False, turns=5),
    _t("x_1", 1, False, cat="b", score=0.5),  # partial score (SciWorld-like) is not a pass
    _t("x_1", 1, False, cat="b", failed=True),
]


def test_avg_and_pass_at_k_per_category():
    s = eval_summary(TRAJS, categories=("a", "b", "c"))
    assert s["n_items"] == 2 and s["n_trajectories"] == 4 and s["n_failed"] == 1
    assert s["success_rate"] == 0.25
    assert s["avg_at_k"] == pytest.approx((0.5 + 0.0) / 2)
    assert s["pass_at_k"] == 0.5
    assert s["mean_score"] == pytest.approx(1.5 / 4)
    assert s["mean_turns"] == pytest.approx(3.0)
    assert s["by_category"]["a"]["pass_at_k"] == 1.0 and s["by_category"]["a"]["avg_at_k"] == 0.5
    assert s["by_category"]["b"]["pass_at_k"] == 0.0 and s["by_category"]["b"]["mean_score"] == 0.25
    assert s["by_category"]["c"]["n_items"] == 0  # listed categories keep their row


def test_several_families_average_and_files(tmp_path):
    one = eval_summary(TRAJS)
    two = eval_summary([_t("y_0", 0, True, cat="g"), _t("y_1", 1, True, cat="g")])
    report = combine({"fam1": one, "fam2": two}, model="m", split="test", k=2, settings={"n": 2})
    assert report["env"] == "fam1,fam2" and report["n_items"] == 4
    assert report["success_rate"] == pytest.approx((0.25 + 1.0) / 2)
    assert report["pass_at_k"] == pytest.approx((0.5 + 1.0) / 2)
    assert set(report["by_category"]) == {"fam1/a", "fam1/b", "fam2/g"}
    json_path, md_path = write_report(report, tmp_path)
    assert json.loads(json_path.read_text())["families"]["fam2"]["success_rate"] == 1.0
    md = md_path.read_text()
    assert "| fam1 | 2 | 25.0 |" in md and "| fam2 | 2 | 100.0 |" in md and "| **average** | 4 | 62.5 |" in md
    assert "## fam1" in md and "| b | 1 | 0.0 | 0.250 | 0.0 | 0.0 | 2.0 | 1 |" in md
    assert "avg@2" in md and "pass@2" in md
