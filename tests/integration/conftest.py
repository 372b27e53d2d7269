"""Fixtures the git evidence tests share (tests/conftest.py has the suite's own)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from onstation.harness import evidence


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own (git's global configuration and ignore file live there)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every process the evidence module starts, by git subcommand."""
    seen: Counter[str] = Counter()
    real = evidence.run_captured

    def counting(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        seen[argv[3] if argv[:1] == ["git"] else argv[0]] += 1
        return real(argv, **kwargs)

    monkeypatch.setattr(evidence, "run_captured", counting)
    return seen
