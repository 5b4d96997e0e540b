"""The scoreboard over learning-protocol archives: each RL arm against the SFT timed against it."""

from __future__ import annotations

import json

from benchmarks import protocol_scoreboard as board


def result(arm: str, kind: str, seed: int | None, wins: list[int], **extra) -> dict:
    items = {f"textcraft_{i}": float(w) for i, w in enumerate(wins)}
    return {
        "arm": arm,
        "label": arm,
        "kind": kind,
        "seed": seed,
        "step_seconds": 10.0,
        "steps": 4 if kind == "rl" else 0,
        "sampled_tokens": 100 if kind == "rl" else 0,
        "wall_s": 20.0,
        "items": items,
        "categories": {i: "depth 1" for i in items},
        "start_sha256": "ab" * 32,
        "machine": "cpu x2",
        "load_avg": 1.0,
        "metrics": [],
        **extra,
    }


def write(path, runs: list[dict]) -> None:
    path.write_text(json.dumps({"commands": ["python benchmarks/protocol.py ..."], "runs": runs}))


def test_each_rl_arm_faces_the_sft_timed_against_it_and_the_bar_is_applied(tmp_path):
    """Archive a: grpo (2 seeds, 9 of 10 items each) against sft-equal timed against grpo (2 of 10):
    +70 points, intervals apart, the bar met; grpo-low-lr (no SFT timed against it) gets a row
    without a baseline. Archive b: level with its SFT, the bar not met."""
    start = result("sft", "eval", None, [1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    # seed 0 updated at 3 of its 4 steps, seed 1 at 2: 2.5 of 4 steps, 1/4 of the groups with signal
    steps = [{"update/skipped": float(skip), "groups/informative_frac": 0.25} for skip in (0, 1, 0, 0)]
    rl = [
        result("grpo", "rl", 0, [1] * 9 + [0], metrics=steps),
        result("grpo", "rl", 1, [1] * 9 + [0], metrics=[*steps[:2], *steps[:2]]),
    ]
    eq = [result("sft-equal", "sft", s, [1, 1] + [0] * 8, budget_arm="grpo", budget_s=10.0) for s in (0, 1)]
    low = [result("grpo-low-lr", "rl", 0, [1, 1, 1] + [0] * 7)]
    write(tmp_path / "learning_protocol_a.runs.json", [start, *rl, *eq, *low])
    level = [result("grpo", "rl", 0, [1] * 5 + [0] * 5), result("sft-equal", "sft", 0, [1] * 5 + [0] * 5)]
    write(tmp_path / "learning_protocol_b.runs.json", [start, *level])
    mixed = [{**eq[0]}, {**eq[1], "budget_arm": "grpo-low-lr"}]  # seed 1 timed against another arm
    write(tmp_path / "learning_protocol_c.runs.json", [start, *rl, *mixed, *low])

    rows = [r for p in board.archives(tmp_path) for r in board.rows(p, n_boot=200)]
    a = {(r["archive"], r["arm"]): r for r in rows}
    won = a["learning_protocol_a", "grpo"]
    assert won["equal_arm"] == "sft-equal" and won["equal_seeds"] == 2 and won["seeds"] == 2
    assert abs(won["diff"] - 0.7) < 1e-9 and won["bar"] is True
    assert abs(won["vs_start"][0] - 0.7) < 1e-9 and abs(won["start"] - 0.2) < 1e-9
    assert won["signal"] == (2.5, 0.25)
    assert a["learning_protocol_a", "grpo-low-lr"]["equal_arm"] is None
    assert a["learning_protocol_a", "grpo-low-lr"]["signal"] is None  # no step metrics archived
    tie = a["learning_protocol_b", "grpo"]
    assert tie["diff"] == 0.0 and tie["bar"] is False
    # sft-equal's seeds had two RL arms' seconds: it is neither arm's equal-compute baseline
    assert [r["equal_arm"] for r in rows if r["archive"] == "learning_protocol_c"] == [None, None]

    assert board.main(["--results", str(tmp_path)]) == 0
    text = (tmp_path / "learning_protocol_scoreboard.md").read_text()
    assert "| a | textcraft | cpu x2 | abababab…, 20.0 | grpo | 2 | 4 | **90.0**" in text
    assert "| 2.5 of 4, 25% |" in text and "| — | — | — | — | — |" in text  # grpo-low-lr: none of it
    assert "| sft-equal (2) | 20.0 " in text and "| **+70.0 [" in text and "| met |" in text
    assert "1 of 2 RL-vs-equal-compute pairs meet the bar." in text


def test_an_archive_of_rescored_checkpoints_says_under_which_eval(tmp_path):
    """`protocol_rescore.py` archives: the row names the eval overrides after the archive's name."""
    mark = {"rescored": {"overrides": ["eval.max_turns=10"], "checkpoint": "x"}}
    runs = [
        result("grpo", "rl", 0, [1] * 5 + [0] * 5, **mark),
        result("sft-equal", "sft", 0, [1] * 5 + [0] * 5, **mark),
    ]
    write(tmp_path / "learning_protocol_r.runs.json", runs)
    write(
        tmp_path / "learning_protocol_s.runs.json",
        [{k: v for k, v in r.items() if k != "rescored"} for r in runs],
    )
    assert board.main(["--results", str(tmp_path)]) == 0
    text = (tmp_path / "learning_protocol_scoreboard.md").read_text()
    assert "| r (rescored: eval.max_turns=10) | textcraft |" in text and "| s | textcraft |" in text


def test_the_bar_needs_ten_points_and_intervals_apart():
    rl, eq = {"ci95": (0.5, 0.7)}, {"ci95": (0.3, 0.45)}
    assert board.meets_bar(rl, eq, 0.15)
    assert not board.meets_bar(rl, eq, 0.09)  # apart, but under 10 points
    assert not board.meets_bar(rl, {"ci95": (0.3, 0.55)}, 0.15)  # 15 points, the intervals overlap


def test_the_protocol_rewrites_the_page_when_it_writes_an_archive(tmp_path, monkeypatch):
    """`protocol.py --results NAME` (here `--report-only` over an archive) leaves the scoreboard
    with NAME's rows, so the committed page never lags the archives."""
    from benchmarks import protocol, protocol_report

    monkeypatch.setattr(protocol_report, "RESULTS", tmp_path)
    runs = [
        result("sft", "eval", None, [1, 0, 0, 0]),
        result("grpo", "rl", 0, [1, 1, 0, 0]),
        result("sft-equal", "sft", 0, [1, 0, 0, 0], budget_arm="grpo", budget_s=10.0),
    ]
    write(tmp_path / "learning_protocol_t.runs.json", runs)
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--report-only", "--out", str(out), "--results", "learning_protocol_t"]
    assert protocol.main(argv) == 0
    page = (tmp_path / board.SCOREBOARD).read_text()
    assert "| t | textcraft | cpu x2 | abababab…, 25.0 | grpo | 1 | 4 | **50.0**" in page
    assert "| sft-equal (1) | 25.0 " in page
