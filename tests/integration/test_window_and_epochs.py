"""The right window, the right reading: payload sequences as Claude Code and Codex send them.

- A 1M session: the status line declares ``context_window_size: 1000000``; the hooks that
  follow (PostToolUse carries no model, the transcript holds the API id without ``[1m]``)
  read the same percent, never the 200k one.
- A Codex estimate record (every component zero but ``total_tokens``) around a compaction
  is rejected as unknown, recorded as such, never acted on.
- A compaction starts a new context epoch: the reading resets, the tier marks re-arm (a
  second Red after a compaction), and the history shows ``hull.compacted`` once.
- A preset whose Red lies past the host's compaction point is warned about.

Each hook runs as the host runs it: the installed command, the payload on stdin.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onstation.ledger import Ledger

ONSTATION = str(Path(sys.executable).with_name("onstation"))

API_MODEL = "claude-opus-4-6"  # the API id the transcript holds: no [1m]


class Host:
    """A workspace with onstation installed for one harness, and one session's transcript."""

    def __init__(self, root: Path, harness: str = "claude-code", **env: str) -> None:
        self.root = root
        self.harness = harness
        self.project = root / "proj"
        self.project.mkdir(parents=True)
        self.db = root / "ledger.db"
        config_dir = root / "claude-config"
        config_dir.mkdir()
        self.env = {**os.environ, "ONSTATION_DB": str(self.db),
                    "XDG_STATE_HOME": str(root / "state"),
                    "CLAUDE_CONFIG_DIR": str(config_dir), "CODEX_HOME": str(root / "codex"),
                    **env}  # fmt: skip
        for name in ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
                     "DISABLE_AUTO_COMPACT", "DISABLE_COMPACT"):  # fmt: skip
            if name not in env:
                self.env.pop(name, None)
        done = subprocess.run(
            [ONSTATION, "install", harness, "--project", str(self.project), "--node", "solo"],
            capture_output=True, text=True, env=self.env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.transcript = root / ("s1.jsonl" if harness == "claude-code" else "rollout.jsonl")
        self.transcript.touch()
        self.turn = 0

    # -- what the host writes ------------------------------------------------------------

    def write(self, record: dict[str, Any]) -> None:
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(record) + "\n")

    def assistant_turn(self, context_tokens: int) -> None:
        """A main-chain assistant line whose usage totals ``context_tokens`` of context."""
        self.turn += 1
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 500,
                 "cache_read_input_tokens": context_tokens - 503, "output_tokens": 80}  # fmt: skip
        self.write({"type": "assistant", "isSidechain": False, "sessionId": "s1",
                    "uuid": f"u{self.turn}", "requestId": f"req_{self.turn}",
                    "message": {"id": f"msg_{self.turn}", "role": "assistant",
                                "model": API_MODEL, "stop_reason": "tool_use",
                                "content": [{"type": "text", "text": "working"}],
                                "usage": usage}})  # fmt: skip

    def compact_boundary(self, post_tokens: int | None) -> None:
        """The transcript's compaction marker and summary (harness-formats.md §3.2)."""
        meta: dict[str, Any] = {"trigger": "auto", "preTokens": 150_000}
        if post_tokens is not None:
            meta["postTokens"] = post_tokens
        self.write({"type": "system", "subtype": "compact_boundary", "parentUuid": None,
                    "isSidechain": False, "sessionId": "s1", "uuid": f"cb{self.turn}",
                    "content": "Conversation compacted", "level": "info",
                    "compactMetadata": meta})  # fmt: skip
        self.write({"type": "user", "parentUuid": f"cb{self.turn}", "isSidechain": False,
                    "uuid": f"cs{self.turn}", "isCompactSummary": True,
                    "message": {"role": "user",
                                "content": [{"type": "text", "text": "Summary"}]}})  # fmt: skip

    # -- what the host runs --------------------------------------------------------------

    def hook_command(self, event: str) -> str:
        folder, name = (".claude", "settings.local.json") if self.harness == "claude-code" \
            else (".codex", "hooks.json")  # fmt: skip
        path = self.project / folder / name
        if not path.exists():
            path = self.project / folder / "settings.json"
        hooks = json.loads(path.read_text())["hooks"]
        if event in hooks:
            return str(hooks[event][0]["hooks"][0]["command"])
        # An event install does not register yet: the same command with this event's name.
        return str(hooks["PreCompact"][0]["hooks"][0]["command"]).replace("PreCompact", event)

    def fire(self, event: str, **fields: Any) -> dict[str, Any] | None:
        payload: dict[str, Any] = {"session_id": "s1", "transcript_path": str(self.transcript),
                                   "cwd": str(self.project), "hook_event_name": event,
                                   **fields}  # fmt: skip
        if self.harness == "codex":
            payload.setdefault("model", "gpt-5.3-codex")
            payload.setdefault("turn_id", "turn-1")
        else:
            payload.setdefault("permission_mode", "default")
        done = subprocess.run(  # noqa: S602 - the command string as the host runs it
            self.hook_command(event), shell=True, input=json.dumps(payload),
            capture_output=True, text=True, env=self.env, cwd=self.project, timeout=60,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    def post_tool_use(self, i: int) -> dict[str, Any] | None:
        return self.fire("PostToolUse", tool_name="Read", tool_use_id=f"t{i}",
                         tool_input={"file_path": "README.md"}, tool_response={})  # fmt: skip

    def statusline(self, context_window: dict[str, Any], model_id: str) -> list[str]:
        payload = {"cwd": str(self.project), "session_id": "s1",
                   "transcript_path": str(self.transcript),
                   "model": {"id": model_id, "display_name": "Opus"}, "version": "2.1.240",
                   "context_window": context_window}  # fmt: skip
        done = subprocess.run(
            [ONSTATION, "statusline"], input=json.dumps(payload), capture_output=True,
            text=True, env=self.env, cwd=self.project, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    # -- what the ledger holds -----------------------------------------------------------

    def events(self, kind: str) -> list[dict[str, Any]]:
        with Ledger.open(str(self.db)) as ledger:
            return [dict(e.detail) for e in ledger.history("solo") if e.kind == kind]

    def telemetry(self) -> tuple[Any, ...] | None:
        conn = sqlite3.connect(self.db)
        try:
            row = conn.execute(
                "SELECT percent, used_tokens, window_tokens, source, tier, epoch FROM telemetry "
                "WHERE session_id = 's1'"
            ).fetchone()
            return None if row is None else tuple(row)
        finally:
            conn.close()

    def messages(self, kind: str) -> int:
        conn = sqlite3.connect(self.db)
        try:
            return int(conn.execute("SELECT count(*) FROM message WHERE kind = ?",
                                    (kind,)).fetchone()[0])  # fmt: skip
        finally:
            conn.close()


def _status_window(used: int, size: int, *, percent: float | None) -> dict[str, Any]:
    return {"total_input_tokens": used, "total_output_tokens": 900,
            "context_window_size": size, "used_percentage": percent,
            "remaining_percentage": None if percent is None else 100 - percent,
            "current_usage": {"input_tokens": 3, "output_tokens": 900,
                              "cache_creation_input_tokens": 500,
                              "cache_read_input_tokens": used - 503}}  # fmt: skip


@pytest.mark.parametrize("fast", ["on", "off"])
def test_one_million_session_reads_one_percent_from_statusline_and_hooks(
    tmp_path: Path, fast: str
) -> None:
    host = Host(tmp_path, ONSTATION_HOOK_FAST_PATH=fast)
    host.fire("SessionStart", source="startup", model=API_MODEL)
    host.assistant_turn(130_000)
    # Claude Code 2.1.80's own sample shape: model id with [1m], a 1M window, 13 % used.
    line = host.statusline(_status_window(130_000, 1_000_000, percent=13), "claude-opus-4-6[1m]")
    assert "Green 13.0% of 1M" in line[-1]
    for i in range(4):  # PostToolUse carries no model; the transcript's id has no [1m]
        host.post_tool_use(i)
        reading = host.telemetry()
        assert reading is not None
        assert reading[0] == pytest.approx(13.0), reading
        assert reading[2] == 1_000_000
    host.assistant_turn(131_000)
    host.post_tool_use(9)
    assert host.telemetry()[0] == pytest.approx(13.1)  # type: ignore[index]
    assert [e["tier"] for e in host.events("hull.tier")] == ["green"]
    assert host.messages("relief.emergency") == 0
    assert host.messages("relief.requested") == 0


def test_statusline_without_a_window_size_uses_the_declared_one(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.statusline(_status_window(130_000, 1_000_000, percent=13), "claude-opus-4-6[1m]")
    window = _status_window(130_000, 1_000_000, percent=None)
    del window["context_window_size"]
    line = host.statusline(window, API_MODEL)
    assert "13.0% of 1M" in line[-1]


def _token_count(last: dict[str, int], window: int = 258_400) -> dict[str, Any]:
    return {"timestamp": "2026-05-14T10:00:00.000Z", "type": "event_msg",
            "payload": {"type": "token_count",
                        "info": {"model_context_window": window, "last_token_usage": last,
                                 "total_token_usage": {"input_tokens": 900_000,
                                                       "cached_input_tokens": 0,
                                                       "output_tokens": 40_000,
                                                       "reasoning_output_tokens": 0,
                                                       "total_tokens": 940_000}},
                        "rate_limits": {"primary": {"used_percent": 3.0}}}}  # fmt: skip


@pytest.mark.parametrize("fast", ["on", "off"])
def test_codex_estimate_record_is_rejected_never_acted_on(tmp_path: Path, fast: str) -> None:
    host = Host(tmp_path, "codex", ONSTATION_HOOK_FAST_PATH=fast)
    host.write({"timestamp": "t", "type": "session_meta",
                "payload": {"id": "s1", "cli_version": "0.130"}})  # fmt: skip
    host.write(_token_count({"input_tokens": 50_000, "cached_input_tokens": 500,
                             "output_tokens": 300, "reasoning_output_tokens": 200,
                             "total_tokens": 50_300}))  # fmt: skip
    host.fire("SessionStart", source="startup")
    host.post_tool_use(1)
    before = host.telemetry()
    assert before is not None and before[4] == "green" and before[2] == 258_400
    # Around a compaction Codex writes an estimate: every component zero but the total
    # (940000 / 258400 = 364 %).
    host.write({"timestamp": "t", "type": "compacted", "payload": {"message": "summary"}})
    host.write(_token_count({"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                             "reasoning_output_tokens": 0, "total_tokens": 940_000}))  # fmt: skip
    for i in range(2, 5):
        out = host.post_tool_use(i)
        assert "Critical" not in json.dumps(out)
    assert host.messages("relief.emergency") == 0
    assert [e["tier"] for e in host.events("hull.tier")] == ["green"]
    rejected = host.events("hull.rejected")
    assert len(rejected) == 1, rejected
    assert "do not add up" in rejected[0]["detail"]
    # The next real usage is read again.
    host.write(_token_count({"input_tokens": 20_000, "cached_input_tokens": 0,
                             "output_tokens": 1_000, "reasoning_output_tokens": 0,
                             "total_tokens": 21_000}))  # fmt: skip
    host.post_tool_use(9)
    after = host.telemetry()
    assert after is not None and after[1] == 21_000


def test_statusline_over_100_percent_is_rejected(tmp_path: Path) -> None:
    host = Host(tmp_path)
    window = _status_window(130_000, 200_000, percent=364)
    line = host.statusline(window, API_MODEL)
    assert "context unknown" in line[-1]
    assert host.events("hull.tier") == []
    assert len(host.events("hull.rejected")) == 1
    host.statusline(window, API_MODEL)
    assert len(host.events("hull.rejected")) == 1  # once per figure and epoch


@pytest.mark.parametrize("fast", ["on", "off"])
def test_a_compaction_rearms_the_tiers(tmp_path: Path, fast: str) -> None:
    host = Host(tmp_path, ONSTATION_HOOK_FAST_PATH=fast)
    host.fire("SessionStart", source="startup", model=API_MODEL)
    host.assistant_turn(70_000)  # 35 % of 200k: Red
    first = host.post_tool_use(1)
    assert "Hull integrity Red" in json.dumps(first)
    host.assistant_turn(71_000)
    host.post_tool_use(2)
    # Auto-compaction, as Claude Code reports it: PreCompact, the transcript's boundary,
    # SessionStart with source compact (harness-formats.md §1.3, §3.2).
    host.fire("PreCompact", trigger="auto", custom_instructions=None)
    host.compact_boundary(post_tokens=20_000)
    host.fire("SessionStart", source="compact")
    host.post_tool_use(3)
    reading = host.telemetry()
    assert reading is not None
    assert reading[0] == pytest.approx(10.0) and reading[3] == "transcript.post_compaction"
    assert reading[5] == 1  # the new epoch
    compacted = host.events("hull.compacted")
    assert [e["epoch"] for e in compacted] == [1], compacted  # several signals, one epoch
    host.fire("PostCompact", trigger="auto", compact_summary="Summary")
    assert len(host.events("hull.compacted")) == 1
    host.assistant_turn(30_000)
    host.post_tool_use(4)
    host.assistant_turn(70_000)  # Red again, in the new epoch
    second = host.post_tool_use(5)
    assert "Hull integrity Red" in json.dumps(second)
    assert host.messages("relief.requested") == 2
    reds = [e for e in host.events("hull.tier") if e["tier"] == "red"]
    assert [e["epoch"] for e in reds] == [0, 1]


def test_statusline_null_usage_after_compact_starts_an_epoch(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.statusline(_status_window(70_000, 200_000, percent=35), API_MODEL)
    cleared = {**_status_window(70_000, 200_000, percent=None), "current_usage": None}
    line = host.statusline(cleared, API_MODEL)  # right after /compact
    assert "context unknown" in line[-1]
    assert host.telemetry() is None  # the old figure does not stay
    host.statusline(cleared, API_MODEL)  # refreshed again: still the same compaction
    assert [e["epoch"] for e in host.events("hull.compacted")] == [1]
    host.statusline(_status_window(20_000, 200_000, percent=10), API_MODEL)
    host.statusline(_status_window(70_000, 200_000, percent=35), API_MODEL)
    reds = [e for e in host.events("hull.tier") if e["tier"] == "red"]
    assert [e["epoch"] for e in reds] == [0, 1]


def test_a_red_past_the_compaction_point_is_warned_about(tmp_path: Path) -> None:
    # Compaction at 30 % of the auto-compact window: the relief preset's Red (33 %) and
    # Critical (38 %) come after it.
    host = Host(tmp_path, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE="30")
    host.fire("SessionStart", source="startup", model=API_MODEL)
    host.assistant_turn(20_000)
    host.post_tool_use(1)
    host.assistant_turn(55_000)
    host.post_tool_use(2)
    warnings = host.events("hull.past_compaction")
    assert len(warnings) == 1, warnings  # once per body
    assert "Red (33%)" in warnings[0]["detail"] and "30.0%" in warnings[0]["detail"]
    line = host.statusline(_status_window(55_000, 200_000, percent=27.5), API_MODEL)
    assert any("past the host's compaction point" in each for each in line), line
    assert len(host.events("hull.past_compaction")) == 1


def test_no_warning_at_the_default_compaction_point(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.fire("SessionStart", source="startup", model=API_MODEL)
    host.assistant_turn(20_000)
    host.post_tool_use(1)
    line = host.statusline(_status_window(20_000, 200_000, percent=10), API_MODEL)
    assert not any("compaction point" in each for each in line)
    assert host.events("hull.past_compaction") == []


# -- the ledger's side, on every backend ------------------------------------------------------


def test_epochs_windows_and_notices_on_every_backend(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    ledger.register_node("solo")
    records = HarnessLedger(ledger)
    admission = records.admit_session("s1", harness="claude-code", node="solo", workspace=None)
    session = admission.session
    records.set_context_window("s1", 1_000_000)
    records.set_context_window("s1", 1_000_000)  # unchanged: nothing to write
    stored = records.session("s1")
    assert stored is not None and stored.context_window == 1_000_000
    assert stored.context_epoch == 0

    def fill(percent: float, tier: str, source: str = "transcript") -> bool:
        return records.record_fill(session, percent=percent, used_tokens=int(percent * 10_000),
                                   window_tokens=1_000_000, source=source, model=None,
                                   tier=tier, supervised=False,
                                   tier_message=("relief.requested", "Red") if tier == "red"
                                   else None)  # fmt: skip

    assert records.start_epoch(session, signal="PostCompact") is None  # no usage yet
    assert fill(35, "red") is True
    assert fill(36, "red") is False  # once per epoch
    assert records.start_epoch(session, signal="transcript") == 1
    assert records.start_epoch(session, signal="SessionStart compact") is None  # same one
    assert records.latest_fill("solo") is None  # the old figure does not stay
    assert fill(2, "green", "transcript.post_compaction") is True
    assert records.start_epoch(session, signal="statusline") is None  # still no usage
    assert fill(35, "red") is True  # re-armed
    compacted = [e.detail for e in ledger.history("solo") if e.kind == "hull.compacted"]
    assert [(d["epoch"], d["signal"]) for d in compacted] == [(1, "transcript")]
    reds = [e.detail["epoch"] for e in ledger.history("solo")
            if e.kind == "hull.tier" and e.detail["tier"] == "red"]  # fmt: skip
    assert reds == [0, 1]
    assert records.record_hull_notice(session, kind="rejected", detail="364% over 100%") is True
    assert records.record_hull_notice(session, kind="rejected", detail="364% over 100%") is False
    assert records.record_hull_notice(session, kind="past_compaction", detail="w",
                                      body_wide=True) is True  # fmt: skip
    assert records.record_hull_notice(session, kind="past_compaction", detail="w",
                                      body_wide=True) is False  # fmt: skip
    kinds = [e.kind for e in ledger.history("solo") if e.kind.startswith("hull.")]
    assert kinds.count("hull.rejected") == 1 and kinds.count("hull.past_compaction") == 1
