"""Plugin families: entry points, `module:SPEC` references, `env.plugins`; one line for a broken one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from horizonrl.agent.prompts import DEFAULT_INSTRUCTION, get_prompt
from horizonrl.cli import main
from horizonrl.envs import FamilySpec, ItemTable, TextEnv
from horizonrl.envs.registry import PluginError, family_source, get_family, load_plugins
from tests.custom.helpers import ROOT

ITEMS = "".join(
    json.dumps({"split": split, "category": cat, "word": w}) + "\n"
    for split, cat, w in [("train", "short", "hi"), ("train", "long", "hello"), ("test", "short", "yo")]
)

ECHO = """
from pathlib import Path
from horizonrl.envs import FamilySpec, StepResult, TextEnv


class EchoEnv(TextEnv):
    def reset(self, item_id, *, seed=None):
        self.begin(item_id)
        return f"Say {self.item['word']}.", self.make_info()

    def step(self, action):
        won = action.strip() == self.item["word"]
        return StepResult("Yes." if won else "No.", float(won), won, False, self.make_info(won))


SPEC = FamilySpec.from_items("NAME", Path(__file__).with_name("items.jsonl"), EchoEnv, prompt=PROMPT)
"""


def _write_module(root, module: str, name: str, prompt: str = "None", body: str | None = None) -> None:
    (root / f"{module}.py").write_text(body or ECHO.replace("NAME", name).replace("PROMPT", prompt))
    (root / "items.jsonl").write_text(ITEMS)


def test_a_module_reference_loads_and_registers_the_family(tmp_path, monkeypatch):
    _write_module(tmp_path, "echo_ref", "echoref")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = get_family("echo_ref:SPEC")
    assert spec.name == "echoref" and get_family("echoref") is spec and get_family("echo_ref:SPEC") is spec
    assert family_source("echoref") == "module echo_ref:SPEC"
    assert spec.splits() == {"train": ["echoref_0", "echoref_1"], "test": ["echoref_2"]}
    assert spec.categories == ("short", "long") and spec.category_of("echoref_1") == "long"
    env = spec.make_env()
    assert env.reset("echoref_2") == ("Say yo.", {"success": False, "score": 0.0, "category": "short"})
    assert env.step("yo").info == {"success": True, "score": 1.0, "category": "short"}
    assert env.available_actions() is None
    prompt = get_prompt("echoref")  # no prompt of its own: the default (ReAct format)
    assert prompt.instruction == DEFAULT_INSTRUCTION and prompt.action_style == "react"


def test_a_family_prompt_given_as_a_dict(tmp_path, monkeypatch):
    _write_module(tmp_path, "echo_prompt", "echoprompt", prompt='{"instruction": "Repeat the word."}')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_prompt("echo_prompt:SPEC").instruction == "Repeat the word."
    assert get_prompt("echoprompt").initial_messages("Say hi.")[1]["content"] == "Repeat the word.\n\nSay hi."


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_such_module_xyz:SPEC", r"cannot load 'no_such_module_xyz:SPEC': ModuleNotFoundError"),
        ("json:dumps", r"'json:dumps' is a function, not a FamilySpec"),
        ("tests.envs.toy:NOPE", r"AttributeError"),
    ],
)
def test_a_bad_reference_is_one_line_naming_it(ref, message):
    with pytest.raises(PluginError, match=message) as info:
        get_family(ref)
    assert "\n" not in str(info.value)


def test_env_plugins_modules_register_or_define_spec(tmp_path, monkeypatch):
    _write_module(tmp_path, "echo_spec_mod", "echospec")
    registering = (
        "from horizonrl.envs.registry import register\nfrom echo_spec_mod2 import SPEC\nregister(SPEC)\n"
    )
    _write_module(tmp_path, "echo_spec_mod2", "echoreg")
    (tmp_path / "echo_registers.py").write_text(registering)
    (tmp_path / "empty_mod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [s.name for s in load_plugins(["echo_spec_mod", "echo_registers"])] == ["echospec", "echoreg"]
    assert family_source("echoreg") == "module echo_registers"
    with pytest.raises(PluginError, match="'empty_mod' registered no family and defines no SPEC"):
        load_plugins(["empty_mod"])


def test_entry_point_plugins_are_listed_and_a_broken_one_is_one_line(tmp_path):
    """Two installed plugins (a dist-info on the path): one works, one fails to import."""
    _write_module(tmp_path, "good_plugin", "good")
    (tmp_path / "broken_plugin.py").write_text("raise ImportError('needs libfoo')\n")
    dist = tmp_path / "fakeplugins-0.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplugins\nVersion: 0.3\n")
    entry_points = """\
        [horizonrl.envs]
        good = good_plugin:SPEC
        broken = broken_plugin:SPEC
        misnamed = good_plugin:SPEC
        """
    (dist / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "horizonrl.cli", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    listed = cli("envs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["family"]: r for r in json.loads(listed.stdout)}
    assert rows["good"]["source"] == "plugin good_plugin:SPEC (fakeplugins 0.3)"
    assert rows["good"]["splits"] == {"train": 2, "test": 1} and "error" not in rows["good"]
    assert "needs libfoo" in rows["broken"]["error"] and rows["textcraft"]["splits"]["test"] == 100
    assert "named 'misnamed' but its spec is 'good'" in rows["misnamed"]["error"]
    [line] = [x for x in listed.stderr.splitlines() if "broken" in x]
    assert line == (
        "horizonrl envs: plugin broken_plugin:SPEC (fakeplugins 0.3), family 'broken': cannot load "
        "'broken_plugin:SPEC': ImportError: needs libfoo"
    )
    checked = cli("check-env", "broken")
    assert checked.returncode == 1 and checked.stderr.strip().splitlines() == [
        "horizonrl: error: plugin broken_plugin:SPEC (fakeplugins 0.3), family 'broken': cannot load "
        "'broken_plugin:SPEC': ImportError: needs libfoo"
    ]
    good = cli("check-env", "good", "--items", "1")
    assert good.returncode == 0 and "good: 7 passed, 0 failed" in good.stdout


def test_items_files_are_checked(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"split": "train"}\n')
    with pytest.raises(ValueError, match=r"no items in split\(s\) \['test'\]"):
        ItemTable.load("x", path)
    path.write_text('{"split": "train"}\n{"split": "test"\n')
    with pytest.raises(ValueError, match=r"items.jsonl:2: not valid JSON"):
        ItemTable.load("x", path)
    path.write_text('[{"split": "train"}, {"split": "test", "category": "c"}]')
    table = ItemTable.load("x", path)
    assert table.categories == ("default", "c") and table.item("x_1") == {"split": "test", "category": "c"}
    with pytest.raises(KeyError, match=r"items are x_0..x_1"):
        table.item("x_2")


def test_begin_without_items_says_how_to_make_the_env():
    class Bare(TextEnv):
        def reset(self, item_id, *, seed=None):
            self.begin(item_id)
            return "", {}

    with pytest.raises(RuntimeError, match=r"FamilySpec.from_items"):
        Bare().reset("bare_0")
    assert isinstance(FamilySpec, type)


@pytest.mark.parametrize(
    ("name", "message"),
    [("Guess", "lowercase Python identifier"), ("textcraft", "built-in family"), ("my-game", "identifier")],
)
def test_new_env_refuses_bad_names(tmp_path, capsys, name, message):
    assert main(["new-env", name, "--dir", str(tmp_path / "pkg")]) == 2
    assert message in capsys.readouterr().err


def test_new_env_refuses_a_non_empty_dir_and_can_leave_out_the_expert(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["new-env", "game", "--dir", str(tmp_path / "full")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["new-env", "game", "--dir", str(tmp_path / "bare"), "--no-expert"]) == 0
    assert not (tmp_path / "bare" / "game_env" / "expert.py").exists()
    source = (tmp_path / "bare" / "game_env" / "__init__.py").read_text()
    assert "make_expert" not in source
    compile(source, "game_env/__init__.py", "exec")


def test_a_training_config_names_families_by_reference_and_plugin_module(tmp_path, monkeypatch):
    from horizonrl.config import load_config
    from horizonrl.trainer.families import resolve_config_families

    _write_module(tmp_path, "echo_cfg_ref", "echocfgref")
    _write_module(tmp_path, "echo_cfg_mod", "echocfgmod")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(
        None,
        [
            "data.families=[echo_cfg_ref:SPEC, echocfgmod, textcraft]",
            "env.plugins=[echo_cfg_mod]",
            "eval.families=[echo_cfg_ref:SPEC]",
            "env.servers={echo_cfg_ref:SPEC: 'http://127.0.0.1:1'}",
        ],
    )
    resolved = resolve_config_families(cfg)
    assert resolved.data.families == ["echocfgref", "echocfgmod", "textcraft"]
    assert resolved.eval.families == ["echocfgref"] and resolved.env.servers == {
        "echocfgref": "http://127.0.0.1:1"
    }
    with pytest.raises(SystemExit, match="unknown environment family 'nope'"):
        resolve_config_families(load_config(None, ["data.families=[nope]"]))


BROKEN_LOCAL = """
from horizonrl.envs import StepResult
from echo_bad_base import SPEC as BASE, EchoEnv
import dataclasses, itertools

counter = itertools.count()


class BadEnv(EchoEnv):
    def reset(self, item_id, *, seed=None):
        observation, info = super().reset(item_id, seed=seed)
        return f"{observation} ({next(counter)})", info

    def step(self, action):
        result = super().step(action)
        del result.info["category"]
        return result


SPEC = dataclasses.replace(BASE, name="echobad", make_env=lambda: _with_items(BadEnv()))


def _with_items(env):
    env.items = BASE.make_env().items
    return env
"""


def test_check_env_exits_1_with_a_line_per_failed_property(tmp_path, monkeypatch, capsys):
    _write_module(tmp_path, "echo_bad_base", "echobad")
    (tmp_path / "echo_bad.py").write_text(BROKEN_LOCAL)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["check-env", "echo_bad:SPEC", "--items", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  seed determinism: echobad:echobad_2: two resets with seed 0 gave different episodes" in out
    assert "FAIL  info keys: echobad:echobad_2 invalid action '': info lacks 'category'" in out
    assert "PASS  unknown item" in out and "echobad: 5 passed, 2 failed" in out
