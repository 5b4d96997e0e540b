"""The learning protocol end to end at its smallest size: the tiny model on real TextCraft envs."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from benchmarks import protocol

TINY = [
    "model.path=tiny",
    "model.gradient_checkpointing=false",
    "trainer.num_threads=2",
    "data.batch_size=1",
    "rollout.n=2",
    "rollout.max_tokens=8",
    "eval.max_tokens=8",
    "eval.max_turns=2",
    "logging.console=false",
]


def test_one_arm_two_seeds_tables_plots_and_resumes(tmp_path, capsys):
    out = tmp_path / "protocol"
    argv = ["--sft-model", "tiny", "--families", "textcraft", "--arms", "grpo", "--seeds", "0,1"]
    argv += ["--steps", "1", "--eval-limit", "2", "--out", str(out), *TINY]
    assert protocol.main(argv) == 0
    results = [json.loads((out / "grpo" / f"seed_{s}" / "result.json").read_text()) for s in (0, 1)]
    assert [r["seed"] for r in results] == [0, 1]
    assert [sorted(r["items"]) for r in results][0] == sorted(results[1]["items"])  # the same 2 items
    assert all(len(r["items"]) == 2 and all(i.startswith("textcraft_") for i in r["items"]) for r in results)
    assert all(r["steps"] == 1 and r["step_seconds"] > 0 and r["sampled_tokens"] > 0 for r in results)
    assert not list(out.glob("grpo/seed_*/checkpoints/*/optimizer.pt"))  # dropped once recorded
    summary = json.loads((out / "protocol.json").read_text())["arms"]["grpo"]
    block = summary["families"]["textcraft"]
    assert block["n_items"] == 2 and len(block["per_seed"]) == 2
    assert block["ci95"][0] <= block["mean"] <= block["ci95"][1]
    table = (out / "protocol.md").read_text()
    assert "### textcraft: greedy success on 2 test items" in table
    assert "| grpo (GRPO (base schedule)) | 2 |" in table
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # rerun: every arm x seed is reused, nothing trains again
    capsys.readouterr()
    mtime = (out / "grpo" / "seed_0" / "result.json").stat().st_mtime
    assert protocol.main(argv) == 0
    assert "seed_0: done, reused" in capsys.readouterr().err
    assert (out / "grpo" / "seed_0" / "result.json").stat().st_mtime == mtime
    # other settings in the same --out are not reported as these runs: stopped before any run
    with pytest.raises(SystemExit, match=r"was made with other settings \(trainer.lr: .* -> 5e-06\)"):
        protocol.main([*argv, "trainer.lr=5e-06"])
    assert (out / "grpo" / "seed_0" / "result.json").stat().st_mtime == mtime


def test_rl_seconds_time_boxes_the_rl_arms(tmp_path):
    """`--rl-seconds` stops each RL run once its steps took that long (here the first step does):
    the result counts the steps it made, and the setting is part of the run's settings."""
    out = tmp_path / "protocol"
    argv = ["--sft-model", "tiny", "--families", "textcraft", "--arms", "grpo", "--seeds", "0"]
    argv += ["--steps", "3", "--rl-seconds", "1e-6", "--eval-limit", "1", "--out", str(out), *TINY]
    assert protocol.main(argv) == 0
    result = json.loads((out / "grpo" / "seed_0" / "result.json").read_text())
    assert result["steps"] == 1 and "trainer.max_seconds=1e-06" in result["overrides"]
    with pytest.raises(SystemExit, match=r"trainer.max_seconds: 1e-06 -> \(unset\)"):
        protocol.main([a for a in argv if a not in ("--rl-seconds", "1e-6")])
    with pytest.raises(SystemExit):
        protocol.parse_args(["--rl-seconds", "0"])


def test_an_arm_whose_feature_is_missing_stops_before_any_run(tmp_path):
    arm = protocol.Arm("x", "rl", ("algorithm.adv_estimator=no_such",), "x", "the estimator no_such")
    with pytest.raises(SystemExit, match="arm 'x' does not load; it needs the estimator no_such"):
        protocol.load("configs/quickstart.yaml", list(arm.overrides), arm.name, arm.needs)
    with pytest.raises(SystemExit):
        protocol.parse_args(["--arms", "sft,nope"])


