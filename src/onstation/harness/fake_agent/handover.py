"""How a session ends: Stop, the hand-over when relief is asked for, waking after a fence.

- Stop: fired as Claude Code fires it; when it blocks (``decision: "block"`` or exit 2) the
  agent writes its turnover brief if it has not yet, then fires Stop again with
  ``stop_hook_active: true``; SessionEnd follows.
- The hand-over: a turnover brief (``onstation brief write``), or for a coordinator a
  continuation manifest that also tells its spawner, each run as a Bash tool call inside the
  hooks; then Stop.
- Wake mode: sleep until the ledger fences this generation, then try to act; every attempt
  must be denied, by the hook and by the ledger.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import uuid
from typing import TYPE_CHECKING, Any

from onstation.harness.fake_agent.common import EXIT_DENIED, EXIT_OK, AgentError
from onstation.harness.fake_agent.workspace import GIT_IDENTITY

if TYPE_CHECKING:
    from onstation.harness.fake_agent.agent import FakeAgent

FENCE_POLL = 0.2


def stop(agent: FakeAgent, why: str, step: int) -> int:
    """Fire Stop (again, once, if it blocks) and SessionEnd; exit 0."""
    assert agent.transcript is not None
    for active in (False, True):
        reply = agent.fire(
            "Stop", stop_hook_active=active, last_assistant_message=agent.transcript.last_text
        )
        if reply.stop_reason is not None:
            break  # continue: false: the host stops, whatever else the answer says
        reason = reply.block_reason
        if reason is None:
            break
        agent.log("stop_blocked", reason=reason)
        if agent.brief_path is None:
            write_brief(agent, step, None)  # what a real session does when told to go on
    # The host ends the session as Claude Code does when a print-mode run finishes; its
    # beats end first, as the host process's would.
    agent.stop_heartbeat()
    agent.fire("SessionEnd", reason="other")
    agent.log(
        "exit",
        code=EXIT_OK,
        reason=why,
        step=step,
        tokens=agent.tokens,
        commits=len(agent.done),
        brief=agent.brief_path,
    )
    return EXIT_OK


def hand_over(agent: FakeAgent, step: int) -> int:
    """Relief was asked for: write the brief (or the coordinator's manifest), then stop."""
    assert agent.relief is not None
    if agent.o.coordinator:
        respawn_self(agent, step)
    else:
        write_brief(agent, step, agent.relief_tier)
    return stop(agent, "relieved", step)


def cli_tool(agent: FakeAgent, step: int, args: list[str], description: str) -> dict[str, Any]:
    """Run an onstation command as a Bash tool call through the hooks; its JSON output."""
    assert agent.transcript is not None
    argv = agent.cli.command(*args)
    result: dict[str, Any] = {}

    def action() -> tuple[dict[str, Any], bool]:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=agent.env, cwd=agent.workspace,
            timeout=120, check=False,
        )  # fmt: skip
        result["code"], result["stdout"] = done.returncode, done.stdout
        return {"stdout": done.stdout.strip()[:2000], "stderr": done.stderr.strip(),
                "interrupted": False, "isImage": False,
                "exitCode": done.returncode}, done.returncode == 0  # fmt: skip

    tokens = agent.transcript.last_tokens or agent.tokens
    response = agent.tool(step, "Bash", {"command": shlex.join(argv),
                                         "description": description}, tokens,
                          f"{description}.", action)  # fmt: skip
    if response is None:
        raise AgentError(f"{description} failed: {result.get('stdout', '').strip()[:200]}")
    try:
        data = json.loads(result["stdout"])
    except (ValueError, KeyError) as exc:
        raise AgentError(f"{description}: unexpected output") from exc
    return data if isinstance(data, dict) else {}


def generation_args(agent: FakeAgent) -> list[str]:
    """A body's writes carry its generation (from the ledger, or from its launcher)."""
    return [] if agent.generation is None else ["--generation", str(agent.generation)]


def respawn_self(agent: FakeAgent, step: int) -> None:
    """The coordinator procedure: manifest, tell the spawner, stop (the lead respawns)."""
    l3, _, pun = str(agent.o.coordinator).partition(":")
    total = agent.o.steps
    args = ["manifest", "write", agent.node, "--l3", l3, "--pun", pun or "coord",
            "--l3-task", f"coordinate {total} steps of fake work",
            "--scratch", f"{len(agent.done)} of {total} steps committed"]  # fmt: skip
    for item in agent.done:
        args += ["--completed", f"step {item.step}: committed {item.commit[:12]}"]
    for n in range(step + 1, total + 1):
        args += ["--not-started", f"step {n}: write work/step-{n}.txt and commit it"]
    args += ["--next", f"continue from step {step + 1}", "--json"]
    args += generation_args(agent)
    # manifest write also tells the spawner (COORD_RESPAWN TRIGGERED, the procedure's
    # message), as a real coordinator's call does.
    agent.handing_over = True
    manifest = cli_tool(agent, step, args, "Write the continuation manifest")
    path = str(manifest.get("path"))
    node = cli_tool(agent, step, ["node", "show", agent.node, "--json"], "Find my spawner")
    spawner = node.get("spawner") or "team-lead"
    agent.brief_path = path
    agent.log("respawn_triggered", step=step, manifest=path, spawner=spawner)


