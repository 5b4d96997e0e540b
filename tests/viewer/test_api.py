"""The viewer's JSON API and page through FastAPI's in-process test client."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from horizonrl.rollout.trajectory import write_jsonl
from horizonrl.viewer.app import create_app

from .conftest import make_trajectory, write_run


@pytest.fixture
def client(runs_root, tmp_path, monkeypatch):
    monkeypatch.setenv("HORIZONRL_CACHE", str(tmp_path / "cache"))  # no default tokenizer on disk
    return TestClient(create_app(runs_root))


def test_run_list_finds_train_eval_and_loose_files_but_not_other_jsonl(client):
    body = client.get("/api/runs").json()
    runs = {r["id"]: r for r in body["runs"]}
    assert set(runs) == {"ppo", "evals~smollm", "expert"}
    assert (runs["ppo"]["kind"], runs["evals~smollm"]["kind"], runs["expert"]["kind"]) == (
        "train",
        "eval",
        "file",
    )
    ppo = runs["ppo"]
    assert ppo["last_step"] == 3 and ppo["n_steps"] == 3
    assert ppo["last"]["reward/mean"] == pytest.approx(0.3)
    assert ppo["eval_success"] == 0.75
    assert ppo["n_sources"] == 4 and ppo["n_reports"] == 1
    assert runs["evals~smollm"]["eval_success"] == 1.0


def test_metrics_are_merged_by_step_and_keep_gaps(client):
    body = client.get("/api/runs/ppo/metrics").json()
    assert body["steps"] == [1, 2, 3]
    assert body["series"]["reward/mean"] == pytest.approx([0.1, 0.2, 0.3])
    assert body["series"]["schedule/max_turns"] == [2.0, 3.0, 3.0]
    assert body["series"]["eval/success"] == [None, None, 0.5]
    assert "turns/hist" not in body["series"]


def test_overview_lists_sources_reports_and_config(client):
    body = client.get("/api/runs/ppo").json()
    assert [s["id"] for s in body["sources"]] == ["step_1", "step_2", "step_3", "eval~final"]
    assert [s["step"] for s in body["sources"][:3]] == [1, 2, 3]
    [report] = body["reports"]
    assert report["name"] == "eval/final" and report["source"] == "eval~final"
    assert report["report"]["by_category"]["depth 1"]["success_rate"] == 0.75
    assert "path: tiny" in body["config"]


def test_pagination_walks_every_trajectory_once(client):
    seen = []
    for offset in (0, 3, 6, 9):
        body = client.get(f"/api/runs/ppo/trajectories?source=step_2&offset={offset}&limit=3").json()
        assert body["total"] == 8 and body["n_records"] == 8 and body["n_success"] == 4
        seen += [t["index"] for t in body["items"]]
    assert seen == list(range(8))
    first = client.get("/api/runs/ppo/trajectories?source=step_2&limit=1").json()["items"][0]
    assert first["item_id"] == "textcraft_0" and first["n_sampled"] == 3 and first["n_tokens"] == 7


def test_filters_and_sorting(client):
    url = "/api/runs/ppo/trajectories?source=step_1"
    solved = client.get(f"{url}&success=true").json()
    assert solved["total"] == 4 and all(t["success"] for t in solved["items"])
    assert client.get(f"{url}&success=false&category=depth 2").json()["total"] == 2
    assert [t["item_id"] for t in client.get(f"{url}&item=_7").json()["items"]] == ["textcraft_7"]
    turns = [t["num_turns"] for t in client.get(f"{url}&sort=turns&order=desc").json()["items"]]
    assert turns == sorted(turns, reverse=True) and turns[0] == 3
    assert client.get(url).json()["categories"] == ["depth 1", "depth 2"]
    assert client.get("/api/runs/ppo/trajectories").json()["source"] == "step_1"  # default: first file


def test_replay_splits_the_conversation_into_turns(client):
    body = client.get("/api/runs/ppo/trajectories/step_1/2").json()  # textcraft_2: solved in 3 turns
    assert body["count"] == 8
    record, replay = body["record"], body["replay"]
    assert record["item_id"] == "textcraft_2" and record["success"] is True
    assert "token_ids" not in record  # tokens come from their own route
    assert replay["instruction"].startswith("You are") or replay["instruction"]
    turns = replay["turns"]
    assert len(turns) == 3
    assert turns[0]["observation"] == "Goal: craft item 2."  # instruction stripped off the first observation
    assert turns[1]["observation"] == "Got 1 log (turn 0)"
    assert [t["action"] for t in turns] == ["get 1 log", "get 2 log", "get 3 log"]
    assert turns[0]["thought"] == "step 0 of item 2"
    assert [t["reward"] for t in turns] == [0.0, 0.0, 1.0]
    assert replay["final_observation"] == "Crafted 1 target"
    assert body["tokens"]["sampled_per_turn"] == [3, 3, 3]
    assert body["tokens"]["min_logprob"] == -3.0


def test_token_view_without_a_tokenizer_gives_ids_mask_and_logprobs(client):
    body = client.get("/api/runs/ppo/trajectories/step_1/1/tokens").json()
    assert body["pieces"] is None and body["tokenizer"] is None
    assert body["token_ids"][:4] == [1, 2, 3, 4]
    assert body["loss_mask"] == [0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1]
    assert body["logprobs"][4] == -0.1 and body["logprobs"][0] is None


def test_token_view_decodes_with_a_checkpoint_tokenizer(runs_root, tmp_path, monkeypatch):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    monkeypatch.setenv("HORIZONRL_CACHE", str(tmp_path / "cache"))
    vocab = {f"w{i}": i for i in range(20)}
    target = runs_root / "ppo" / "checkpoints" / "step_3" / "model" / "tokenizer.json"
    target.parent.mkdir(parents=True)
    Tokenizer(WordLevel(vocab, unk_token="w0")).save(str(target))
    body = TestClient(create_app(runs_root)).get("/api/runs/ppo/trajectories/step_1/0/tokens").json()
    assert body["pieces"][:5] == ["w1", "w2", "w3", "w4", "w10"]
    assert body["tokenizer"].endswith("tokenizer.json")


@pytest.mark.parametrize(
    "url",
    [
        "/api/runs/..%2F..%2Fetc/metrics",
        "/api/runs/..",
        "/api/runs/ppo/trajectories?source=../config",
        "/api/runs/ppo/trajectories?source=..%2F..%2Fmetrics",
        "/api/runs/ppo/trajectories/..%2Fmetrics/0",
        "/api/runs/ppo/trajectories/%2Fetc%2Fpasswd/0",
        "/static/..%2Fapp.py",
        "/static/index.html",
    ],
)
def test_paths_outside_the_known_files_are_404(client, url):
    res = client.get(url)
    assert res.status_code == 404
    assert res.json()["error"]["code"] == 404


def test_unknown_index_is_404_and_bad_query_is_400(client):
    res = client.get("/api/runs/ppo/trajectories/step_1/8")
    assert res.status_code == 404 and "no trajectory 8" in res.json()["error"]["message"]
    assert client.get("/api/runs/nope/metrics").status_code == 404
    for query in ("limit=0", "limit=10000", "offset=-1", "sort=bogus", "success=maybe"):
        res = client.get(f"/api/runs/ppo/trajectories?source=step_1&{query}")
        assert res.status_code == 400, query
        assert res.json()["error"]["message"]


def test_truncated_last_line_is_skipped_then_read_once_complete(client, runs_root):
    path = runs_root / "ppo" / "trajectories" / "step_1.jsonl"
    line = json.dumps(make_trajectory(99, success=True, category="depth 1").to_dict()) + "\n"
    with path.open("a") as f:
        f.write(line[:50])
    body = client.get("/api/runs/ppo/trajectories?source=step_1").json()
    assert (body["n_records"], body["skipped_lines"]) == (8, 1)
    with path.open("a") as f:
        f.write(line[50:])
    body = client.get("/api/runs/ppo/trajectories?source=step_1&item=_99").json()
    assert body["skipped_lines"] == 0 and [t["index"] for t in body["items"]] == [8]
    assert client.get("/api/runs/ppo/trajectories/step_1/8").json()["record"]["item_id"] == "textcraft_99"


def test_run_in_progress_with_partial_metrics_and_new_steps(client, runs_root):
    run = runs_root / "fresh"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n{"step": 2, "rew')
    assert client.get("/api/runs/fresh/metrics").json()["steps"] == [1]
    assert client.get("/api/runs/fresh").json()["sources"] == []
    write_jsonl(run / "trajectories" / "step_1.jsonl", [make_trajectory(0, success=True, category="depth 1")])
    assert client.get("/api/runs/fresh/trajectories?source=step_1").json()["total"] == 1


def test_single_file_and_eval_folder_as_root(tmp_path):
    path = tmp_path / "solve.jsonl"
    write_jsonl(path, [make_trajectory(i, success=i == 0, category="depth 1") for i in range(3)])
    client = TestClient(create_app(path))
    [run] = client.get("/api/runs").json()["runs"]
    assert run["id"] == "solve" and run["kind"] == "file"
    assert client.get("/api/runs/solve/trajectories?success=true").json()["total"] == 1
    assert client.get("/api/runs/solve/metrics").json() == {
        "steps": [],
        "series": {},
        "skipped": 0,
        "stamp": None,
    }

    evald = write_run(tmp_path / "run") / "eval" / "final"
    client = TestClient(create_app(evald))
    [run] = client.get("/api/runs").json()["runs"]
    assert run["kind"] == "eval" and run["id"] == "final"
    body = client.get("/api/runs/final").json()
    assert [s["id"] for s in body["sources"]] == ["trajectories"]
    assert body["reports"][0]["name"] == "."


def test_page_and_static_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js">' in page.text and 'id="view"' in page.text
    scripts = ""
    for name in ("app.js", "charts.js", "pages.js", "tokens.js"):
        js = client.get(f"/static/{name}")
        assert js.status_code == 200 and "javascript" in js.headers["content-type"]
        assert f'<script src="/static/{name}">' in page.text
        scripts += js.text
    for name in ("showRuns", "showReplay", "showTokens", "showCompare", "showGroup", "/api/runs"):
        assert name in scripts
    assert "https://" not in scripts and "https://" not in page.text  # no CDN: it works offline
    css = client.get("/static/style.css")
    assert css.status_code == 200 and ".turn" in css.text