def test_the_rl_arms_keep_the_schedule_and_lr_their_runs_were_made_with(tmp_path):
    """The grpo arm's caps (3, 3, 4, 4, 5, 5 over 6 steps) and lr (2e-5) are the protocol's own,
    whatever the quickstart config's are now (its lr is 5e-6 since session 11); an arm that sets
    its own still gets it."""
    args = protocol.parse_args(["--sft-model", "tiny", "--out", str(tmp_path), "--steps", "6"])
    base = protocol.base_overrides(args, "tiny")
    expected = (("grpo", [3, 4, 5], 2e-5), ("cap-long", [10], 2e-5), ("grpo-low-lr", [3, 4, 5], 5e-6))
    for name, rounds, lr in expected:
        arm = protocol.ARMS[name]
        overrides = [*base, *protocol.arm_overrides(arm, args.caps, 6)]
        cfg = protocol.load("configs/quickstart.yaml", overrides, name, "")
        assert cfg.schedule.rounds == rounds, name
        assert cfg.trainer.lr == pytest.approx(lr), name


def test_results_made_before_the_lr_was_pinned_are_reused_as_made_at_that_lr():
    """The archived runs predate the pin: their overrides name no lr (the quickstart's 2e-5 then),
    so they match a rerun that pins 2e-5, and a run that set its own lr keeps it."""
    before = ["trainer.total_steps=6", "schedule.rounds=[3,4,5]"]
    now = ["trainer.total_steps=6", "schedule.rounds=[3,4,5]", protocol.BASE_LR]
    assert protocol.run_settings(before) == protocol.run_settings(now)
    protocol.check_reuse({"overrides": before}, now, "grpo seed 0")
    low = [*before, "trainer.lr=5.0e-6"]
    assert protocol.run_settings(low) == protocol.run_settings([*now, "trainer.lr=5.0e-6"])
    with pytest.raises(SystemExit, match=r"trainer.lr: 5.0e-6 -> 2.0e-5"):
        protocol.check_reuse({"overrides": low}, now, "grpo-low-lr seed 0")


def test_every_registered_arm_loads_as_the_protocol_runs_it(tmp_path):
    """An arm's overrides are checked only when its run starts (minutes into a protocol run):
    each one loads here, and the settings it names are the ones its config gets."""
    args = protocol.parse_args(["--sft-model", "tiny", "--out", str(tmp_path), "--steps", "6"])
    base = protocol.base_overrides(args, "tiny")
    for name, arm in protocol.ARMS.items():
        overrides = [*base, *protocol.arm_overrides(arm, args.caps, 6)]
        cfg = protocol.load("configs/quickstart.yaml", overrides, name, arm.needs)
        for o in protocol.arm_overrides(arm, args.caps, 6):
            key, value = o.split("=", 1)
            if not value.startswith("["):
                node = cfg
                for part in key.split("."):
                    node = getattr(node, part)
                assert str(node).lower() == value.lower() or float(node) == float(value), (name, o)


