"""The fake agent's command line: its argument parser and ``main(argv) -> exit code``.

Shared by ``onstation fake-agent`` (which hands its arguments over unparsed) and
``python -m onstation.harness.fake_agent``, so both behave the same.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import uuid
from pathlib import Path
from typing import NoReturn

from onstation.core.errors import BadInput
from onstation.harness.fake_agent.agent import FakeAgent
from onstation.harness.fake_agent.common import (
    EXIT_BAD_INPUT,
    EXIT_DENIED,
    EXIT_ERROR,
    PROG,
    AgentDenied,
)
from onstation.harness.fake_agent.options import WINDOWS, Options
from onstation.harness.fake_agent.workspace import SCRATCH_FLAG


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _positive(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _non_negative(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative (got {value})")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (got {text})")
    return value


def _window(text: str) -> int:
    value = _int(text)
    if value not in WINDOWS:
        raise argparse.ArgumentTypeError("must be 200000 or 1000000 (the real windows)")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but bad input is one line naming the option (exit 2), not the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{PROG}: bad input: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (shared by ``main`` and ``onstation fake-agent``)."""
    p = _Parser(
        prog=PROG,
        description="A fake Claude Code session for demos and end-to-end tests: real git, "
        "real hook calls, a transcript with growing usage; no model provider.",
        epilog="Exit codes: 0 done or relieved, 2 bad input, 3 denied (fenced, or never made "
        "RUNNING), 4 blocked (not a scratch workspace, or a push target that is not a bare "
        "repository on this machine; nothing written), 1 anything else.",
    )
    p.add_argument(
        "--workspace",
        required=True,
        type=Path,
        metavar="DIR",
        help="A git repository bound to the node (onstation install claude-code).",
    )
    p.add_argument(
        SCRATCH_FLAG,
        action="store_true",
        help="The workspace is a throwaway repository: commit and push in it although it "
        "carries no scratch marker. Pushes still go only to a bare repository on this machine.",
    )
    p.add_argument(
        "--node",
        default=None,
        help="Identity (default: ONSTATION_NODE, else the workspace's config).",
    )
    p.add_argument(
        "--session-id",
        default=None,
        help="Session id (default: ONSTATION_SESSION_ID, else a fresh uuid4).",
    )
    p.add_argument("--steps", type=_positive, default=12, help="Steps of work (default 12).")
    p.add_argument(
        "--tokens-per-step",
        type=_non_negative,
        default=8000,
        metavar="K",
        help="Context each step adds (default 8000).",
    )
    p.add_argument(
        "--start-tokens",
        type=_non_negative,
        default=15000,
        metavar="T",
        help="Context before the first step (default 15000).",
    )
    p.add_argument(
        "--window",
        type=_window,
        default=200_000,
        metavar="W",
        help="Model window, 200000 or 1000000 (written as the model id).",
    )
    p.add_argument(
        "--push-every",
        type=_non_negative,
        default=4,
        metavar="N",
        help="Push to origin every N steps and after the last (0: never).",
    )
    p.add_argument("--db", default=None, metavar="URL", help="Ledger (default: ONSTATION_DB).")
    p.add_argument(
        "--crash-at",
        type=_positive,
        default=None,
        metavar="STEP",
        help="SIGKILL itself at the start of STEP.",
    )
    p.add_argument(
        "--crash-after-dispatch",
        type=_positive,
        default=None,
        metavar="STEP",
        help="At STEP's push: PreToolUse, run git push, SIGKILL before PostToolUse.",
    )
    p.add_argument(
        "--hang-at",
        type=_positive,
        default=None,
        metavar="STEP",
        help="Stop heartbeating and sleep forever at the start of STEP.",
    )
    p.add_argument(
        "--wake-after-fence",
        type=_positive,
        nargs="?",
        const=1,
        default=None,
        metavar="STEP",
        help="After STEP (default 1), sleep until the ledger fences "
        "this generation, then try to commit, push and message (all must be denied).",
    )
    p.add_argument(
        "--fence-wait",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="Longest wait for the fence in wake mode (default 600).",
    )
    p.add_argument(
        "--heartbeat",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="Renew the lease every SECONDS, each renewal for three beats and at least 30 s "
        "(default 1 when launched with ONSTATION_GENERATION; else off).",
    )
    p.add_argument(
        "--log", type=Path, default=None, metavar="FILE", help="JSON lines of what it did."
    )
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        metavar="FILE",
        help="Transcript JSONL (default: the challenge's transcript_sink when launched, "
        "else WORKSPACE/../SESSION.jsonl).",
    )
    p.add_argument("--prompt", default=None, help="The user prompt it starts with.")
    p.add_argument(
        "--step-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="Think for S seconds per step, spread over its API calls (before each, as a "
        "model's response takes time); the heartbeat goes on meanwhile.",
    )
    p.add_argument(
        "--coordinator",
        default=None,
        metavar="L3:PUN",
        help="Act as coordinator coord-L3-PUN: at Red, write a continuation manifest, tell "
        "the spawner (respawn_triggered) and stop, instead of writing a turnover brief.",
    )
    return p


def parse_args(argv: list[str]) -> Options:
    """Parse ``argv``; argparse exits 2 on bad input."""
    ns = build_parser().parse_args(argv)
    return Options(
        workspace=ns.workspace,
        node=ns.node,
        session_id=ns.session_id or os.environ.get("ONSTATION_SESSION_ID") or str(uuid.uuid4()),
        steps=ns.steps,
        tokens_per_step=ns.tokens_per_step,
        start_tokens=ns.start_tokens,
        window=ns.window,
        push_every=ns.push_every,
        db=ns.db,
        crash_at=ns.crash_at,
        crash_after_dispatch=ns.crash_after_dispatch,
        hang_at=ns.hang_at,
        wake_after_fence=ns.wake_after_fence,
        fence_wait=ns.fence_wait,
        heartbeat=ns.heartbeat,
        log=ns.log,
        transcript=ns.transcript,
        prompt=ns.prompt,
        coordinator=ns.coordinator,
        step_seconds=max(0.0, ns.step_seconds),
        scratch_workspace=ns.scratch_workspace,
    )


def main(argv: list[str]) -> int:
    """Run the fake agent; returns the exit code."""
    try:
        options = parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad input (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        return FakeAgent(options).run()
    except AgentDenied as exc:
        sys.stderr.write(f"{PROG}: denied: {exc}\n")
        return EXIT_DENIED
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        kind = "bad input" if isinstance(exc, BadInput) else "error"
        sys.stderr.write(f"{PROG}: {kind}: {str(message).replace(chr(10), ' ')}\n")
        return EXIT_BAD_INPUT if kind == "bad input" else EXIT_ERROR
