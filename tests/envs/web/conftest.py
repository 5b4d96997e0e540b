"""Fixtures of the web family's tests: one real sites process per test session (W2's browser
tests reuse `sites`; each test uses its own tenant token, so the tests do not see each other)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from horizonrl.envs.web.sites import RunningSites, start_sites


@pytest.fixture(scope="session")
def sites() -> Iterator[RunningSites]:
    with start_sites() as running:
        yield running


@pytest.fixture
def tenant(sites: RunningSites) -> Iterator[str]:
    """A fresh tenant token with the template's start state; dropped after the test."""
    token = f"t-{uuid.uuid4().hex[:12]}"
    sites.reset_tenant(token)
    yield token
    sites.drop_tenant(token)