def test_list_arms_prints_one_aligned_row_per_arm(capsys):
    """`--list-arms` is how a user picks arms: the kind column lines up however long a name is."""
    assert protocol.main(["--list-arms"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows] == list(protocol.ARMS)
    kind_at = {re.search(r" (eval|sft|rl) ", r).start() for r in rows}
    assert len(kind_at) == 1, kind_at


def test_the_gpu_scripts_name_only_registered_arms():
    """benchmarks/gpu_protocol.sh (and its short-lease variant) runs only on a lent GPU, whose minutes
    are few: an arm it names by default that the protocol does not know would be found there, after
    the install and SFT."""
    script = Path(__file__).parents[2] / "benchmarks" / "gpu_protocol.sh"
    defaults = dict(re.findall(r'^(ARMS|FEATURE_ARMS)="\$\{\1:-([^}]*)\}"', script.read_text(), re.M))
    short = Path(__file__).parents[2] / "benchmarks" / "gpu_protocol_short.sh"
    defaults |= dict(re.findall(r'^(ARM)="\$\{\1:-([^}]*)\}"', short.read_text(), re.M))
    assert set(defaults) == {"ARMS", "FEATURE_ARMS", "ARM"}
    for names in defaults.values():
        unknown = [a for a in names.split(",") if a not in protocol.ARMS]
        assert not unknown, unknown


def test_results_are_archived_and_a_fresh_checkout_goes_on_from_the_archive(tmp_path, monkeypatch, capsys):
    """`--results NAME` keeps every arm x seed in benchmarks/results/NAME.runs.json: with the run
    folders gone (a fresh checkout), a rerun trains only what the archive lacks, takes sft-equal's
    budget from it and reports both arms; an archive from another checkpoint stops the protocol."""
    from benchmarks import protocol_report

    monkeypatch.setattr(protocol_report, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    common = ["--sft-model", "tiny", "--families", "textcraft", "--seeds", "0", "--steps", "1"]
    common += ["--eval-limit", "2", "--results", "arch", *TINY]
    assert protocol.main(["--arms", "grpo", "--out", str(tmp_path / "a"), *common]) == 0
    archive = json.loads((tmp_path / "results" / "arch.runs.json").read_text())
    (run,) = archive["runs"]
    assert run["arm"] == "grpo" and run["seed"] == 0 and len(run["items"]) == 2
    assert run["start_sha256"] == protocol.start_fingerprint("tiny")
    assert run["metrics"] and all(set(r) <= set(protocol_report.ARCHIVED_METRICS) for r in run["metrics"])
    assert {"time/step", "success/mean", "groups/informative_frac"} <= set(run["metrics"][0])
    assert any("--arms grpo" in c for c in archive["commands"])
    assert run["machine"] == protocol.machine()

    # equal compute is wall time: a budget measured on another machine is refused, before training
    elsewhere = {**archive, "runs": [{**run, "machine": "some other CPU x64"}]}
    (tmp_path / "results" / "arch.runs.json").write_text(json.dumps(elsewhere))
    with pytest.raises(SystemExit, match="was measured on some other CPU x64; this is"):
        protocol.main(["--arms", "sft-equal", "--out", str(tmp_path / "x"), *common])
    assert not (tmp_path / "x" / "sft-equal").exists()
    (tmp_path / "results" / "arch.runs.json").write_text(json.dumps(archive))

    capsys.readouterr()
    fresh = tmp_path / "b"  # no run folders: only the archive
    assert protocol.main(["--arms", "grpo,sft-equal", "--out", str(fresh), *common]) == 0
    err = capsys.readouterr().err
    assert "grpo/seed_0: archived in" in err and "sft-equal seed 0 ->" in err
    assert not (fresh / "grpo").exists()  # nothing trained again
    equal = json.loads((fresh / "sft-equal" / "seed_0" / "result.json").read_text())
    assert equal["budget_s"] == run["step_seconds"] and equal["budget_arm"] == "grpo"
    assert "sft-equal's budget is the grpo run of the same seed" in (fresh / "protocol.md").read_text()
    summary = json.loads((tmp_path / "results" / "arch.json").read_text())["arms"]
    assert set(summary) == {"grpo", "sft-equal"}
    assert summary["grpo"]["families"]["textcraft"]["per_seed"] == [sum(run["items"].values()) / 2]
    assert "diff_vs_ref" in summary["grpo"]["families"]["textcraft"]
    archive = json.loads((tmp_path / "results" / "arch.runs.json").read_text())
    assert sorted(r["arm"] for r in archive["runs"]) == ["grpo", "sft-equal"]
    assert len(archive["commands"]) == 2

    # an sft-equal timed against grpo is not reused as equal compute to another --budget-arm
    with pytest.raises(
        SystemExit, match=r"sft-equal/seed_0 had the budget of grpo .* not of --budget-arm grpo-low-lr"
    ):
        protocol.main(
            ["--arms", "grpo-low-lr,sft-equal", "--budget-arm", "grpo-low-lr", "--out", str(fresh), *common]
        )
    with pytest.raises(SystemExit, match=r"sft-equal seed 0 in .*arch.runs.json had the budget of grpo"):
        protocol.main(
            [
                "--arms",
                "grpo-low-lr,sft-equal",
                "--budget-arm",
                "grpo-low-lr",
                "--out",
                str(tmp_path / "e"),
                *common,
            ]
        )
    assert not (fresh / "grpo-low-lr").exists() and not (tmp_path / "e" / "grpo-low-lr").exists()

    # the archive's runs are reused only with their settings: another --steps stops, naming it
    longer = [a if a != "1" else "2" for a in common]
    with pytest.raises(
        SystemExit,
        match=r"grpo seed 0 in .*arch.runs.json was made with other settings "
        r"\(trainer.total_steps: 1 -> 2\)",
    ):
        protocol.main(["--arms", "grpo", "--out", str(tmp_path / "d"), *longer])
    assert not (tmp_path / "d" / "grpo").exists()

    other = ["--sft-model", "other", *common[2:]]
    with pytest.raises(SystemExit, match="started from another checkpoint"):
        protocol.main(["--arms", "grpo", "--out", str(tmp_path / "c"), *other])
    assert not (tmp_path / "c" / "grpo").exists()


def test_the_low_lr_equal_compute_arm_trains_at_its_own_lr_and_the_rl_arms_face_each_baseline(tmp_path):
    """`sft-equal-low-lr` continues SFT at its own lr (not the base config's SFT lr), on the same
    budget arm's seconds as sft-equal, and the report gives each RL arm's paired difference to
    every equal-compute arm."""
    args = protocol.parse_args(
        ["--sft-model", "tiny", "--arms", "sft-equal-low-lr,grpo", "--out", str(tmp_path)]
    )
    assert args.arms == ["grpo", "sft-equal-low-lr"]  # the budget arm runs first
    out = tmp_path / "protocol"
    argv = ["--sft-model", "tiny", "--families", "textcraft", "--arms", "grpo,sft-equal,sft-equal-low-lr"]
    argv += ["--seeds", "0", "--steps", "1", "--eval-limit", "2", "--out", str(out), *TINY]
    assert protocol.main(argv) == 0
    grpo = json.loads((out / "grpo" / "seed_0" / "result.json").read_text())
    equal, low = (
        json.loads((out / a / "seed_0" / "result.json").read_text())
        for a in ("sft-equal", "sft-equal-low-lr")
    )
    assert protocol.run_settings(equal["overrides"])["trainer.lr"] == "0.0001"
    assert protocol.run_settings(low["overrides"])["trainer.lr"] == "2.5e-05"
    for arm, lr in (("sft-equal", 1e-4), ("sft-equal-low-lr", 2.5e-5)):  # the lr its steps trained at
        rows = protocol.metric_rows(out / arm / "seed_0")
        assert rows and all(r["lr"] == pytest.approx(lr) for r in rows if "lr" in r), arm
    assert low["budget_arm"] == "grpo" and low["budget_s"] == grpo["step_seconds"] == equal["budget_s"]
    diffs = json.loads((out / "protocol.json").read_text())["arms"]["grpo"]["families"]["textcraft"]["diffs"]
    assert set(diffs) == {"sft-equal", "sft-equal-low-lr"}
    low_rate = sum(low["items"].values()) / 2
    assert diffs["sft-equal-low-lr"]["diff"] == pytest.approx(sum(grpo["items"].values()) / 2 - low_rate)
    table = (out / "protocol.md").read_text()
    assert "RL arms against each equal-compute arm (textcraft" in table
    assert "- grpo − sft-equal-low-lr: " in table


def test_the_start_fingerprint_follows_the_checkpoint_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "config.json").write_text("{}")
        (d / "model.safetensors").write_bytes(b"\x00" * 10)
    assert protocol.start_fingerprint(str(a)) == protocol.start_fingerprint(str(b))
    (b / "model.safetensors").write_bytes(b"\x00" * 9 + b"\x01")
    assert protocol.start_fingerprint(str(a)) != protocol.start_fingerprint(str(b))
    assert protocol.start_fingerprint("tiny") != protocol.start_fingerprint(str(a))


def test_the_report_names_the_arm_that_gave_sft_equal_its_budget():
    """`--budget-arm grpo-low-lr` gives sft-equal that arm's step time; the table's note says so,
    also for results made before the arm was recorded (matched by seed and seconds)."""
    from benchmarks.protocol_report import budget_arms

    low = [{"arm": "grpo-low-lr", "seed": s, "step_seconds": 300.0 + s} for s in (0, 1)]
    grpo = [{"arm": "grpo", "seed": s, "step_seconds": 200.0 + s} for s in (0, 1)]
    recorded = [{"arm": "sft-equal", "seed": 0, "budget_s": 300.0, "budget_arm": "grpo-low-lr"}]
    inferred = [{"arm": "sft-equal", "seed": 1, "budget_s": 301.0}]
    found = {"grpo": grpo, "grpo-low-lr": low, "sft-equal": [*recorded, *inferred]}
    assert budget_arms(found) == ["grpo-low-lr"]
    found["sft-equal"] = [{"arm": "sft-equal", "seed": 1, "budget_s": 201.0}]
    assert budget_arms(found) == ["grpo"]
    assert budget_arms({"grpo": grpo}) == ["grpo"]


def test_an_sft_equal_without_a_recorded_budget_arm_is_reused_under_the_arm_it_was_timed_against(tmp_path):
    """Results made before `budget_arm` was recorded: the reuse check finds the arm as the report
    does (the run of the same seed that trained exactly `budget_s`), not the default arm."""
    run = tmp_path / "grpo-low-lr" / "seed_0"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"arm": "grpo-low-lr", "seed": 0, "step_seconds": 300.0}))
    legacy = {"arm": "sft-equal", "seed": 0, "budget_s": 300.0}
    protocol.check_budget_arm(legacy, "grpo-low-lr", tmp_path, {}, "sft-equal seed 0")
    with pytest.raises(SystemExit, match="had the budget of grpo-low-lr .* not of --budget-arm grpo:"):
        protocol.check_budget_arm(legacy, "grpo", tmp_path, {}, "sft-equal seed 0")
    archived = {("grpo-low-lr", 0): {"arm": "grpo-low-lr", "seed": 0, "step_seconds": 300.0}}
    protocol.check_budget_arm(legacy, "grpo-low-lr", tmp_path / "empty", archived, "sft-equal seed 0")


