"""Hooks that cannot be dodged or stalled (issue 10), and the receipts of their denials.

Each test below reproduces a defect found on main:

- hostile stdin (100,000 ``[``, a 5,000-digit integer, a truncated or oversized payload) ended
  in a traceback and exit 1: no decision, so a fenced body's tool call went through;
- a Bash command of 2,500 ``git push`` segments took a minute to be answered (every push was
  resolved with git, twice) and only its first effect was journaled;
- a PreToolUse hook killed after it recorded INTENDED left an effect that reconcile called
  FAILED_BEFORE_DISPATCH, and the successor repeated the same ``gh pr create``;
- a fenced or refused body's denied call left no receipt in the ledger.

Hooks run in-process where possible (``hook_main``, as Claude Code's stdin would feed it); the
real entry point runs as a process for the kill point, the time budget and one hostile payload.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Campaign, soak_scale
from onstation.cli.hooks import hook_main
from onstation.cli.main import cli
from onstation.core.effects import EffectState
from onstation.core.errors import Conflict, StaleGeneration
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief.hooks import MAX_EFFECTS_PER_CALL

ONSTATION = str(Path(sys.executable).with_name("onstation"))
NODE = "app"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.com",
}  # fmt: skip
PR_CREATE = "gh pr create --title 'Fix login' --base main"


def _sh(cwd: Path, *args: str) -> None:
    subprocess.run(args, cwd=cwd, capture_output=True, env={**os.environ, **GIT_ENV}, check=True)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A workspace bound to ``app`` (a git repository whose origin is on GitHub, on a feature
    branch), its ledger, and nothing else: no network, no user configuration."""
    repo = tmp_path / "app"
    repo.mkdir()
    _sh(repo, "git", "init", "-q", "-b", "main")
    (repo / "README.md").write_text("app\n")
    _sh(repo, "git", "add", "README.md")
    _sh(repo, "git", "commit", "-q", "-m", "init")
    _sh(repo, "git", "remote", "add", "origin", "https://github.com/acme/app.git")
    _sh(repo, "git", "checkout", "-q", "-b", "fix-login")
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node(NODE)
        HarnessLedger(ledger).bind_workspace(str(repo), NODE, harness="claude-code", by="test")
    monkeypatch.delenv("ONSTATION_TEST_KILL_AT", raising=False)
    monkeypatch.delenv("ONSTATION_HOOK_BUDGET", raising=False)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return {"repo": repo, "db": db, "tmp": tmp_path}


def hook(
    world: dict[str, Any], event: str, stdin: bytes | dict[str, Any], harness: str = "claude-code"
) -> tuple[int, str, str]:
    """One hook call in-process: (exit code, stdout, stderr)."""
    data = json.dumps(stdin).encode() if isinstance(stdin, dict) else stdin
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    sys.stdout, sys.stderr = out, err
    try:
        code = hook_main([harness, event, "--db", world["db"]])
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def payload(world: dict[str, Any], session: str, event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "cwd": str(world["repo"]), "hook_event_name": event,
            "permission_mode": "default", **fields}  # fmt: skip


def bash(world: dict[str, Any], session: str, command: str, tool_use_id: str) -> dict[str, Any]:
    return payload(world, session, "PreToolUse", tool_name="Bash", tool_use_id=tool_use_id,
                   tool_input={"command": command, "description": "run"})  # fmt: skip


def start(world: dict[str, Any], session: str) -> str:
    code, out, err = hook(world, "SessionStart", payload(world, session, "SessionStart",
                                                         source="startup"))  # fmt: skip
    assert code == 0, err
    return str(json.loads(out)["hookSpecificOutput"]["additionalContext"])


def fence(world: dict[str, Any], generation: int) -> None:
    with Ledger.open(world["db"]) as ledger:
        ledger.fence(NODE, expect_generation=generation, by="team-lead", reason="relief")


