"""The agent's behaviour: one fake Claude Code session doing its steps of work.

Set-up (whose repository, which node, the transcript and hooks), the session's start
(SessionStart, a launched successor's challenge answer and heartbeat, the user prompt), and
the steps: each a ``Write`` of ``work/step-N.txt``, a ``Bash`` commit and, every few steps, a
``Bash`` push, each one inside PreToolUse and PostToolUse as Claude Code runs them. A denied
call is not run. What the hooks' answers decide is read from their fields
(:mod:`.answers`); what they mean for this body (admitted, fenced, not yet RUNNING, asked to
hand over) is read from the ledger's fields (:mod:`.control`). The endings (Stop, the
hand-over, waking after a fence) are in :mod:`.handover`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput
from onstation.harness.fake_agent import handover
from onstation.harness.fake_agent.answers import HookReply
from onstation.harness.fake_agent.common import (
    EXIT_BLOCKED,
    EXIT_CONFLICT,
    EXIT_DENIED,
    PROG,
    AgentDenied,
    AgentError,
    AgentRefused,
    Log,
    die_by_sigkill,
    short,
)
from onstation.harness.fake_agent.control import CLI, RELIEF_KINDS, Heartbeat
from onstation.harness.fake_agent.hooks import Hooks
from onstation.harness.fake_agent.options import WINDOWS, Options
from onstation.harness.fake_agent.transcript import Transcript
from onstation.harness.fake_agent.workspace import (
    GIT_IDENTITY,
    GIT_IDENTITY_ENV,
    SCRATCH_FLAG,
    SCRATCH_MARKER,
    is_scratch_workspace,
    push_refusal,
)

#: Bounded wait for a launched successor to be made RUNNING (its first effect-capable call).
RUNNING_RETRIES = 30
RUNNING_RETRY_DELAY = 0.2

#: An action run as a tool: returns the tool's response and whether it succeeded.
Action = Callable[[], tuple[dict[str, Any], bool]]


class HandedOver(Exception):
    """A hook stopped the session (``continue: false``) after this body handed over: the end
    the relief expects, as a host ends it, not a denial."""


@dataclass
class Done:
    """One step this body committed."""

    step: int
    path: str
    commit: str
    pushed: bool = False


class FakeAgent:
    """One fake Claude Code session working for one node."""

    def __init__(self, options: Options) -> None:
        self.o = options
        self.log = Log(options.log)
        self.workspace = options.workspace.resolve()
        # Commits are the fake agent's own (-c user.name/email); the environment's identity
        # variables would override those, so they are dropped.
        self.env = {k: v for k, v in os.environ.items() if k not in GIT_IDENTITY_ENV}
        if options.db:
            self.env["ONSTATION_DB"] = options.db
        self.env.update(
            GIT_TERMINAL_PROMPT="0",
            CLAUDECODE="1",
            CLAUDE_PROJECT_DIR=str(self.workspace),
            CLAUDE_CODE_SESSION_ID=options.session_id,
        )
        self.cli = CLI(self.env, self.workspace)
        self.node = ""
        self.generation: int | None = None
        self.challenge: str | None = os.environ.get("ONSTATION_CHALLENGE") or None
        self.awaiting_running = self.challenge is not None
        self.heartbeat: Heartbeat | None = None
        self.done: list[Done] = []
        self.first_step = 1
        self.relief: str | None = None  # the context that carried the relief request
        self.relief_tier: str | None = None  # the tier the request names (Red, Critical)
        self.brief_path: str | None = None
        self.handing_over = False  # its brief is being written (the fence may come meanwhile)
        self.tokens = options.start_tokens
        self.transcript: Transcript | None = None
        self.hooks: Hooks | None = None
        self.branch: str | None = None
        self.toplevel: Path | None = None
        self.started: datetime | None = None  # when the session started (SessionStart)

    # -- plumbing -----------------------------------------------------------------------------

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.workspace,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AgentError(f"git {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
        return done

    def fire(self, event: str, **fields: Any) -> HookReply:
        """Run the hooks of ``event`` and take in their answer (see :meth:`answered`)."""
        assert self.hooks is not None
        reply = self.hooks.fire(event, **fields)
        self.answered(event, reply)
        return reply

    def answered(self, event: str, reply: HookReply) -> None:
        """What every answer may carry: a relief request for this body among the messages its
        context delivered, and ``continue: false`` (the host stops the session)."""
        text = reply.context
        if text and self.relief is None:
            self._notice_relief(event, text)
        stop = reply.stop_reason
        if stop is not None and event not in ("Stop", "SessionEnd"):
            self.log("stopped_by_hook", hook=event, reason=stop)
            if self.handing_over:  # it has handed over (or is): the stop is its end
                raise HandedOver(stop)
            raise AgentDenied(f"the {event} hook stopped the session: {stop}")

    def _notice_relief(self, event: str, text: str) -> None:
        # The context is for the model; which of its messages ask this body to hand over is
        # read from the ledger's records of them (kind, addressee, sender), not from the text.
        if self.generation is None or self.started is None:
            return  # not a body: nothing is delivered to it
        asked = self.cli.relief_requests(self.node, self.generation, self.started)
        if not asked:
            return
        first = asked[0]
        self.relief = text
        self.relief_tier = RELIEF_KINDS[str(first["kind"])]
        self.log("relief_requested", hook=event, text=text[:1000], kind=first["kind"],
                 message_id=first.get("message_id"))  # fmt: skip

    # -- setup --------------------------------------------------------------------------------

    def _setup(self) -> None:
        if not self.workspace.is_dir():
            raise BadInput(f"--workspace: {self.workspace} is not a directory")
        top = self.git("rev-parse", "--show-toplevel", check=False)
        if top.returncode != 0:
            raise BadInput(f"--workspace: {self.workspace} is not a git repository")
        node = self.o.node or os.environ.get("ONSTATION_NODE")
        if not node:
            from onstation.harness.config import load_config

            node = load_config(self.workspace).node
        if not node:
            raise BadInput("--node: not given, no ONSTATION_NODE, no node in the workspace")
        from onstation.core.names import validate_name

        self.node = validate_name(node, "--node")
        validate_name(self.o.session_id, "--session-id")  # it names the transcript file
        launched = os.environ.get("ONSTATION_GENERATION")
        if launched:
            try:
                self.generation = int(launched)
            except ValueError as exc:
                raise BadInput(f"ONSTATION_GENERATION: not a number ({launched!r})") from exc
        head = self.git("symbolic-ref", "--short", "-q", "HEAD", check=False)
        self.branch = head.stdout.strip() or None
        # Work already committed (by an earlier body) is evidence: continue after it.
        listed = self.git("ls-tree", "--name-only", "HEAD", "work/", check=False)
        found = [int(m.group(1)) for m in re.finditer(r"step-(\d+)\.txt", listed.stdout)]
        self.first_step = max(found, default=0) + 1
        self._refuse_foreign_repository(Path(os.path.realpath(top.stdout.strip())))
        path = self.o.transcript or self._challenge_sink()
        path = path or self.workspace.parent / f"{self.o.session_id}.jsonl"
        self.transcript = Transcript(
            path.resolve(), self.o.session_id, self.workspace, WINDOWS[self.o.window], self.branch
        )
        self.hooks = Hooks(self.workspace, self.env, self.log, self.o.session_id,
                           self.transcript.path)  # fmt: skip
        self.log(
            "start",
            session_id=self.o.session_id,
            node=self.node,
            pid=os.getpid(),
            workspace=str(self.workspace),
            transcript=str(path),
            steps=self.o.steps,
            first_step=self.first_step,
            hooks=self.hooks.source,
            generation=self.generation,
            challenge=self.challenge is not None,
        )

    def _refuse_foreign_repository(self, top: Path) -> None:
        """Refuse, before the first write, a repository a stand-in must not touch.

        Run on a user's repository, a fake agent would commit "fake work" to their branch and
        push it to their origin; only the creator of a scratch repository can say it is one.
        """
        self.toplevel = top
        if not (self.o.scratch_workspace or is_scratch_workspace(self.workspace, self.env)):
            raise AgentRefused(
                f"{top} is not a scratch workspace (no {SCRATCH_MARKER} marker in its git "
                "directory): a stand-in never commits or pushes in a repository it did not "
                f"create; pass {SCRATCH_FLAG} if this repository is a throwaway one"
            )
        if self._may_push():
            self.refuse_foreign_push()

    def _may_push(self) -> bool:
        return bool(self.o.push_every or self.o.crash_after_dispatch or self.o.wake_after_fence)

    def refuse_foreign_push(self) -> None:
        """Pushes go only to a bare repository on this machine, whatever the flags say."""
        why = push_refusal(self.workspace, "origin", self.env)
        if why is not None:
            raise AgentRefused(
                f"{self.toplevel}: {why}; a stand-in pushes only to a bare repository on "
                f"this machine ({SCRATCH_FLAG} does not change that)"
            )

    def _log_outside_repository(self) -> bool:
        path = self.log.path
        if path is None or self.toplevel is None:
            return False
        return not Path(os.path.realpath(path)).is_relative_to(self.toplevel)

    def _challenge_sink(self) -> Path | None:
        """The transcript path a launched successor's challenge binds it to, if any."""
        try:
            sink = json.loads(self.challenge or "{}").get("transcript_sink")
        except (ValueError, AttributeError):
            return None  # a malformed challenge is the challenge answer's to refuse
        return Path(sink) if isinstance(sink, str) and os.path.isabs(sink) else None

    # -- the session --------------------------------------------------------------------------

    def run(self) -> int:
        try:
            self._setup()
            return self._session()
        except HandedOver as exc:
            self.stop_heartbeat()
            self.log("exit", code=0, reason="relieved", stopped_by_hook=str(exc))
            return 0
        except AgentDenied as exc:
            self.stop_heartbeat()
            self.log("exit", code=EXIT_DENIED, reason=str(exc))
            sys.stderr.write(f"{PROG}: denied: {exc}\n")
            return EXIT_DENIED
        except AgentRefused as exc:
            if self._log_outside_repository():  # a refused repository gets no file
                self.log("exit", code=EXIT_BLOCKED, reason=f"blocked: {exc}")
            sys.stderr.write(f"{PROG}: blocked: {exc}\n")
            return EXIT_BLOCKED
        finally:
            self.stop_heartbeat()
            self.log.close()

    def stop_heartbeat(self) -> None:
        """Stop renewing the lease; the exit is then the log's last line (a beat in flight
        after the session ended would be denied and logged after it)."""
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def _session(self) -> int:
        assert self.transcript is not None and self.hooks is not None
        self.started = datetime.now(UTC)
        start = self.hooks.fire("SessionStart", source="startup", model=self.transcript.model)
        admitted = False
        if self.challenge is None:
            # Whether this session is the node's body, and at which generation: the ledger's
            # live lease says (a launched successor was told its generation by its launcher).
            held = self.cli.admitted_generation(self.node, self.o.session_id)
            if held is not None:
                admitted, self.generation = True, held
        self.answered("SessionStart", start)
        self.log(
            "session_start",
            admitted=admitted,
            generation=self.generation,
            context=start.context[:1000],
        )
        if self.challenge is not None:
            self._answer_challenge()
        self._start_heartbeat()
        prompt = self.o.prompt or (
            f"Do the fake work: steps {self.first_step} to {self.o.steps}, one committed file "
            f"per step under work/, pushing every {self.o.push_every} steps."
        )
        self.transcript.user_prompt(prompt)
        self.fire("UserPromptSubmit", prompt=prompt)
        self.transcript.assistant(
            self.tokens, [{"type": "text", "text": "Starting the fake work."}], "end_turn"
        )
        if self.first_step > self.o.steps:
            self.log("nothing_to_do", first_step=self.first_step, steps=self.o.steps)
        for step in range(self.first_step, self.o.steps + 1):
            self._step(step)
            if self.relief is not None:
                return handover.hand_over(self, step)
            if self.o.wake_after_fence == step:
                return handover.wake_after_fence(self, step)
        return handover.stop(self, "done", self.o.steps)

    def _answer_challenge(self) -> None:
        assert self.challenge is not None
        if self.generation is None:
            raise AgentError("ONSTATION_CHALLENGE without ONSTATION_GENERATION")
        code, out, err = self.cli.run(
            "challenge",
            "answer",
            self.node,
            "--generation",
            str(self.generation),
            "--echo",
            self.challenge,
        )
        self.log(
            "challenge_answer", exit_code=code, stdout=out.strip()[:500], stderr=err.strip()[:500]
        )
        if code in (EXIT_DENIED, EXIT_CONFLICT):  # stale generation, or the echo refused
            raise AgentDenied(f"challenge answer refused (exit {code}): {err.strip()}")
        if code != 0:
            raise AgentError(f"onstation challenge answer failed (exit {code}): {err.strip()}")

    def _start_heartbeat(self) -> None:
        every = self.o.heartbeat
        if every is None and os.environ.get("ONSTATION_GENERATION"):
            every = 1.0  # a launched successor beats by default
        if every is None:
            return
        if self.generation is None:
            self.log("heartbeat", ok=False, error="no generation known; not heartbeating")
            return
        self.heartbeat = Heartbeat(self.cli, self.node, self.generation, every, self.log)
        self.heartbeat.start()

    # -- tool calls ---------------------------------------------------------------------------

    def _usage_for(self, step: int, index: int, calls: int) -> int:
        """Context at the index-th of ``calls`` API calls of ``step``.

        A body starts at ``--start-tokens`` and each of its own steps adds K, so its last call
        of a step is at start + K * (steps this body has done, this one included).
        """
        before = self.o.start_tokens + (step - self.first_step) * self.o.tokens_per_step
        return before + (self.o.tokens_per_step * (index + 1)) // calls

    def _fenced(self) -> bool:
        """Whether the ledger has fenced this body's generation (unknown: not a body)."""
        return self.generation is not None and self.cli.fenced(self.node, self.generation)

    def _may_become_running(self) -> bool:
        """Whether waiting can cure a denial: this generation's birth is not yet RUNNING."""
        return self.generation is not None and self.cli.awaiting_birth(self.node, self.generation)

    def tool(
        self,
        step: int,
        name: str,
        tool_input: dict[str, Any],
        tokens: int,
        text: str,
        action: Action,
        *,
        crash_after_dispatch: bool = False,
        think: float = 0.0,
    ) -> dict[str, Any] | None:
        """One tool call as Claude Code makes it; returns the tool's response, None if denied.

        ``think`` seconds pass first, as a model's response takes time before each call (the
        heartbeat goes on meanwhile)."""
        assert self.transcript is not None
        if think > 0:
            time.sleep(think)
        tool_use_id = "toolu_" + uuid.uuid4().hex[:24]
        self.tokens = tokens
        self.transcript.assistant(
            tokens,
            [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input},
            ],
            "tool_use",
        )
        attempts = 0
        while True:
            pre = self.fire(
                "PreToolUse", tool_name=name, tool_input=tool_input, tool_use_id=tool_use_id
            )
            reason = pre.deny_reason
            if reason is None:
                break
            self.log("denied", step=step, tool=name, input=short(tool_input), reason=reason)
            if self._fenced():
                raise AgentDenied(f"this body was relieved (fenced): {reason}")
            if not self.awaiting_running or not self._may_become_running():
                self.transcript.tool_result(tool_use_id, reason, True, {"denied": reason})
                if crash_after_dispatch:  # told to die here: it does, dispatched or not
                    self.log("crash", step=step, kind="after-dispatch", denied=True)
                    die_by_sigkill()
                return None
            attempts += 1  # a launched successor is not RUNNING yet: wait, bounded
            if attempts >= RUNNING_RETRIES:
                self.log(
                    "gave_up",
                    step=step,
                    tool=name,
                    attempts=attempts,
                    reason="not made RUNNING: every effect-capable call denied",
                )
                raise AgentDenied(f"not made RUNNING after {attempts} attempts: {reason}")
            time.sleep(RUNNING_RETRY_DELAY)
        if name == "Bash" and _is_push(tool_input):
            self.awaiting_running = False  # an effect was allowed: this body is RUNNING
        response, ok = action()
        self.log(
            "tool", step=step, tool=name, input=short(tool_input), ok=ok, response=short(response)
        )
        if crash_after_dispatch:
            self.log("crash", step=step, kind="after-dispatch", tool_use_id=tool_use_id)
            die_by_sigkill()
        shown = str(response.get("stdout") or response.get("filePath") or "ok")
        self.transcript.tool_result(tool_use_id, shown, not ok, response)
        if ok:
            self.fire(
                "PostToolUse",
                tool_name=name,
                tool_input=tool_input,
                tool_response=response,
                tool_use_id=tool_use_id,
                duration_ms=5,
            )
        else:
            self.fire(
                "PostToolUseFailure",
                tool_name=name,
                tool_input=tool_input,
                tool_use_id=tool_use_id,
                error=shown[-500:],
            )
        return response if ok else None

    def bash(self, *argvs: list[str]) -> Action:
        """An action running argv lists in order (``&&``), returning a Bash tool response."""

        def action() -> tuple[dict[str, Any], bool]:
            out, err, code = [], [], 0
            for argv in argvs:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    env=self.env,
                    cwd=self.workspace,
                    timeout=300,
                    check=False,
                )
                out.append(done.stdout)
                err.append(done.stderr)
                code = done.returncode
                if code != 0:
                    break
            response = {
                "stdout": "".join(out).strip(),
                "stderr": "".join(err).strip(),
                "interrupted": False,
                "isImage": False,
                "exitCode": code,
            }
            return response, code == 0

        return action

    # -- one step -----------------------------------------------------------------------------

    def _pushes_at(self, step: int) -> bool:
        if self.o.crash_after_dispatch == step:
            return True
        every = self.o.push_every
        return every > 0 and (step % every == 0 or step == self.o.steps)

    def _step(self, step: int) -> None:
        if self.o.crash_at == step:
            self.log("crash", step=step, kind="at-step-start")
            die_by_sigkill()
        if self.o.hang_at == step:
            if self.heartbeat is not None:
                self.heartbeat.stop()  # a hung body beats no more either
            self.log("hang", step=step)
            while True:
                time.sleep(3600)
        pushing = self._pushes_at(step)
        calls = 3 if pushing else 2
        # The step's think time is spread over its API calls, as a model's is: the ledger (and
        # a lead watching it) then sees time pass between any two of the step's calls too.
        think = self.o.step_seconds / calls
        relative = f"work/step-{step}.txt"
        target = self.workspace / relative
        content = f"fake work: step {step} of {self.o.steps}\nsession {self.o.session_id}\n"

        def write() -> tuple[dict[str, Any], bool]:
            target.parent.mkdir(parents=True, exist_ok=True)
            kind = "update" if target.exists() else "create"
            target.write_text(content, encoding="utf-8")
            return {"type": kind, "filePath": str(target), "success": True}, True

        wrote = self.tool(
            step,
            "Write",
            {"file_path": str(target), "content": content},
            self._usage_for(step, 0, calls),
            f"Writing {relative}.",
            write,
            think=think,
        )
        if wrote is None:
            self.log("step", step=step, tokens=self.tokens, committed=False)
            return
        message = f"fake work: step {step} of {self.o.steps}"
        add = ["git", "add", "--", relative]
        commit = ["git", *GIT_IDENTITY, "commit", "-q", "-m", message]
        committed = self.tool(
            step,
            "Bash",
            {
                "command": f"{shlex.join(add)} && {shlex.join(commit)}",
                "description": f"Commit step {step}",
            },
            self._usage_for(step, 1, calls),
            f"Committing {relative}.",
            self.bash(add, commit),
            think=think,
        )
        if committed is not None:
            head = self.git("rev-parse", "HEAD").stdout.strip()
            self.done.append(Done(step, relative, head))
        if pushing:
            self._push(step, self._usage_for(step, 2, calls), think)
        self.log(
            "step",
            step=step,
            tokens=self.tokens,
            committed=committed is not None,
            percent=round(self.tokens * 100 / self.o.window, 2),
        )

    def _push(self, step: int, tokens: int, think: float = 0.0) -> None:
        if self.branch is None:
            self.log("push_skipped", step=step, reason="detached HEAD: no branch to push")
            return
        argv = ["git", "push", "origin", self.branch]
        self.refuse_foreign_push()  # the remote may have changed since start-up
        pushed = self.tool(
            step,
            "Bash",
            {"command": shlex.join(argv), "description": "Push to origin"},
            tokens,
            f"Pushing {self.branch} to origin.",
            self.bash(argv),
            crash_after_dispatch=self.o.crash_after_dispatch == step,
            think=think,
        )
        if pushed is not None:
            for item in self.done:
                item.pushed = True


def _is_push(tool_input: dict[str, Any]) -> bool:
    return bool(re.search(r"\bgit\s+push\b", str(tool_input.get("command", ""))))
