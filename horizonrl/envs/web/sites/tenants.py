"""Tenants: one copy of the template database per token, in one directory.

A tenant's file is made from the template on its first request (or by `reset`), so a reset is
a file copy and an atomic rename (a few ms) and restores the exact start state. Requests open
a connection per request, so a rename never pulls a file from under an open transaction.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import threading
from pathlib import Path

TENANT_HEADER = "X-Horizonrl-Tenant"
ADMIN_HEADER = "X-Horizonrl-Admin"
DEFAULT_TENANT = "default"
_TOKEN = re.compile(r"[A-Za-z0-9_.-]{1,80}")


class BadTenantError(ValueError):
    """A tenant token with characters other than letters, digits, `_`, `.`, `-` (or too long)."""


def check_token(token: str) -> str:
    if not _TOKEN.fullmatch(token) or token.startswith("."):
        raise BadTenantError(f"bad tenant token {token!r}: use 1-80 letters, digits, '_', '.', '-'")
    return token


class TenantStore:
    """The tenants' database files under `root`, each a copy of `template`."""

    def __init__(self, template: Path, root: Path) -> None:
        self.template = template
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, token: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(token, threading.Lock())

    def path(self, token: str) -> Path:
        return self.root / f"{check_token(token)}.sqlite"

    def reset(self, token: str) -> None:
        """Give `token` a fresh copy of the template (creating the tenant if needed)."""
        path = self.path(token)
        with self._lock(token):
            tmp = path.with_suffix(".tmp")
            shutil.copyfile(self.template, tmp)
            os.replace(tmp, path)
            for leftover in (Path(f"{path}-journal"), Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)

    def connect(self, token: str) -> sqlite3.Connection:
        """A read-write connection to the tenant's database, made from the template if new."""
        path = self.path(token)
        if not path.exists():
            with self._lock(token):
                if not path.exists():
                    tmp = path.with_suffix(".tmp")
                    shutil.copyfile(self.template, tmp)
                    os.replace(tmp, path)
        db = sqlite3.connect(path, timeout=10, check_same_thread=False)
        db.row_factory = sqlite3.Row
        return db

    def query(self, token: str, sql: str) -> list[list]:
        """Rows of `sql` over a read-only connection (the tenant is created if new)."""
        self.connect(token).close()
        db = sqlite3.connect(f"file:{self.path(token)}?mode=ro", uri=True, timeout=10)
        try:
            return [list(row) for row in db.execute(sql).fetchall()]
        finally:
            db.close()

    def drop(self, token: str) -> bool:
        """Delete the tenant's file; False if it had none."""
        path = self.path(token)
        with self._lock(token):
            existed = path.exists()
            path.unlink(missing_ok=True)
        with self._guard:
            self._locks.pop(token, None)
        return existed
