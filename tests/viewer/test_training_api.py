"""The viewer's routes for training itself: latest eval, token stats, GRPO groups, env views."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from horizonrl.viewer.app import create_app
from horizonrl.viewer.training import expand_token_stats, first_difference

from .conftest import write_run


@pytest.fixture
def client(runs_root, tmp_path, monkeypatch):
    monkeypatch.setenv("HORIZONRL_CACHE", str(tmp_path / "cache"))
    return TestClient(create_app(runs_root))


def _report(folder, success):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps({"success_rate": success, "by_category": {}}))


def test_run_list_shows_the_latest_eval_not_the_initial_one(tmp_path):
    run = write_run(tmp_path / "runs" / "sft")  # has eval/final (0.75)
    _report(run / "eval" / "initial", 0.0)  # the zero-shot eval before training
    _report(run / "eval" / "step_2", 0.25)
    client = TestClient(create_app(tmp_path / "runs"))
    [row] = client.get("/api/runs").json()["runs"]
    assert row["eval_success"] == 0.75
    names = [r["name"] for r in client.get("/api/runs/sft").json()["reports"]]
    assert names == ["eval/initial", "eval/step_2", "eval/final"]  # the order they ran


def _plant_stats(runs_root, rows):
    folder = runs_root / "ppo" / "trajectories" / "token_stats"
    folder.mkdir(parents=True)
    (folder / "step_1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_token_route_spreads_saved_stats_over_the_tokens(client, runs_root):
    # step_1 #1: prompt 4 tokens, sampled 4..6, observation 7..8, sampled 9..11
    row = {"index": 1, "spans": [[4, 7], [9, 12]], "advantages": [0.5] * 6,
           "old_logprobs": [-0.1, -0.5, -3.0, -0.1, -0.5, 0.0], "kl": [0.0] * 5}  # fmt: skip
    _plant_stats(runs_root, [row])
    body = client.get("/api/runs/ppo/trajectories/step_1/1/tokens").json()
    assert body["token_stats_saved"] and body["in_update"]
    assert body["stats"]["advantages"] == [None] * 4 + [0.5] * 3 + [None] * 2 + [0.5] * 3
    assert body["stats"]["old_logprobs"][11] == 0.0 and body["logprobs"][11] == -3.0  # a mismatch, as saved
    assert "kl" not in body["stats"]  # 5 values for 6 sampled tokens: not shown rather than misplaced
    other = client.get("/api/runs/ppo/trajectories/step_1/0/tokens").json()
    assert other["token_stats_saved"] and not other["in_update"] and other["stats"] == {}
    plain = client.get("/api/runs/ppo/trajectories/step_2/0/tokens").json()
    assert not plain["token_stats_saved"] and plain["stats"] == {}


def test_token_stats_file_is_not_a_trajectory_source(client, runs_root):
    _plant_stats(runs_root, [{"index": 0, "spans": [], "advantages": []}])
    ids = [s["id"] for s in client.get("/api/runs/ppo").json()["sources"]]
    assert ids == ["step_1", "step_2", "step_3", "eval~final"]


def test_groups_of_a_step_and_one_group_side_by_side(client, runs_root):
    from horizonrl.rollout.trajectory import write_jsonl

    from .conftest import make_trajectory

    trajs = [make_trajectory(0, success=k == 0, category="depth 1", turns=2 + k) for k in range(3)]
    for k, t in enumerate(trajs):
        t.group_id, t.sample_index = 7, k
    trajs[1].messages[2]["content"] = "Thought: other\nAction: craft stick"  # differs at turn 1
    write_jsonl(runs_root / "ppo" / "trajectories" / "step_9.jsonl", trajs)
    (runs_root / "ppo" / "trajectories" / "token_stats").mkdir()
    (runs_root / "ppo" / "trajectories" / "token_stats" / "step_9.jsonl").write_text(
        json.dumps({"index": 0, "spans": [[4, 7], [9, 12]], "advantages": [1.0] * 6}) + "\n"
    )
    [group] = client.get("/api/runs/ppo/groups?source=step_9").json()["groups"]
    assert (group["n"], group["n_success"], group["informative"], group["key"]) == (3, 1, True, 0)
    body = client.get("/api/runs/ppo/groups/step_9/0").json()
    assert body["first_difference"] == 0
    assert [s["advantage"] for s in body["samples"]] == [1.0, None, None]
    assert [s["in_update"] for s in body["samples"]] == [True, False, False]
    assert body["samples"][1]["turns"][0]["action"] == "craft stick"
    assert client.get("/api/runs/ppo/groups/step_9/1").status_code == 404


def test_first_difference_counts_a_sample_that_stopped():
    assert first_difference([["a", "b"], ["a", "b"]]) is None
    assert first_difference([["a", "b"], ["a", "c"]]) == 1
    assert first_difference([["a"], ["a", "b"]]) == 1
    assert first_difference([["a"]]) is None


def test_expand_refuses_spans_past_the_end():
    assert expand_token_stats({"spans": [[0, 3]], "advantages": [1, 2, 3]}, 2) == {}
    assert expand_token_stats({"spans": [[1, 2]], "advantages": [4]}, 3) == {"advantages": [None, 4, None]}


def test_screenshots_are_served_only_from_inside_the_root(tmp_path):
    from horizonrl.rollout.trajectory import write_jsonl

    from .conftest import make_trajectory

    root = tmp_path / "root"
    (root / "shots").mkdir(parents=True)
    (root / "shots" / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    (root / "shots" / "a.txt").write_text("not an image")
    (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\nsecret")
    (root / "shots" / "link.png").symlink_to(tmp_path / "secret.png")
    traj = make_trajectory(0, success=True, category="depth 1", turns=2)
    traj.meta["views"] = {"0": {"screenshot": "shots/a.png"}, "1": {"screenshot": "../secret.png"},
                          "2": {"screenshot": "shots/link.png"}, "3": {"screenshot": "shots/a.txt"},
                          "4": {"screenshot": str(tmp_path / "secret.png")}}  # fmt: skip
    write_jsonl(root / "web.jsonl", [traj])
    client = TestClient(create_app(root))
    ok = client.get("/api/runs/web/trajectories/web/0/screenshot/0")
    assert (
        ok.status_code == 200 and ok.headers["content-type"] == "image/png" and ok.content.endswith(b"fake")
    )
    for turn in (1, 2, 3, 4, 5):
        assert client.get(f"/api/runs/web/trajectories/web/0/screenshot/{turn}").status_code == 404
    replay = client.get("/api/runs/web/trajectories/web/0").json()["replay"]
    assert [t["view"]["key"] for t in replay["turns"]] == [0, 1]
    assert replay["final_view"]["key"] == 2
