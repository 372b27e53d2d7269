"""An epoch's first reading on the hook fast path (``relief.hotpath``): a quiet one (Green,
no warning that a tier lies past the host's compaction point) is recorded there as the full
path records it (the reading, the tier's mark and its ``hull.tier`` event), and durably: at
``synchronous=FULL`` on SQLite, with a commit that waits for its WAL flush on PostgreSQL, as
the full path commits a tier mark; a steady reading after it stays relaxed. Any other first
reading is the full path's. The rows are held equal to the full path's by
tests/integration/test_fast_path_differential.py, on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_turns import assistant_turn

from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief import hotpath, hotpath_pg
from onstation.relief.hooks import HookRunner

NODE = "exec-1"

#: Connections made ahead in a test are closed and forgotten after it (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("no_connection_left_ahead")


def _call(cwd: Path, transcript: Path, event: str, **fields: Any) -> HookCall:
    return HookCall.from_payload("claude-code", event, {
        "session_id": "sess-1", "cwd": str(cwd), "hook_event_name": event,
        "transcript_path": str(transcript), "permission_mode": "default", **fields,
    })  # fmt: skip


def _after_read(cwd: Path, transcript: Path, n: int) -> HookCall:
    return _call(cwd, transcript, "PostToolUse", tool_name="Read", tool_input={},
                 tool_use_id=f"toolu_{n}", tool_response={})  # fmt: skip


@pytest.fixture
def world(ledger_url: str, tmp_path: Path) -> tuple[str, Path, Path]:
    """An admitted session of ``NODE`` in ``tmp_path`` (configured there), no reading yet."""
    (tmp_path / ".onstation").mkdir()
    (tmp_path / ".onstation" / "config.json").write_text(
        json.dumps({"node": NODE, "db": ledger_url})
    )
    transcript = tmp_path / "s.jsonl"
    transcript.touch()
    with Ledger.open(ledger_url) as ledger:
        ledger.register_node(NODE)
        runner = HookRunner(ledger, "claude-code", WorkspaceConfig(node=NODE))
        runner.handle(_call(tmp_path, transcript, "SessionStart", source="startup"))
    return ledger_url, tmp_path, transcript


def _committed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How each fast-path write transaction commits: "full"/"normal" (SQLite's synchronous
    setting at the COMMIT), "waits"/"relaxed" (PostgreSQL: whether synchronous_commit was
    set off for it)."""
    seen: list[str] = []
    real_sqlite, real_pg = hotpath.SqliteStore.commit, hotpath_pg.PgStore.commit

    def sqlite_commit(self: Any, writes: Any) -> None:
        level = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        seen.append({1: "normal", 2: "full"}.get(level, str(level)))
        real_sqlite(self, writes)
        assert self.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL again

    def pg_commit(self: Any, writes: Any) -> None:
        sent: list[bytes] = []
        execute = self.conn.execute

        def recording(query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(query if isinstance(query, bytes) else str(query).encode())
            return execute(query, *args, **kwargs)

        self.conn.execute = recording
        try:
            real_pg(self, writes)
        finally:
            del self.conn.execute
        relaxed = b"SET LOCAL synchronous_commit TO OFF" in sent
        seen.append("relaxed" if relaxed else "waits")

    monkeypatch.setattr(hotpath.SqliteStore, "commit", sqlite_commit)
    monkeypatch.setattr(hotpath_pg.PgStore, "commit", pg_commit)
    return seen


def test_a_quiet_first_reading_is_recorded_here_durably(
    world: tuple[str, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cwd, transcript = world
    committed = _committed(monkeypatch)
    assistant_turn(transcript, 1, 20_000)  # 10 % of 200k: Green
    assert hotpath.try_fast(_after_read(cwd, transcript, 1), None) is None  # answered here
    assistant_turn(transcript, 2, 22_000)
    assert hotpath.try_fast(_after_read(cwd, transcript, 2), None) is None
    durable = "full" if not url.startswith("postgresql://") else "waits"
    relaxed = "normal" if durable == "full" else "relaxed"
    assert committed == [durable, relaxed]
    with Ledger.open(url) as ledger:
        records = HarnessLedger(ledger)
        fill = records.latest_fill(NODE)
        tiers = [e for e in ledger.history(NODE) if e.kind == "hull.tier"]
        outcomes = records.tool_outcomes(NODE, generation=1)
    assert fill is not None and fill["tier"] == "green" and fill["used_tokens"] == 22_000
    assert [(e.actor, e.detail) for e in tiers] == [("claude-code session sess-1", {
        "epoch": 0, "percent": 10.0, "session_id": "sess-1", "source": "transcript",
        "supervised": False, "tier": "green"})]  # fmt: skip
    assert [o.tool_use_id for o in outcomes] == ["toolu_1", "toolu_2"]


@pytest.mark.parametrize("tokens", [60_000, 70_000])  # Amber (a message to send), Red
def test_any_other_first_reading_is_the_full_paths(
    world: tuple[str, Path, Path], monkeypatch: pytest.MonkeyPatch, tokens: int
) -> None:
    url, cwd, transcript = world
    committed = _committed(monkeypatch)
    assistant_turn(transcript, 1, tokens)
    assert hotpath.try_fast(_after_read(cwd, transcript, 1), None) is hotpath.NOT_HANDLED
    assert committed == []
    with Ledger.open(url) as ledger:
        assert HarnessLedger(ledger).latest_fill(NODE) is None  # nothing written here