def write_brief(agent: FakeAgent, step: int, tier: str | None) -> None:
    """The turnover brief from this body's evidence; ``tier`` is the hull tier the relief
    request named (None: a request that named none, such as a blocked Stop)."""
    assert agent.transcript is not None
    total = agent.o.steps
    trigger = f"hull integrity {tier}" if tier else "a relief request"
    args = [
        "brief",
        "write",
        agent.node,
        "--task",
        f"fake work: step {step} of {total}",
        "--status",
        "in_progress",
    ]
    for item in agent.done:
        state = "pushed to origin" if item.pushed else "not yet pushed"
        args += [
            "--completed",
            f"{item.path} — step {item.step} of {total}, committed {item.commit[:12]}, {state}",
        ]
    remaining = list(range(step + 1, total + 1))
    for n in remaining[:10]:
        args += ["--remaining", f"step {n} of {total}: write work/step-{n}.txt and commit it"]
    if len(remaining) > 10:
        args += ["--remaining", f"steps {remaining[10]} to {total}: the same, one each"]
    if any(not item.pushed for item in agent.done) and agent.o.push_every:
        args += ["--remaining", "push the unpushed commits to origin"]
    args += [
        "--decision",
        f"stop after step {step}: {trigger}; a fresh body continues from "
        f"step {step + 1} with a clean context",
        "--decision",
        f"push every {agent.o.push_every} steps: each push is one journaled "
        "effect, so a batch is never pushed twice",
        "--context",
        "completed steps are the work/step-N.txt files at HEAD; continue after the highest",
        "--handoff",
        f"onstation fake-agent --workspace {agent.workspace} --node {agent.node} --steps {total}",
        "--json",
        *generation_args(agent),
    ]
    agent.handing_over = True
    written = cli_tool(agent, step, args, "Write turnover brief")
    if not isinstance(written.get("path"), str):
        raise AgentError("onstation brief write: unexpected output")
    agent.brief_path = str(written["path"])
    agent.log("brief", step=step, path=agent.brief_path, trigger=trigger)


def wake_after_fence(agent: FakeAgent, step: int) -> int:
    """Sleep until this generation is fenced; then every attempt to act must be denied."""
    if agent.generation is None:
        raise AgentError("wake mode: this session was never admitted (no generation)")
    mine = agent.generation
    agent.log("sleeping_until_fenced", step=step, generation=mine)
    deadline = time.monotonic() + agent.o.fence_wait
    while True:
        current = agent.cli.generation(agent.node)
        if current != mine:
            break
        if time.monotonic() > deadline:
            raise AgentError(f"wake mode: not fenced within {agent.o.fence_wait:g} s")
        time.sleep(FENCE_POLL)
    agent.log("woke", generation=mine, current_generation=current)
    if agent.heartbeat is not None:
        agent.heartbeat.stop()
    allowed = []
    nxt = step + 1
    relative = f"work/step-{nxt}.txt"
    target = agent.workspace / relative
    add = ["git", "add", "--", relative]
    commit = ["git", *GIT_IDENTITY, "commit", "-q", "-m", f"fake work: step {nxt} (woken)"]
    push = ["git", "push", "origin", agent.branch or "HEAD"]
    send = agent.cli.command(
        "message",
        "send",
        "--from",
        agent.node,
        "--to",
        "team-lead",
        "--kind",
        "status",
        "--body",
        f"{agent.node} generation {mine} woke up and continues",
    )
    attempts: list[tuple[str, str, dict[str, Any], list[list[str]]]] = [
        ("git commit", "Write", {"file_path": str(target), "content": "woken\n"}, []),
        (
            "git commit",
            "Bash",
            {"command": f"{shlex.join(add)} && {shlex.join(commit)}", "description": "commit"},
            [add, commit],
        ),
        ("git push", "Bash", {"command": shlex.join(push), "description": "push"}, [push]),
        (
            "message send",
            "Bash",
            {"command": shlex.join(send), "description": "message"},
            [send],
        ),
    ]
    assert agent.transcript is not None
    for action, name, tool_input, argvs in attempts:
        tool_use_id = "toolu_" + uuid.uuid4().hex[:24]
        agent.transcript.assistant(
            agent.tokens,
            [
                {"type": "text", "text": f"Woke up; trying {action}."},
                {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input},
            ],
            "tool_use",
        )
        # Not agent.fire: a woken body plays a host that ignores `continue: false`, so that
        # the deny is proved to hold on its own; the stop the answer asked for is logged.
        assert agent.hooks is not None
        pre = agent.hooks.fire(
            "PreToolUse", tool_name=name, tool_input=tool_input, tool_use_id=tool_use_id
        )
        reason = pre.deny_reason
        if pre.stop_reason is not None:
            agent.log("stop_ignored", hook="PreToolUse", action=action, reason=pre.stop_reason)
        if reason is None:
            # The hooks let a fenced body act: do what a real session would, and say so.
            allowed.append(f"{name} ({action})")
            if name == "Write":
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("woken\n", encoding="utf-8")
            else:
                if push in argvs:
                    agent.refuse_foreign_push()
                agent.bash(*argvs)()
            agent.log("wake_attempt", action=action, tool=name, denied=False)
        else:
            agent.log(
                "wake_attempt", action=action, tool=name, denied=True, by="hook", reason=reason
            )
            agent.transcript.tool_result(tool_use_id, reason, True, {"denied": reason})
        # The body also asks the ledger itself, as a script would: the refusal is recorded.
        code, _out, err = agent.cli.run(
            "guard", agent.node, "--generation", str(mine), "--action", action
        )
        agent.log(
            "wake_attempt",
            action=action,
            denied=code == EXIT_DENIED,
            by="ledger",
            exit_code=code,
            reason=err.strip()[:500],
        )
        if code != EXIT_DENIED:
            allowed.append(f"guard ({action}, exit {code})")
    if allowed:
        raise AgentError(f"a fenced body was allowed to act: {', '.join(allowed)}")
    agent.log("exit", code=EXIT_DENIED, reason="fenced: every attempt denied")
    return EXIT_DENIED
