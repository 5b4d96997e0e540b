"""The search env, its expert, its prompt and its data configuration, locally."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from horizonrl.agent.prompts import get_prompt
from horizonrl.envs.checker import check_env
from horizonrl.envs.core import UnknownItemError
from horizonrl.envs.registry import get_family
from horizonrl.envs.search import _config_from_env, make_env, make_spec
from horizonrl.envs.search.env import SearchEnv
from horizonrl.envs.search.expert import SearchExpert
from horizonrl.envs.search.world import HOP_CATEGORIES, generate_world, write_world
from horizonrl.eval.metrics import success_summary
from horizonrl.eval.solve import play_expert, solve_items


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("search_env") / "world"
    write_world(generate_world(5, entities=200, n_test=15, n_train=5), out)
    return out


@pytest.fixture
def env(world_dir: Path) -> SearchEnv:
    made = make_env(world=str(world_dir))
    assert isinstance(made, SearchEnv)
    return made


def _question(world_dir: Path, hops: int) -> tuple[str, dict[str, Any]]:
    """(item id, record) of the first test question with `hops` hops."""
    lines = (world_dir / "test.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record["hops"] == hops:
            return f"search_{i}", record
    raise AssertionError(f"no {hops}-hop question")


def test_check_env_passes_on_a_generated_world_and_the_default(world_dir: Path) -> None:
    spec = make_spec(world=str(world_dir))
    check_env(spec.make_env(), spec, spec.split("test")[:8])
    default = get_family("search")
    check_env(default.make_env(), default, default.split("test")[:4])
    assert default.categories == HOP_CATEGORIES
    assert (len(default.split("test")), len(default.split("train"))) == (400, 2000)


def test_question_then_search_then_correct_answer(env: SearchEnv, world_dir: Path) -> None:
    item_id, record = _question(world_dir, 1)
    obs, info = env.reset(item_id)
    assert obs == f"Question: {record['question']}"
    assert info == {
        "success": False,
        "score": 0.0,
        "category": "1-hop",
        "f1": 0.0,
        "searches": 0,
        "state_key": "",
    }
    result = env.step(f"<search>{record['chain'][0]}</search>")
    assert result.observation.startswith("<information>Doc 1(Title: " + record["chain"][0] + ")")
    assert record["answers"][0] in result.observation
    assert (result.reward, result.terminated, result.truncated, result.info["searches"]) == (
        0.0,
        False,
        False,
        1,
    )
    # Normalized exact match: case, punctuation and articles do not matter.
    result = env.step(f"<answer>The {record['answers'][0].upper()}.</answer>")
    assert (result.reward, result.terminated, result.info["success"], result.info["score"]) == (
        1.0,
        True,
        True,
        1.0,
    )
    assert result.info["f1"] == 1.0


def test_wrong_answer_ends_the_episode_by_default_with_f1_reported() -> None:
    env = get_family("search").make_env()
    assert isinstance(env, SearchEnv)
    # A currency ("Brovon shilling") has two words, so half of it earns partial F1.
    index, item = next((i, q) for i, q in enumerate(env.dataset.test) if "currency" in q.question)
    env.reset(f"search_{index}")
    result = env.step(f"<answer>{item.answers[0].split()[0]}</answer>")
    assert (result.reward, result.terminated, result.info["success"]) == (0.0, True, False)
    assert result.info["f1"] == pytest.approx(2 / 3)
    after = env.step("<answer>anything</answer>")
    assert after.terminated and "over" in after.observation and not after.info["success"]


def test_retry_after_a_wrong_answer_when_configured(world_dir: Path) -> None:
    env = make_env(world=str(world_dir), answer_ends_episode=False, top_k=2)
    item_id, record = _question(world_dir, 2)
    env.reset(item_id)
    wrong = env.step("<answer>certainly not this</answer>")
    assert (wrong.terminated, wrong.reward, wrong.info["success"]) == (False, 0.0, False)
    assert "incorrect" in wrong.observation
    info = env.step(f"<search>{record['chain'][0]}</search>").observation
    assert info.count("\nDoc ") == 1  # top_k=2: two documents
    right = env.step(f"<answer>{record['answers'][-1]}</answer>")
    assert (right.terminated, right.reward, right.info["success"]) == (True, 1.0, True)


@pytest.mark.parametrize(
    ("action", "hint"),
    [
        ("What is the answer?", "no <search> or <answer> tag"),
        ("<search>   </search>", "the search is empty"),
        ("<answer></answer>", "the answer is empty"),
        ("search: Paris", "no <search> or <answer> tag"),
    ],
)
def test_invalid_actions_are_explained(env: SearchEnv, world_dir: Path, action: str, hint: str) -> None:
    env.reset(_question(world_dir, 1)[0])
    result = env.step(action)
    assert hint in result.observation and "<search>your query</search>" in result.observation
    assert not result.done and result.reward == 0.0 and result.info["searches"] == 0


def test_whole_responses_and_cut_off_tags_are_accepted(env: SearchEnv, world_dir: Path) -> None:
    item_id, record = _question(world_dir, 1)
    env.reset(item_id)
    name = record["chain"][0]
    assert f"(Title: {name})" in env.step(f"Thought: look it up.\n<search>{name}</search>").observation
    assert f"(Title: {name})" in env.step(f"Thought: again.\n<search>{name}").observation
    assert env.step(f"<answer>{record['answers'][0]}").info["success"]


def test_unknown_items_raise(env: SearchEnv) -> None:
    for bad in ("search_999999", "textcraft_1", "search_x"):
        with pytest.raises(UnknownItemError):
            env.reset(bad)
    with pytest.raises(TypeError, match="valid: world"):
        make_env(wrld="typo")


def test_expert_solves_every_hop_category_locally(world_dir: Path) -> None:
    spec = make_spec(world=str(world_dir))
    trajectories = solve_items(spec.make_env, spec, spec.split("test"))
    summary = success_summary(trajectories, spec.categories)
    for category in HOP_CATEGORIES:
        assert summary["by_category"][category]["n"] == 15
        assert summary["by_category"][category]["success_rate"] >= 0.9, summary
    four_hop = next(t for t in trajectories if t.category == "4-hop" and t.success)
    assert four_hop.num_turns == 5  # four searches and one answer
    assert get_prompt("search").parse_action(four_hop.messages[2]["content"]).action.startswith("<search>")  # type: ignore[union-attr]


def test_expert_reads_answers_from_search_results_not_the_key(world_dir: Path) -> None:
    """With a retriever that finds nothing, the expert cannot answer: it does not peek."""

    class Blind:
        kind = "blind"

        def __len__(self) -> int:
            return 0

        def search(self, query: str, k: int = 3) -> list[Any]:
            return []

    spec = make_spec(world=str(world_dir))
    local = spec.make_env()
    assert isinstance(local, SearchEnv)
    env = SearchEnv(local.dataset, Blind())
    trajectory = play_expert(env, spec, _question(world_dir, 1)[0])
    assert not trajectory.success and trajectory.num_turns == 4  # three searches, then it gives up
    assert "<answer>unknown</answer>" in trajectory.messages[-1]["content"]


def test_prompt_round_trips_the_experts_actions() -> None:
    prompt = get_prompt("search")
    assert (
        prompt.action_style == "tags"
        and "<search>" in prompt.instruction
        and "<answer>" in prompt.instruction
    )
    for action in ("<search>Port Kelwyn</search>", "<answer>1873</answer>"):
        assert prompt.parse_action(prompt.format_response("thinking", action)).action == action
    assert not prompt.parse_action("Thought: hmm, not sure.").ok


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def qa_dir(tmp_path: Path) -> Path:
    """Tiny QA sets in FlashRAG's layout; hotpotqa, 2wiki and musique have dev files only."""
    root = tmp_path / "qa"
    sizes = {"nq": ("test", 2), "triviaqa": ("test", 1), "popqa": ("test", 1), "hotpotqa": ("dev", 2),
             "2wikimultihopqa": ("dev", 1), "musique": ("dev", 1), "bamboogle": ("test", 1)}  # fmt: skip
    for name, (split, n) in sizes.items():
        records = [{"id": f"{split}_{i}", "question": f"{name} q{i}?", "golden_answers": [f"{name}-a{i}"]}
                   for i in range(n)]  # fmt: skip
        _write_jsonl(root / name / f"{split}.jsonl", records)
    _write_jsonl(root / "nq" / "train.jsonl", [{"question": "nq train?", "answers": ["Paris"]}] * 2)
    _write_jsonl(root / "hotpotqa" / "train.jsonl", [{"question": "hp train?", "answers": "Lyon"}])
    _write_jsonl(tmp_path / "corpus.jsonl", [{"id": "0", "title": "Paris", "text": "Paris is in France."}])
    return root