def test_an_rl_arm_faces_the_low_lr_baseline_when_it_is_the_only_equal_compute_arm():
    """Without sft-equal the Δ column is empty; the RL arm's paired difference to the baseline
    that did run (sft-equal-low-lr) is still in the table's text."""
    from benchmarks.protocol_report import markdown, summarize

    def result(arm: str, kind: str, wins: list[int]) -> dict:
        items = {f"textcraft_{i}": float(w) for i, w in enumerate(wins)}
        return {
            "arm": arm,
            "label": arm,
            "kind": kind,
            "seed": 0,
            "step_seconds": 10.0,
            "sampled_tokens": 100 if kind == "rl" else 0,
            "wall_s": 20.0,
            "items": items,
            "categories": {i: "depth 1" for i in items},
        }

    found = {
        "grpo": [result("grpo", "rl", [1, 1, 0, 0])],
        "sft-equal-low-lr": [result("sft-equal-low-lr", "sft", [1, 1, 1, 0])],
    }
    table = markdown(summarize(found, n_boot=50), "t", "cmd", ["grpo"])
    assert "- grpo − sft-equal-low-lr: -25.0 [" in table


def _demos(tmp_path, folder, *flags):
    """The protocol's TextCraft demos in `tmp_path/folder` (made when missing), as JSON rows."""
    args = protocol.parse_args(["--families", "textcraft", "--demos", str(tmp_path / folder), *flags])
    [path] = protocol.demo_files(args)
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_demos_made_with_detours_hold_recoveries_and_plain_ones_none(tmp_path):
    made = functools.partial(_demos, tmp_path)
    plain, detoured = made("plain"), made("detoured", "--detours", "0.3")
    assert len(plain) == len(detoured) == 444 and all(t["success"] for t in plain + detoured)
    assert not any(t["meta"].get("detours") for t in plain)
    assert sum(bool(t["meta"].get("detours")) for t in detoured) > 200
    with pytest.raises(SystemExit, match="holds no detours but --detours is 0.3"):
        made("plain", "--detours", "0.3")
    with pytest.raises(SystemExit, match="holds detours but --detours is 0.0"):
        made("detoured")


def test_demos_made_by_an_expert_variant_say_so_and_another_variant_is_refused(tmp_path, capsys):
    made = functools.partial(_demos, tmp_path)
    worked = made("worked", "--expert-kwargs", '{"worked": true}')
    assert len(worked) == 444 and all(t["success"] for t in worked)
    assert all(t["meta"]["expert_kwargs"] == {"worked": True} for t in worked)
    assert sum("×" in t["messages"][2]["content"] for t in worked) > 100  # the worked chains
    with pytest.raises(SystemExit, match=r'kwargs \{"worked": true\} but --expert-kwargs is \{\}'):
        made("worked")
    made("plain")
    with pytest.raises(SystemExit, match=r'kwargs \{\} but --expert-kwargs is \{"worked": true\}'):
        made("plain", "--expert-kwargs", '{"worked": true}')
    with pytest.raises(SystemExit):
        made("other", "--expert-kwargs", '{"wroked": true}')
    assert "the textcraft expert does not take --expert-kwargs" in capsys.readouterr().err