def denial_reason(out: str) -> str | None:
    """The deny's reason, or None when the hook gave no decision."""
    if not out.strip():
        return None
    decision = json.loads(out)["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    return str(decision["permissionDecisionReason"])


def receipts(world: dict[str, Any]) -> list[Any]:
    with Ledger.open(world["db"]) as ledger:
        return ledger.denials(NODE)


def effects(world: dict[str, Any]) -> list[Any]:
    with Ledger.open(world["db"]) as ledger:
        return ledger.effects(NODE)


@pytest.fixture
def fenced(world: dict[str, Any]) -> dict[str, Any]:
    """``s-old`` was the body (generation 1) and is fenced; ``s-new`` is the live body."""
    start(world, "s-old")
    fence(world, 1)
    assert "generation 2" in start(world, "s-new")
    return world


# --------------------------------------------------------------------------------------------
# 1. Hostile stdin: a fenced or refused body is denied before any parsing that can fail


def _prefix(world: dict[str, Any], session: str, tool: str = "Bash") -> bytes:
    return (
        f'{{"session_id": "{session}", "cwd": "{world["repo"]}", '
        f'"hook_event_name": "PreToolUse", "tool_name": "{tool}", "tool_input": '
    ).encode()


#: Payload tails after ``"tool_input": `` that once ended in a traceback, or are never parsed.
HOSTILE: dict[str, bytes] = {
    "100,000 [": b"[" * 100_000 + b"]" * 100_000 + b"}",
    "50,000 nested objects": b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}",
    "5,000-digit integer": b'{"command": "git push", "n": ' + b"7" * 5_000 + b"}}",
    "larger than 1 MiB": b'{"command": "git push # ' + b"x" * (2 << 20) + b'"}}',
    "truncated": b'{"command": "git push origin ma',
    "not UTF-8": b'{"command": "git push \xff\xfe"}}',
    "trailing garbage": b'{"command": "git push"}} {"session_id": "s-new"}',
}


@pytest.mark.parametrize("tail", sorted(HOSTILE))
@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_fenced_body_is_denied_whatever_its_payload(
    fenced: dict[str, Any], tail: str, harness: str
) -> None:
    code, out, err = hook(fenced, "PreToolUse", _prefix(fenced, "s-old") + HOSTILE[tail], harness)
    assert code == 0
    reason = denial_reason(out)
    assert reason is not None and "has been relieved" in reason, (tail, out, err)
    assert len(err.strip().splitlines()) == 1, err
    (receipt,) = receipts(fenced)
    assert (receipt.reason, receipt.presented_generation, receipt.current_generation) == (
        "fenced", 1, 2,
    )  # fmt: skip
    assert f"{harness} session s-old" in receipt.action and "Bash" in receipt.action


@pytest.mark.parametrize("tail", sorted(HOSTILE))
def test_a_refused_body_is_denied_whatever_its_payload(world: dict[str, Any], tail: str) -> None:
    start(world, "s-live")
    assert "not the body of app" in start(world, "s-intruder")
    code, out, err = hook(world, "PreToolUse", _prefix(world, "s-intruder") + HOSTILE[tail])
    assert code == 0
    reason = denial_reason(out)
    assert reason is not None and "not the live body of app" in reason, (tail, out, err)
    (receipt,) = receipts(world)
    assert receipt.reason == "not admitted" and "session s-intruder" in receipt.action


@pytest.mark.parametrize("tail", sorted(HOSTILE))
@pytest.mark.parametrize("session", ["s-live", "s-unknown"])
def test_a_live_body_or_an_unknown_session_fails_open_on_hostile_payloads(
    world: dict[str, Any], tail: str, session: str
) -> None:
    start(world, "s-live")
    code, out, err = hook(world, "PreToolUse", _prefix(world, session) + HOSTILE[tail])
    # No decision: only the notice the host shows the user.
    assert code == 0 and list(json.loads(out)) == ["systemMessage"], out
    assert "went ahead unrecorded" in json.loads(out)["systemMessage"]
    assert len(err.strip().splitlines()) == 1 and "failed open" in err, err
    assert receipts(world) == [] and effects(world) == []