def test_reference_qa_sets_get_the_reference_order_and_categories(qa_dir: Path) -> None:
    spec = make_spec(qa_dir=str(qa_dir), corpus=str(qa_dir.parent / "corpus.jsonl"))
    assert spec.categories == ("NQ", "TriviaQA", "PopQA", "HotpotQA", "2Wiki", "MuSiQue", "Bamboogle")
    assert spec.split("test") == [f"search_{i}" for i in range(9)]
    assert spec.split("train") == ["search_9", "search_10", "search_11"]
    expected = ["NQ", "NQ", "TriviaQA", "PopQA", "HotpotQA", "HotpotQA", "2Wiki", "MuSiQue", "Bamboogle"]
    assert [spec.category_of(i) for i in spec.split("test")] == expected
    assert [spec.category_of(i) for i in spec.split("train")] == ["NQ", "NQ", "HotpotQA"]
    assert spec.make_expert is None  # real QA sets have no scripted expert
    env = spec.make_env()
    obs, info = env.reset("search_5")
    assert obs == "Question: hotpotqa q1?" and info["category"] == "HotpotQA"
    assert env.step("<answer>hotpotqa-a1</answer>").info["success"]
    env.reset("search_9")
    assert "Paris is in France." in env.step("<search>where is Paris</search>").observation
    assert env.step("<answer>paris</answer>").reward == 1.0


