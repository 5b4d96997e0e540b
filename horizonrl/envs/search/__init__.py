"""Deep search (Search-R1 style): answer questions by querying a retriever over a corpus.

Description:
    Each item is a question with gold answers. The agent searches a passage corpus (BM25
    via `bm25s` by default, dense via sentence-transformers + `faiss` as an option) as
    often as it likes and then answers. Out of the box the corpus and questions are a
    generated synthetic multi-hop world (fictional people, cities, organizations and
    countries; see `world.py`), built deterministically on first use under
    `$HORIZONRL_CACHE/search/` in about a second, so everything runs offline. Users point
    the family at their own corpus (e.g. the Search-R1 wiki-18 JSONL) and QA sets (e.g.
    FlashRAG's NQ ... Bamboogle) through env kwargs or `$HORIZONRL_SEARCH` (below).

Observation:
    Reset: `Question: <question>`. After a search, Search-R1's format:
    `<information>Doc 1(Title: <title>) <text>\\nDoc 2(Title: ...) ...</information>`
    with the top `top_k` (default 3) passages; after an answer, whether it was correct.

Actions:
    `<search>query</search>` and `<answer>text</answer>`. The first tag in the action
    counts (a whole model response is accepted); a cut-off closing tag is tolerated. No
    tag, or an empty query/answer, gets an observation explaining the two forms.

Reward:
    1.0 when the answer matches a gold answer exactly after normalization (lower-case, no
    punctuation, no articles, collapsed spaces), else 0. `info["success"]` is that exact
    match and `info["score"]` the same as a float, so success and score always agree;
    `info["f1"]` is the best token F1 of the answers given so far and `info["searches"]`
    the number of searches made. `info["state_key"]` is the set of passage ids retrieved so
    far (sorted, space-separated); after each step `info["invalid_action"]` says the action had
    no tag or an empty body, and after a search `info["progress"]` is 1.0 the first time a
    retrieved passage (title and text) contains a gold answer as whole words, else 0.

Termination:
    A correct answer ends the episode. A wrong answer ends it too by default
    (`answer_ends_episode=True`); with `answer_ends_episode=False` the agent may keep
    searching and answer again.

Truncation:
    Never by the env; the turn cap is the rollout engine's `max_turns` (`TurnLimit` when
    the env is stepped directly; the reference trains with 5 turns and evaluates with 30).

Categories:
    Generated worlds: "1-hop", "2-hop", "3-hop", "4-hop" (the number of searches the
    question needs). With the reference's QA sets: one per set, "NQ", "TriviaQA",
    "PopQA", "HotpotQA", "2Wiki", "MuSiQue", "Bamboogle".

Registered ids:
    `search_<i>`: test items first, then train items. Default world: `search_0..399` are
    the test split (100 per hop count), `search_400..2399` the train split (500 per hop
    count); hop counts alternate (1, 2, 3, 4, 1, ...) so any prefix covers all four.
    With all seven reference QA test sets, ids 0-51712 are their test questions in the
    reference's order and train ids (NQ + HotpotQA train) follow from 51713.

Configuration (`make_env(**kwargs)`, `horizonrl serve search --env-kwargs JSON`, or the
JSON object in `$HORIZONRL_SEARCH`, which also sets the splits and categories that
`horizonrl envs`, the server's `/v1/info` and the trainer see):
    world        folder made by `horizonrl data make-search` (default: the built-in world)
    qa_dir       folder with the reference's QA sets (FlashRAG layout); needs corpus or index
    qa_test      {"name": "file.jsonl", ...} test QA sets in id order; qa_train likewise
    corpus       corpus JSONL; its index is built once into `$HORIZONRL_CACHE/search/indexes`
    index        a folder made by `horizonrl index build` (takes precedence over corpus)
    kind, model  index kind when one is built here ("bm25" or "dense") and the dense model path
    top_k        passages per search (3); answer_ends_episode (True)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from horizonrl.envs.core import TextEnv
from horizonrl.envs.registry import FamilySpec
from horizonrl.envs.search.data import SearchDataset, load_qa_sets, load_reference_qa, load_world_dataset
from horizonrl.envs.search.world import HOP_CATEGORIES, WORLD_FORMAT, generate_world, write_world

DEFAULT_SEED = 0
DEFAULT_PORT = 36005
CONFIG_ENV_VAR = "HORIZONRL_SEARCH"
_DATA_KEYS = ("world", "qa_dir", "qa_test", "qa_train", "corpus", "index", "kind", "model")
_ENV_KEYS = ("top_k", "answer_ends_episode")


def default_world_dir() -> Path:
    """The built-in world (seed 0), generated into the cache on first use."""
    from horizonrl.models import cache_dir

    path = cache_dir() / "search" / f"world-seed{DEFAULT_SEED}-v{WORLD_FORMAT}"
    if not (path / "world.json").is_file():
        write_world(generate_world(DEFAULT_SEED), path)
    return path


def _freeze(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


@functools.cache
def _dataset(frozen: str) -> tuple[SearchDataset, Path | None]:
    """The QA data set and, for generated worlds, the world folder."""
    config = json.loads(frozen)
    if config.get("qa_dir"):
        return load_reference_qa(str(Path(config["qa_dir"]).resolve())), None
    if config.get("qa_test"):
        return load_qa_sets(config["qa_test"], config.get("qa_train")), None
    world = Path(config["world"]) if config.get("world") else default_world_dir()
    return load_world_dataset(world), world


def _index_dir(config: dict[str, Any], world: Path | None) -> Path:
    """Where the index lives: given, beside a generated world, or in the cache keyed by corpus."""
    from horizonrl.envs.search.retrieval import build_index, is_index

    if config.get("index"):
        return Path(config["index"])
    kind = config.get("kind") or "bm25"
    corpus = Path(config["corpus"]) if config.get("corpus") else None
    if corpus is None and world is None:
        raise ValueError("QA sets need a corpus (corpus=FILE) or an index (index=DIR) to search")
    if corpus is None:
        assert world is not None
        corpus, out = world / "corpus.jsonl", world / f"index-{kind}"
    else:
        from horizonrl.models import cache_dir

        stat = corpus.resolve().stat()
        key = f"{corpus.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{kind}|{config.get('model')}"
        out = cache_dir() / "search" / "indexes" / hashlib.sha1(key.encode()).hexdigest()[:16]
    if not is_index(out):
        build_index(corpus, out, kind=kind, model=config.get("model"), progress=False)
    return out


def make_env(**kwargs: Any) -> TextEnv:
    """A `SearchEnv`; kwargs as in the module docstring. Retrievers are shared per index folder."""
    from horizonrl.envs.search.env import SearchEnv
    from horizonrl.envs.search.retrieval import load_retriever

    unknown = sorted(set(kwargs) - set(_DATA_KEYS) - set(_ENV_KEYS))
    if unknown:
        raise TypeError(f"unknown search env options {unknown}; valid: {', '.join(_DATA_KEYS + _ENV_KEYS)}")
    data_config = {k: kwargs[k] for k in _DATA_KEYS if kwargs.get(k) is not None}
    dataset, world = _dataset(_freeze(data_config))
    retriever = load_retriever(_index_dir(data_config, world))
    return SearchEnv(
        dataset,
        retriever,
        top_k=int(kwargs.get("top_k", 3)),
        answer_ends_episode=bool(kwargs.get("answer_ends_episode", True)),
    )


def make_spec(**config: Any) -> FamilySpec:
    """The family spec for one configuration (the registered `SPEC` reads `$HORIZONRL_SEARCH`)."""
    data_config = {k: config[k] for k in _DATA_KEYS if config.get(k) is not None}
    frozen = _freeze(data_config)
    generated = not (data_config.get("qa_dir") or data_config.get("qa_test"))

    def dataset() -> SearchDataset:
        return _dataset(frozen)[0]

    def category_of(item_id: str) -> str:
        from horizonrl.envs.core import UnknownItemError, parse_item_id

        family, index = parse_item_id(item_id)
        if family != "search":
            raise UnknownItemError(f"item {item_id!r} does not belong to family 'search'")
        return dataset().item(index).category

    def make_expert() -> Any:
        from horizonrl.envs.search.expert import SearchExpert

        return SearchExpert(dataset())

    categories = HOP_CATEGORIES if generated and "world" not in data_config else dataset().categories
    return FamilySpec(
        name="search",
        make_env=functools.partial(make_env, **config),
        load_splits=lambda: dataset().splits(),
        categories=tuple(categories),
        category_of=category_of,
        make_expert=make_expert if generated else None,
        default_port=DEFAULT_PORT,
        description="Answer questions by searching a passage corpus (BM25 or dense retrieval).",
        extra={"config": data_config},
    )


def _config_from_env() -> dict[str, Any]:
    raw = os.environ.get(CONFIG_ENV_VAR, "").strip()
    if not raw:
        return {}
    config = json.loads(raw if raw[0] in "{[" else Path(raw).read_text())
    if not isinstance(config, dict):
        raise ValueError(f"${CONFIG_ENV_VAR} must be a JSON object (or the path of a JSON file)")
    return config


SPEC = make_spec(**_config_from_env())
