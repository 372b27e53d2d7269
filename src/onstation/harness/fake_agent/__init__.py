"""The fake harness: a real program that behaves toward onstation as a Claude Code session.

``onstation fake-agent`` needs no model provider. It works on a real git repository (one
file and one commit per step, a push every few steps), writes a transcript JSONL whose
usage grows like a real session's (two streaming lines per API call sharing ``message.id``
and ``requestId``), and runs the hook commands Claude Code would run, with the payloads
Claude Code sends: SessionStart, UserPromptSubmit, PreToolUse/PostToolUse around every
tool call, Stop. It obeys the answers as the host reads them, from their fields: a denied
tool call is not run, a blocked Stop makes it write its turnover brief. What an answer means
for this body it reads from the ledger: a relief request delivered to it (a hull tier of Red
or Critical, or its lead's request) makes it write its turnover brief and stop; a denial
after its generation was fenced ends the run. Launched as a successor
(``ONSTATION_CHALLENGE`` in its environment) it answers the challenge first and heartbeats.
It can be told to crash, hang, or wake up after being fenced, which is what the end-to-end
tests of the failure rules need.

It is a stand-in, so it never touches a user's work: it commits and pushes only in a
repository marked as scratch (:func:`mark_scratch_workspace`, or ``--scratch-workspace``), and
pushes only to a bare repository on this machine. Anything else is refused before it writes.

Exit codes: 0 done or relieved, 2 bad input, 3 denied (fenced, or never made RUNNING),
4 blocked (not a scratch workspace, or a push target that is not a local bare repository;
nothing written), 1 anything unexpected (one line on stderr).

The parts: :mod:`.cli` (options and ``main``), :mod:`.agent` (the session and its steps),
:mod:`.handover` (Stop, the hand-over, waking after a fence), :mod:`.hooks` (the hook
driver), :mod:`.answers` (reading an answer's fields), :mod:`.control` (the onstation CLI,
the heartbeat, this body's standing in the ledger), :mod:`.transcript` (the transcript
writer), :mod:`.workspace` (scratch repositories and push targets), :mod:`.common` and
:mod:`.options`.
"""

from __future__ import annotations

from onstation.harness.fake_agent.agent import Done, FakeAgent
from onstation.harness.fake_agent.answers import HandlerAnswer, HookReply
from onstation.harness.fake_agent.cli import build_parser, main, parse_args
from onstation.harness.fake_agent.common import (
    EXIT_BAD_INPUT,
    EXIT_BLOCKED,
    EXIT_CONFLICT,
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_OK,
    PROG,
    AgentDenied,
    AgentError,
    AgentRefused,
    Log,
    onstation_argv,
)
from onstation.harness.fake_agent.control import CLI, Heartbeat
from onstation.harness.fake_agent.hooks import Hooks
from onstation.harness.fake_agent.options import MODEL_1M, MODEL_200K, WINDOWS, Options
from onstation.harness.fake_agent.transcript import CLAUDE_VERSION, Transcript
from onstation.harness.fake_agent.workspace import (
    SCRATCH_FLAG,
    SCRATCH_MARKER,
    is_scratch_workspace,
    local_bare_repository,
    mark_scratch_workspace,
    push_refusal,
)

__all__ = [
    "CLAUDE_VERSION",
    "CLI",
    "EXIT_BAD_INPUT",
    "EXIT_BLOCKED",
    "EXIT_CONFLICT",
    "EXIT_DENIED",
    "EXIT_ERROR",
    "EXIT_OK",
    "MODEL_1M",
    "MODEL_200K",
    "PROG",
    "SCRATCH_FLAG",
    "SCRATCH_MARKER",
    "WINDOWS",
    "AgentDenied",
    "AgentError",
    "AgentRefused",
    "Done",
    "FakeAgent",
    "HandlerAnswer",
    "Heartbeat",
    "HookReply",
    "Hooks",
    "Log",
    "Options",
    "Transcript",
    "build_parser",
    "is_scratch_workspace",
    "local_bare_repository",
    "main",
    "mark_scratch_workspace",
    "onstation_argv",
    "parse_args",
    "push_refusal",
]
