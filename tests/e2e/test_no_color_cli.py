"""``NO_COLOR`` and ``TERM=dumb``: the CLI writes no ANSI escape and redraws no line.

The commands run as subprocesses on a pseudo-terminal, where they would style text and
redraw their progress line; a control run without ``NO_COLOR`` shows that the escapes are
there to be removed, so the plain runs prove something."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from onstation.harness.fake_agent import mark_scratch_workspace

ONSTATION = str(Path(sys.executable).with_name("onstation"))
STUB = str(Path(__file__).with_name("successor_stub.py"))
GIT = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T",
       "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip
# A carriage return not followed by a newline: a line redrawn in place (a terminal turns each
# newline into CR LF, which is not a redraw).
REDRAW = re.compile(rb"\r(?!\n)")


def _env(base: dict[str, str], **settings: str | None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in ("NO_COLOR", "TERM")}
    env.update({k: v for k, v in settings.items() if v is not None})
    return env


def run_on_terminal(argv: list[str], env: dict[str, str], timeout: float = 120) -> bytes:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal; everything it wrote."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                              env=env, timeout=timeout, check=False)  # fmt: skip
    finally:
        os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks)


@pytest.fixture
def private_dir(tmp_path: Path) -> Path:
    tmp_path.chmod(0o700)  # the ledger refuses a directory others can write to
    return tmp_path


def _tour(env: dict[str, str], where: Path, name: str) -> bytes:
    return run_on_terminal([ONSTATION, "tour", "--db", str(where / f"{name}.db")], env)


def test_tour_is_styled_on_a_colour_terminal(private_dir: Path) -> None:
    out = _tour(_env(dict(os.environ), TERM="xterm-256color"), private_dir, "colour")
    assert b"\x1b[1m== 1. Birth" in out  # the control: escapes are written when allowed


@pytest.mark.parametrize(
    "settings",
    [
        {"NO_COLOR": "1", "TERM": "xterm-256color"},
        {"NO_COLOR": "yes please", "TERM": "xterm-256color"},
        {"TERM": "dumb"},
        {"NO_COLOR": "1", "TERM": "dumb"},
    ],
)
def test_tour_is_plain_with_no_color_or_a_dumb_terminal(
    private_dir: Path, settings: dict[str, str]
) -> None:
    out = _tour(_env(dict(os.environ), **settings), private_dir, "plain")
    assert b"== 1. Birth" in out
    assert b"\x1b" not in out
    assert REDRAW.search(out) is None


def test_an_empty_no_color_does_not_count(private_dir: Path) -> None:
    out = _tour(_env(dict(os.environ), NO_COLOR="", TERM="xterm"), private_dir, "empty")
    assert b"\x1b[1m" in out


def test_no_escape_in_captured_output(private_dir: Path) -> None:
    env = _env(dict(os.environ), NO_COLOR="1", TERM="dumb")
    done = subprocess.run([ONSTATION, "tour", "--db", str(private_dir / "pipe.db")],
                          capture_output=True, env=env, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout and b"\x1b" not in done.stderr
    help_text = subprocess.run([ONSTATION, "--help"], capture_output=True, env=env, timeout=60,
                               check=False)  # fmt: skip
    assert b"\x1b" not in help_text.stdout + help_text.stderr


@pytest.fixture
def team(private_dir: Path) -> dict[str, Any]:
    """A workspace where a Claude Code body of exec-1 is at work (as in test_relief.py)."""
    app = private_dir / "app"
    app.mkdir()
    for argv in (["git", "init", "-q", "-b", "main"],
                 ["git", "commit", "-q", "--allow-empty", "-m", "init"]):  # fmt: skip
        subprocess.run(argv, cwd=app, check=True, env={**os.environ, **GIT})
    mark_scratch_workspace(app)
    env = {**os.environ, **GIT, "ONSTATION_DB": str(private_dir / "ledger.db"),
           "ONSTATION_KEYS_DIR": str(private_dir / "keys")}  # fmt: skip
    for args in (["install", "claude-code", "--project", str(app), "--node", "exec-1"],
                 ["episode", "open", "exec-1", "--objective", "build the login"]):  # fmt: skip
        done = subprocess.run([ONSTATION, *args], capture_output=True, text=True, env=env,
                              timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    payload = json.dumps({"session_id": "pred", "cwd": str(app),
                          "hook_event_name": "SessionStart", "source": "startup"})  # fmt: skip
    subprocess.run([ONSTATION, "hook", "claude-code", "SessionStart"], input=payload, text=True,
                   env=env, check=True, capture_output=True)  # fmt: skip
    return {"env": env}


def _relieve(team: dict[str, Any], **settings: str | None) -> bytes:
    argv = [ONSTATION, "relieve", "exec-1", "--harness", "command", "--execution-class", "fake",
            "--command", f"{sys.executable} {STUB} ok {ONSTATION}", "--brief-wait", "0",
            "--challenge-wait", "30", "--shutdown-wait", "0.5"]  # fmt: skip
    return run_on_terminal(argv, _env(team["env"], **settings))


@pytest.mark.slow
def test_relief_progress_is_redrawn_on_a_colour_terminal(team: dict[str, Any]) -> None:
    out = _relieve(team, TERM="xterm-256color")
    assert b"\r\x1b[2K    waiting for " in out  # the control: the live line is drawn


@pytest.mark.slow
def test_relief_progress_is_plain_lines_with_no_color(team: dict[str, Any]) -> None:
    out = _relieve(team, NO_COLOR="1", TERM="xterm")  # TERM=dumb takes the same path (tour)
    assert b"\x1b" not in out
    assert REDRAW.search(out) is None
    assert b"    waiting for " in out  # one plain line per wait instead
    assert b"SETTLED" in out
