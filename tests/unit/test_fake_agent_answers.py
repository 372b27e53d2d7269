"""The fake agent reads a hook's answer from its fields, as Claude Code does, never from its
wording; what an answer means for the body it reads from the ledger's fields.

Every answer here says one thing in its fields and the opposite in its text: the decision
must follow the fields.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from onstation.harness.fake_agent import (
    CLI,
    AgentDenied,
    FakeAgent,
    HandlerAnswer,
    HookReply,
    Hooks,
    Log,
    Options,
    Transcript,
)
from onstation.harness.fake_agent import agent as agent_module
from onstation.harness.fake_agent.control import (
    HOLDER,
    admitted_generation,
    awaiting_birth,
    is_fenced,
    relief_requests,
)


def _json(**fields: Any) -> str:
    return json.dumps(fields)


def _pre(decision: str, reason: str) -> str:
    return _json(
        hookSpecificOutput={
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    )


def _context(event: str, text: str) -> str:
    return _json(hookSpecificOutput={"hookEventName": event, "additionalContext": text})


def reply(event: str, *answers: tuple[int, str, str]) -> HookReply:
    """The merged answer of handlers that each ended with (exit code, stdout, stderr)."""
    return HookReply(event, [HandlerAnswer.read(code, out, err) for code, out, err in answers])


# -- PreToolUse: permissionDecision, the deprecated decision, exit 2 --------------------------


def test_a_deny_whose_reason_says_allowed_is_a_deny() -> None:
    got = reply("PreToolUse", (0, _pre("deny", "allowed: go ahead, nothing is blocked"), ""))
    assert got.permission == "deny"
    assert got.deny_reason == "allowed: go ahead, nothing is blocked"  # shown, not read


def test_an_allow_whose_context_says_denied_is_an_allow() -> None:
    text = "denied. blocked. this session has been relieved; not the body; fenced."
    out = _json(
        hookSpecificOutput={
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "deny",
            "additionalContext": text,
        }
    )
    got = reply("PreToolUse", (0, out, "denied"))
    assert got.permission == "allow"
    assert got.deny_reason is None and got.block_reason is None and got.stop_reason is None
    assert got.context == text


def test_no_decision_at_all_is_not_a_deny_whatever_the_text() -> None:
    plain = reply("PreToolUse", (0, "deny: blocked, fenced", "deny"))  # not JSON: no decision
    assert plain.permission is None and plain.deny_reason is None
    context = reply("PreToolUse", (0, _context("PreToolUse", "permissionDecision: deny"), ""))
    assert context.permission is None and context.deny_reason is None


def test_ask_is_not_a_deny_even_when_its_reason_says_deny() -> None:
    got = reply("PreToolUse", (0, _pre("ask", "deny this call"), ""))
    assert got.permission == "ask" and got.deny_reason is None


def test_exit_2_blocks_the_call_with_stderr_whatever_stdout_says() -> None:
    got = reply("PreToolUse", (2, _pre("allow", "allowed"), "allowed: it is fine"))
    assert got.permission == "deny" and got.deny_reason == "allowed: it is fine"
    assert reply("PreToolUse", (2, "", "")).deny_reason == "blocked by hook"


def test_exit_2_after_the_tool_ran_denies_nothing() -> None:
    got = reply("PostToolUse", (2, "", "denied"))
    assert got.deny_reason is None
    assert got.block_reason == "denied"  # a blocking error, shown to the model


def test_any_other_exit_code_fails_open_even_with_a_deny_on_stdout() -> None:
    for code in (1, 127):
        got = reply("PreToolUse", (code, _pre("deny", "denied"), "deny"))
        assert got.permission is None and got.deny_reason is None and got.outputs == []


def test_the_deprecated_decision_block_still_denies_a_pre_tool_use() -> None:
    got = reply("PreToolUse", (0, _json(decision="block", reason="approved, allowed"), ""))
    assert got.permission == "deny" and got.deny_reason == "approved, allowed"
    # On another event the same answer blocks that event, it denies no tool.
    post = reply("PostToolUse", (0, _json(decision="block", reason="approved"), ""))
    assert post.deny_reason is None and post.block_reason == "approved"


def test_one_deny_among_the_handlers_wins() -> None:
    got = reply(
        "PreToolUse",
        (0, _pre("allow", "denied"), ""),
        (0, _pre("ask", "denied"), ""),
        (0, _pre("deny", "allowed"), ""),
    )
    assert got.permission == "deny" and got.deny_reason == "allowed"
    assert (
        reply(
            "PreToolUse", (0, _pre("allow", "deny"), ""), (0, _pre("ask", "allow"), "")
        ).permission
        == "ask"
    )


# -- Stop and continue ------------------------------------------------------------------------


def test_a_stop_block_whose_reason_says_nothing_of_a_brief_is_a_block() -> None:
    got = reply("Stop", (0, _json(decision="block", reason="all done, you may stop"), ""))
    assert got.block_reason == "all done, you may stop"


def test_a_stop_answer_that_talks_of_blocking_but_decides_nothing_does_not_block() -> None:
    text = "Stop is blocked: write the turnover brief first."
    got = reply("Stop", (0, _context("Stop", text), ""), (0, _json(reason=text), ""))
    assert got.block_reason is None and got.context == text


def test_continue_false_stops_whatever_its_reason_says() -> None:
    got = reply(
        "PostToolUse",
        (0, _json(stopReason="keep going, continue"), ""),
        (0, _json(**{"continue": False, "stopReason": "continue working"}), ""),
    )
    assert got.stop_reason == "continue working"
    kept = reply("PostToolUse", (0, _json(**{"continue": True, "stopReason": "stop now"}), ""))
    assert kept.stop_reason is None


# -- the driver: real handlers from settings.json ---------------------------------------------


def test_the_driver_reads_real_handlers_by_their_fields(tmp_path: Path) -> None:
    deny = _pre("deny", "allowed")
    settings = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {"type": "command", "command": f"printf '%s' '{deny}'"},
                        {"type": "command", "command": "printf allowed >&2; exit 2"},
                    ],
                }
            ],
            "PostToolUse": [
                {
                    "matcher": "*",
                    "hooks": [
                        {
                            "type": "command",
                            "command": "printf '%s' '" + _context("PostToolUse", "denied") + "'",
                        },
                    ],
                }
            ],
        }
    }
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(settings))
    hooks = Hooks(tmp_path, {"PATH": "/usr/bin:/bin"}, Log(None), "sess-1", tmp_path / "t.jsonl")
    pre = hooks.fire(
        "PreToolUse", tool_name="Bash", tool_input={"command": "true"}, tool_use_id="toolu_1"
    )
    assert [a.exit_code for a in pre.answers] == [0, 2]
    assert pre.permission == "deny" and pre.deny_reason == "allowed"
    assert pre.blocking_errors == ["allowed"]
    # No handler matches Write: nothing decided.
    assert hooks.fire("PreToolUse", tool_name="Write", tool_input={}).permission is None
    post = hooks.fire("PostToolUse", tool_name="Bash", tool_input={}, tool_response={})
    assert post.deny_reason is None and post.block_reason is None and post.context == "denied"


# -- this body's standing: the ledger's fields, not the hook's text ---------------------------


def test_the_holder_is_the_one_the_ledger_writes() -> None:
    from onstation.ledger.bodies import holder_for

    assert HOLDER.format(session_id="s-1") == holder_for("claude-code", "s-1")


def test_admission_follows_the_live_leases_holder() -> None:
    mine = {"generation": 4, "live_lease": {"holder": "claude-code session s-1", "generation": 4}}
    assert admitted_generation(mine, "s-1") == 4
    assert admitted_generation(mine, "s-2") is None
    other = {
        "generation": 4,
        "note": "s-1 is the body of exec-1, generation 4",
        "live_lease": {"holder": "claude-code session s-9", "generation": 4},
    }
    assert admitted_generation(other, "s-1") is None
    assert admitted_generation({"generation": 4, "live_lease": None}, "s-1") is None


def test_a_fence_is_a_newer_generation() -> None:
    assert is_fenced({"generation": 3, "state": "relieved, fenced"}, 3) is False
    assert is_fenced({"generation": 4, "state": "ACTIVE"}, 3) is True
    assert is_fenced({"state": "has been relieved"}, 3) is False  # the ledger said nothing


def test_a_birth_waits_until_its_running_event() -> None:
    def event(kind: str, generation: int, **detail: Any) -> dict[str, Any]:
        return {"kind": kind, "generation": generation, "detail": detail}

    waiting = {
        "events": [
            event("birth.provisional", 2, reason="RUNNING"),
            event("birth.running", 1),
            event("birth.answered", 2),
        ]
    }
    assert awaiting_birth(waiting, 2) is True
    running = {"events": [*waiting["events"], event("birth.running", 2, reason="failed")]}
    assert awaiting_birth(running, 2) is False
    assert awaiting_birth(waiting, 3) is False  # no birth: waiting cures nothing


@pytest.fixture
def since() -> datetime:
    return datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _message(
    message_id: int,
    kind: str,
    body: str,
    *,
    at: datetime | None,
    generation: int | None = 2,
    sender_generation: int | None = None,
) -> dict[str, Any]:
    return {
        "message_id": message_id,
        "kind": kind,
        "body": body,
        "sender": "onstation",
        "generation": generation,
        "sender_generation": sender_generation,
        "delivered_at": None if at is None else at.isoformat().replace("+00:00", "Z"),
    }


def test_a_relief_request_is_its_kind_not_its_words(since: datetime) -> None:
    later = since + timedelta(seconds=1)
    messages = {
        "messages": [
            _message(1, "hull.amber", "Hull integrity Red. Prepare turnover brief.", at=later),
            _message(2, "status", "Hull integrity Critical: write the brief now", at=later),
            _message(3, "relief.requested", "All is well; keep working.", at=later),
        ]
    }
    assert [m["message_id"] for m in relief_requests(messages, 2, since)] == [3]


def test_only_requests_delivered_to_this_body_count(since: datetime) -> None:
    later, earlier = since + timedelta(seconds=1), since - timedelta(seconds=1)
    words = "Hull integrity Red. Prepare turnover brief."
    messages = {
        "messages": [
            _message(5, "relief_requested", words, at=later, generation=1),  # another generation's
            _message(6, "relief_requested", words, at=earlier),  # an earlier body's
            _message(7, "relief.emergency", words, at=None),  # not delivered yet
            # A subordinate's notice to its spawner: the same kind, sent by a body.
            _message(8, "relief_requested", words, at=later, generation=None, sender_generation=3),
        ]
    }
    assert relief_requests(messages, 2, since) == []
    messages["messages"].append(_message(9, "relief.emergency", "no", at=later, generation=None))
    messages["messages"].append(_message(4, "relief_requested", "no", at=later))
    assert [m["message_id"] for m in relief_requests(messages, 2, since)] == [4, 9]


# -- the agent acts on the fields, whatever the words ------------------------------------------


class LedgerSays(CLI):
    """The ledger's answers about this body, set by the test (no process is run)."""

    def __init__(
        self,
        *,
        fenced: bool = False,
        awaiting: bool = False,
        asked: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__({}, Path("."))
        self.is_fenced, self.awaiting, self.asked = fenced, awaiting, asked or []

    def fenced(self, node: str, generation: int) -> bool:
        return self.is_fenced

    def awaiting_birth(self, node: str, generation: int) -> bool:
        return self.awaiting

    def relief_requests(self, node: str, generation: int, since: datetime) -> list[dict[str, Any]]:
        return self.asked


class Scripted(Hooks):
    """Hooks whose PreToolUse answers are given in turn; every other event answers nothing."""

    def __init__(self, workspace: Path, *pre: HookReply) -> None:
        super().__init__(workspace, {}, Log(None), "s-1", workspace / "t.jsonl")
        self.pre = list(pre)
        self.fired: list[str] = []

    def fire(self, event: str, **fields: Any) -> HookReply:
        self.fired.append(event)
        return self.pre.pop(0) if event == "PreToolUse" else HookReply(event)


def _agent(tmp_path: Path, cli: CLI, *pre: HookReply, awaiting: bool = False) -> FakeAgent:
    agent = FakeAgent(Options(workspace=tmp_path))
    agent.node, agent.generation, agent.started = "exec-1", 2, datetime.now(UTC)
    agent.transcript = Transcript(tmp_path / "t.jsonl", "s-1", tmp_path, "m", "main")
    agent.hooks, agent.cli, agent.awaiting_running = Scripted(tmp_path, *pre), cli, awaiting
    return agent


def _push(agent: FakeAgent) -> dict[str, Any] | None:
    ran: list[bool] = []

    def action() -> tuple[dict[str, Any], bool]:
        ran.append(True)
        return {"stdout": "pushed"}, True

    got = agent.tool(1, "Bash", {"command": "git push origin main"}, 100, "Push.", action)
    assert bool(ran) == (got is not None)
    return got


def _deny(reason: str) -> HookReply:
    return reply("PreToolUse", (0, _pre("deny", reason), ""))


def test_a_deny_that_says_relieved_does_not_end_a_body_the_ledger_has_not_fenced(
    tmp_path: Path,
) -> None:
    agent = _agent(tmp_path, LedgerSays(fenced=False), _deny("this session has been relieved"))
    assert _push(agent) is None  # the call was not run, and the body goes on


def test_a_deny_of_a_fenced_body_ends_it_whatever_the_reason_says(tmp_path: Path) -> None:
    agent = _agent(tmp_path, LedgerSays(fenced=True), _deny("allowed: retry later"))
    with pytest.raises(AgentDenied, match="fenced"):
        _push(agent)


def test_a_successor_waits_while_its_birth_is_not_running_whatever_the_reason_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_module, "RUNNING_RETRY_DELAY", 0.0)
    final = _deny("onstation: not repeating an effect: AMBIGUOUS")
    agent = _agent(
        tmp_path,
        LedgerSays(awaiting=True),
        final,
        final,
        reply("PreToolUse", (0, "{}", "")),
        awaiting=True,
    )
    assert _push(agent) == {"stdout": "pushed"}
    assert isinstance(agent.hooks, Scripted) and agent.hooks.fired.count("PreToolUse") == 3
    assert agent.awaiting_running is False
    # Once its birth is RUNNING, a deny is final, even one that says to wait.
    agent = _agent(
        tmp_path,
        LedgerSays(awaiting=False),
        _deny("successor not yet challenged: wait and retry"),
        awaiting=True,
    )
    assert _push(agent) is None


def test_a_relief_request_is_what_the_ledger_delivered_not_what_the_context_says(
    tmp_path: Path,
) -> None:
    words = reply(
        "PostToolUse",
        (
            0,
            _context(
                "PostToolUse",
                "Hull integrity Red. Prepare turnover brief. Hull integrity Critical.",
            ),
            "",
        ),
    )
    agent = _agent(tmp_path, LedgerSays(asked=[]))
    agent.answered("PostToolUse", words)
    assert agent.relief is None
    quiet = reply("PostToolUse", (0, _context("PostToolUse", "[status] all is well"), ""))
    agent = _agent(tmp_path, LedgerSays(asked=[{"kind": "relief.emergency", "message_id": 7}]))
    agent.answered("PostToolUse", quiet)
    assert agent.relief == "[status] all is well" and agent.relief_tier == "Critical"


def test_continue_false_stops_the_session(tmp_path: Path) -> None:
    stop = reply("PreToolUse", (0, _json(**{"continue": False, "stopReason": "go on"}), ""))
    agent = _agent(tmp_path, LedgerSays(), stop)
    with pytest.raises(AgentDenied, match="go on"):
        _push(agent)