def test_reference_ids_span_the_seven_test_sets_at_full_size(tmp_path: Path) -> None:
    sizes = {"nq": 3610, "triviaqa": 11313, "popqa": 14267, "hotpotqa": 7405, "2wikimultihopqa": 12576,
             "musique": 2417, "bamboogle": 125}  # fmt: skip
    for name, n in sizes.items():
        line = json.dumps({"question": f"{name}?", "golden_answers": ["x"]}) + "\n"
        (tmp_path / f"{name}_test.jsonl").write_text(line * n)
    (tmp_path / "nq_train.jsonl").write_text(json.dumps({"question": "t?", "answers": ["y"]}) + "\n")
    spec = make_spec(qa_dir=str(tmp_path), corpus=str(tmp_path / "corpus.jsonl"))
    assert len(spec.split("test")) == 51713 and spec.split("train") == ["search_51713"]
    assert spec.category_of("search_0") == "NQ" and spec.category_of("search_3609") == "NQ"
    assert spec.category_of("search_3610") == "TriviaQA"
    assert spec.category_of("search_51587") == "MuSiQue"
    assert spec.category_of("search_51588") == "Bamboogle" and spec.category_of("search_51712") == "Bamboogle"
    assert spec.category_of("search_51713") == "NQ"
    with pytest.raises(UnknownItemError):
        spec.category_of("search_51714")


def test_config_from_environment_variable(
    world_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HORIZONRL_SEARCH", json.dumps({"world": str(world_dir)}))
    assert _config_from_env() == {"world": str(world_dir)}
    config_file = tmp_path / "search.json"
    config_file.write_text(json.dumps({"world": str(world_dir), "top_k": 5}))
    monkeypatch.setenv("HORIZONRL_SEARCH", str(config_file))
    spec = make_spec(**_config_from_env())
    assert len(spec.split("test")) == 60 and spec.make_env().top_k == 5  # type: ignore[attr-defined]
    monkeypatch.setenv("HORIZONRL_SEARCH", "[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        _config_from_env()


def test_expert_is_usable_from_the_spec(world_dir: Path) -> None:
    spec = make_spec(world=str(world_dir))
    assert spec.make_expert is not None
    expert = spec.make_expert()
    assert isinstance(expert, SearchExpert)
    item_id, record = _question(world_dir, 3)
    expert.reset(item_id, "", {})
    thought, action = expert.act(f"Question: {record['question']}")
    assert action == f"<search>{record['chain'][0]}</search>" and thought
