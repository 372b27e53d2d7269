"""Each generation records the commit it started from (issue 13): the capsule's diff of the
body's work is taken against it. Hook payloads as Claude Code sends them, a real git workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hookworld import NODE, Claude, commit, installed_world, sh

from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    return installed_world(tmp_path)


def base_of(world: dict[str, Any], generation: int) -> str | None:
    with Ledger.open(world["db"]) as ledger:
        return HarnessLedger(ledger).base_of(NODE, generation)


def test_the_first_session_of_a_generation_records_where_it_started(
    world: dict[str, Any],
) -> None:
    project = world["project"]
    start = sh(project, "git", "rev-parse", "HEAD")
    claude = Claude(project, world["env"], "sess-1")
    claude.context("SessionStart", source="startup")
    assert base_of(world, 1) == start
    # The body works and commits; a /clear in the same process starts where it already is,
    # but its generation's work still began at the first base.
    commit(project, "a.txt")
    claude.context("SessionStart", source="clear")
    assert base_of(world, 1) == start
    with Ledger.open(world["db"]) as ledger:
        events = [e for e in ledger.history(NODE) if e.kind == "generation.base"]
    assert [(e.generation, e.detail["commit"]) for e in events] == [(1, start)]


def test_a_workspace_without_git_records_no_base(tmp_path: Path) -> None:
    world = installed_world(tmp_path)
    sh(world["project"], "rm", "-rf", ".git")
    Claude(world["project"], world["env"], "sess-1").context("SessionStart", source="startup")
    assert base_of(world, 1) is None


def test_a_base_must_be_a_full_commit_id(tmp_path: Path) -> None:
    from onstation.core.errors import BadInput

    with Ledger.open(str(tmp_path / "l.db")) as ledger:
        ledger.register_node(NODE, role="executor", spawner=None)
        records = HarnessLedger(ledger)
        for bad in ("HEAD", "abc123", "g" * 40, "--all"):
            with pytest.raises(BadInput, match="base commit"):
                records.record_base(NODE, 1, bad, source="test")
        assert records.record_base(NODE, 1, "a" * 40, source="test") == "a" * 40
        assert records.record_base(NODE, 1, "b" * 40, source="test") == "a" * 40  # first wins
        assert records.base_of(NODE, 2) is None