def test_the_real_entry_point_denies_a_fenced_body_its_100000_brackets(
    fenced: dict[str, Any],
) -> None:
    done = subprocess.run(
        [ONSTATION, "hook", "claude-code", "PreToolUse", "--db", fenced["db"]],
        input=_prefix(fenced, "s-old") + HOSTILE["100,000 ["], capture_output=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert denial_reason(done.stdout.decode()) is not None


# --------------------------------------------------------------------------------------------
# 4. Every hook denial leaves a receipt: the session and the tool, listed by `onstation denials`


def test_a_fenced_bodys_push_write_and_mcp_call_are_denied_with_receipts(
    fenced: dict[str, Any],
) -> None:
    calls = [
        bash(fenced, "s-old", "git push origin fix-login", "t-push"),
        payload(fenced, "s-old", "PreToolUse", tool_name="Write", tool_use_id="t-write",
                tool_input={"file_path": str(fenced["repo"] / "x.py"), "content": "x = 1\n"}),
        payload(fenced, "s-old", "PreToolUse", tool_name="mcp__slack__send_message",
                tool_use_id="t-mcp", tool_input={"channel": "C1", "text": "done"}),
    ]  # fmt: skip
    for call in calls:
        code, out, err = hook(fenced, "PreToolUse", call)
        assert code == 0 and err == ""
        assert "has been relieved" in str(denial_reason(out))
    found = receipts(fenced)
    assert [d.reason for d in found] == ["fenced"] * 3
    assert [d.action.split(": PreToolUse ")[1].split(":")[0] for d in found] == [
        "Bash", "Write", "mcp__slack__send_message",
    ]  # fmt: skip
    assert all(d.action.startswith("claude-code session s-old") for d in found)
    assert all((d.presented_generation, d.current_generation) == (1, 2) for d in found)
    assert effects(fenced) == []  # nothing journaled for a body that may not act

    listed = CliRunner().invoke(cli, ["denials", NODE, "--db", fenced["db"]])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.strip().splitlines()
    assert len(lines) == 3 and all("fenced" in line and "session s-old" in line for line in lines)
    assert "mcp__slack__send_message" in lines[2]


def test_a_refused_bodys_effect_capable_call_is_denied_with_a_receipt(
    world: dict[str, Any],
) -> None:
    start(world, "s-live")
    start(world, "s-intruder")
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-intruder", PR_CREATE, "t-1"))
    assert code == 0 and "lease fence app --expect-generation 1" in str(denial_reason(out))
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-intruder", "ls -la", "t-2"))
    assert (code, out) == (0, "")  # not effect-capable: allowed, and nothing to record
    (receipt,) = receipts(world)
    assert receipt.reason == "not admitted"
    assert receipt.action.startswith("claude-code session s-intruder: PreToolUse Bash: ")
    assert "gh" in receipt.action and "pr" in receipt.action


# --------------------------------------------------------------------------------------------
# 2. No input makes a hook run long: what is bounded is the work, not a measured time


class _GitRuns:
    """Counts the git commands effect classification starts (and cuts a runaway short)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ceiling: int = 400) -> None:
        self.count = 0
        self.ceiling = ceiling
        real = subprocess.run

        def run(argv: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(argv, list) and argv[:1] == ["git"]:
                self.count += 1
                if self.count > self.ceiling:
                    raise RuntimeError("more git commands than any bound allows")
            return real(argv, *args, **kwargs)

        monkeypatch.setattr(subprocess, "run", run)


def _pushes(n: int) -> str:
    return "; ".join(f"git push origin b{i}" for i in range(n))


def test_2500_pushes_in_one_call_are_denied_after_resolving_a_few(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    start(world, "s-live")
    git = _GitRuns(monkeypatch)
    code, out, err = hook(world, "PreToolUse", bash(world, "s-live", _pushes(2_500), "t-many"))
    assert code == 0, err
    assert "too many effects in one call" in str(denial_reason(out))
    # The fast path stops at the first push, the full path after MAX + 1 of them.
    assert git.count <= 5 * (MAX_EFFECTS_PER_CALL + 2)
    assert effects(world) == []  # denied whole: nothing journaled
    (receipt,) = receipts(world)
    assert receipt.reason == "too many effects" and "(+8 more)" in receipt.action


def test_a_fenced_bodys_2500_pushes_are_denied_without_running_git(
    fenced: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    git = _GitRuns(monkeypatch)
    code, out, _ = hook(fenced, "PreToolUse", bash(fenced, "s-old", _pushes(2_500), "t-many"))
    assert code == 0 and "has been relieved" in str(denial_reason(out))
    assert git.count == 0  # judged before any classification
    assert [d.reason for d in receipts(fenced)] == ["fenced"]


def test_every_effect_of_a_call_is_journaled_up_to_the_bound(world: dict[str, Any]) -> None:
    start(world, "s-live")
    command = f"git push -u origin fix-login && {PR_CREATE}"
    code, out, err = hook(world, "PreToolUse", bash(world, "s-live", command, "t-both"))
    assert (code, out) == (0, ""), err
    found = effects(world)
    assert sorted(e.operation for e in found) == ["gh.pr.create", "git.push"]
    assert all(e.state is EffectState.DISPATCHED for e in found)
    # The pull request alone, asked for again, is the same effect: denied.
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-live", PR_CREATE, "t-again"))
    assert "not repeating an effect" in str(denial_reason(out))

    at_bound = "; ".join(f"git push origin HEAD:refs/heads/b{i}" for i in range(8))
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-live", at_bound, "t-eight"))
    assert (code, out) == (0, "")
    assert len(effects(world)) == 2 + MAX_EFFECTS_PER_CALL


def test_classification_past_its_deadline_denies_an_unchecked_call(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import onstation.harness.effects as effects_module

    start(world, "s-live")
    git = _GitRuns(monkeypatch)
    # The clock the classifier reads says the deadline has passed (the watchdog's is real).
    monkeypatch.setattr(effects_module, "time", types.SimpleNamespace(monotonic=lambda: 1e18))
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-live", "git push", "t-late"))
    assert code == 0 and "time budget" in str(denial_reason(out))
    assert git.count == 0 and effects(world) == []
    assert [d.reason for d in receipts(world)] == ["over time budget"]
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-live", "ls", "t-ls"))
    assert (code, out) == (0, "")  # nothing to resolve: not effect-capable, allowed


def test_past_its_budget_the_real_hook_answers_whatever_it_waits_on(
    world: dict[str, Any],
) -> None:
    """The ledger is locked by someone else: the hook's SQLite wait is cut by its budget
    (ONSTATION_HOOK_BUDGET=1): an unchecked PreToolUse is denied, any other event gets no
    decision, and both exit 0 with one line on stderr."""
    start(world, "s-live")
    env = {**os.environ, "ONSTATION_HOOK_BUDGET": "1"}
    locker = sqlite3.connect(world["db"], isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        results = {}
        for event, call in [
            ("PreToolUse", bash(world, "s-live", "git push", "t-stuck")),
            ("PostToolUse", {**bash(world, "s-live", "git push", "t-stuck"),
                             "hook_event_name": "PostToolUse", "tool_response": {}}),
        ]:  # fmt: skip
            results[event] = subprocess.run(
                [ONSTATION, "hook", "claude-code", event, "--db", world["db"]],
                input=json.dumps(call), capture_output=True, text=True, env=env, timeout=120,
                check=False,
            )  # fmt: skip
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    pre, post = results["PreToolUse"], results["PostToolUse"]
    assert pre.returncode == 0 and "time budget" in str(denial_reason(pre.stdout)), pre.stderr
    assert len(pre.stderr.splitlines()) == 1 and "budget" in pre.stderr
    assert post.returncode == 0 and list(json.loads(post.stdout)) == ["systemMessage"]
    assert "time budget" in json.loads(post.stdout)["systemMessage"]
    assert len(post.stderr.splitlines()) == 1 and "no decision" in post.stderr
    assert effects(world) == []


# --------------------------------------------------------------------------------------------
# 3. A hook killed after INTENDED: the tool may have run, so the effect is AMBIGUOUS


def test_a_hook_killed_after_intended_leaves_an_ambiguous_effect_never_repeated(
    world: dict[str, Any],
) -> None:
    start(world, "s-old")
    env = {**os.environ, "ONSTATION_TEST_KILL_AT": "pre-tool-use:intended"}
    killed = subprocess.run(
        [ONSTATION, "hook", "claude-code", "PreToolUse", "--db", world["db"]],
        input=json.dumps(bash(world, "s-old", PR_CREATE, "t-pr")), capture_output=True,
        text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    # SIGKILL right after INTENDED was committed: no decision, so the host runs the tool.
    assert killed.returncode == -9 and killed.stdout == "", killed.stderr
    (intended,) = effects(world)
    assert (intended.state, intended.operation) == (EffectState.INTENDED, "gh.pr.create")

    fence(world, 1)
    with Ledger.open(world["db"]) as ledger:
        report = ledger.reconcile(NODE, by="team-lead")
    assert report.ambiguous == [intended.effect_id] and report.failed_before_dispatch == []
    assert [e.state for e in effects(world)] == [EffectState.AMBIGUOUS]

    assert "generation 2" in start(world, "s-successor")
    code, out, _ = hook(world, "PreToolUse", bash(world, "s-successor", PR_CREATE, "t-pr-2"))
    assert code == 0
    reason = str(denial_reason(out))
    assert "not repeating an effect" in reason and "AMBIGUOUS" in reason
    assert [e.state for e in effects(world)] == [EffectState.AMBIGUOUS]


def test_an_intent_left_by_a_fenced_body_is_ambiguous_and_its_call_is_not_repeated(
    world: dict[str, Any],
) -> None:
    """What the killed hook leaves, recorded directly: an intent with no dispatch and no
    refusal. Reconcile may not call it FAILED_BEFORE_DISPATCH (it may have run)."""
    start(world, "s-old")
    with Ledger.open(world["db"]) as ledger:
        intended, _ = ledger.intend_effect(NODE, generation=1, operation="gh.pr.create",
                                           destination="github.com/acme/app",
                                           arguments={"title": "x"})  # fmt: skip
        ledger.fence(NODE, expect_generation=1, by="team-lead", reason="relief")
        report = ledger.reconcile(NODE)
    assert report.ambiguous == [intended.effect_id] and report.failed_before_dispatch == []
    start(world, "s-successor")
    with Ledger.open(world["db"]) as ledger, pytest.raises(Conflict, match="AMBIGUOUS"):
        ledger.intend_effect(
            NODE,
            generation=2,
            operation="gh.pr.create",
            destination="github.com/acme/app",
            arguments={"title": "x"},
        )


def test_an_intent_whose_dispatch_the_ledger_refused_is_settled_as_not_run(
    world: dict[str, Any],
) -> None:
    """The evidence that a tool did not run: the ledger refused its dispatch to the fenced
    generation (and the hook then denied the call)."""
    start(world, "s-old")
    with Ledger.open(world["db"]) as ledger:
        intended, _ = ledger.intend_effect(NODE, generation=1, operation="gh.pr.create",
                                           destination="github.com/acme/app",
                                           arguments={"title": "x"})  # fmt: skip
        ledger.fence(NODE, expect_generation=1, by="team-lead", reason="relief")
        with pytest.raises(StaleGeneration, match="may not act"):
            ledger.dispatch_effect(intended.effect_id, generation=1)
        report = ledger.reconcile(NODE)
    assert report.failed_before_dispatch == [intended.effect_id] and report.ambiguous == []


# --------------------------------------------------------------------------------------------
# A fuzzer for hook stdin


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=16,
)  # fmt: skip
GARBAGE = st.one_of(
    st.binary(max_size=300),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 120_000).map(lambda n: b"[" * n),
    st.integers(4_301, 6_000).map(lambda n: b"9" * n),
    st.sampled_from(sorted(HOSTILE.values())),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
EVENTS = st.sampled_from(
    ["PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "PreCompact",
     "SessionEnd", "Notification"]
)  # fmt: skip


def test_any_stdin_exits_0_with_at_most_one_line_and_no_traceback(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, campaign: type[Campaign]
) -> None:
    count = campaign("hook stdin fuzz (any bytes, any event)")
    monkeypatch.chdir(world["tmp"])  # an unmanaged directory: random payloads bind nothing
    start(world, "s-live")

    @settings(max_examples=150 * soak_scale(), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])  # fmt: skip
    @given(data=GARBAGE, event=EVENTS, harness=st.sampled_from(["claude-code", "codex"]))
    def attempt(data: bytes, event: str, harness: str) -> None:
        count.tried()
        code, out, err = hook(world, event, data, harness)
        if code != 0 or "Traceback" in err:
            count.lost()
        assert code == 0 and "Traceback" not in err, (event, data[:80], err)
        assert len(err.strip().splitlines()) <= 1, err
        if out.strip():
            assert isinstance(json.loads(out), dict)

    attempt()


def test_a_fenced_session_is_always_denied_whatever_accompanies_its_id(
    fenced: dict[str, Any], campaign: type[Campaign]
) -> None:
    count = campaign("hook stdin fuzz (a fenced session's PreToolUse)")
    tools = st.sampled_from(["Bash", "Read", "Write", "mcp__github__create_pull_request"])
    # What follows "tool_input": never holds a quote of its own making, so it cannot start a
    # second top-level "session_id" (no host writes one); anything else goes.
    tails = st.one_of(GARBAGE.map(lambda b: b.replace(b'"', b"")),
                      JSON_VALUES.map(lambda v: json.dumps(v).encode()))  # fmt: skip
    ends = st.sampled_from([b"}", b"", b"}}", b"]", b"} trailing", b', "x": 1}'])

    @settings(max_examples=100 * soak_scale(), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])  # fmt: skip
    @given(tool=tools, tail=tails, end=ends, harness=st.sampled_from(["claude-code", "codex"]))
    def attempt(tool: str, tail: bytes, end: bytes, harness: str) -> None:
        count.tried()
        data = _prefix(fenced, "s-old", tool) + tail + end
        code, out, err = hook(fenced, "PreToolUse", data, harness)
        reason = denial_reason(out) if code == 0 else None
        if reason is None:
            count.lost()
        else:
            count.denied()
        assert code == 0 and reason is not None and "has been relieved" in reason, (
            data[:120], out, err,
        )  # fmt: skip

    attempt()


def test_every_effect_of_one_call_is_settled_by_its_result(world: dict[str, Any]) -> None:
    """Regression: with every effect of a call journaled, PostToolUse settled only the first;
    the others stayed DISPATCHED and became AMBIGUOUS at the next fence."""
    start(world, "s1")
    command = "git push origin fix-login:a; git push origin fix-login:b"
    code, out, err = hook(world, "PreToolUse", bash(world, "s1", command, "t-two"))
    assert code == 0 and denial_reason(out) is None, (out, err)
    after = payload(world, "s1", "PostToolUse", tool_name="Bash", tool_use_id="t-two",
                    tool_input={"command": command}, tool_response={"stdout": "", "stderr": "",
                    "interrupted": False})  # fmt: skip
    code, _out, err = hook(world, "PostToolUse", after)
    assert code == 0, err
    with Ledger.open(world["db"]) as ledger:
        states = [e.state for e in ledger.effects(NODE)]
        assert states == [EffectState.COMMITTED, EffectState.COMMITTED]
        fence(world, 1)
        assert ledger.reconcile(NODE).unresolved_ambiguous == []
