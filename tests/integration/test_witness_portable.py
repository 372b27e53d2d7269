"""Issue 12 against real processes: the psutil reader (the code path of the platforms
without /proc, run on Linux with psutil's data), the exec rule, and the host of a hook.

Waits are bounded by generous timeouts only to avoid hanging; nothing asserts durations.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from onstation.harness import witness as witness_mod
from onstation.harness.witness import (
    CLOCK_EPOCH_US,
    CLOCK_TICKS,
    GONE,
    MARKER_ENV,
    MATCH,
    MISMATCH,
    PROC_READER,
    PSUTIL_READER,
    UNKNOWN,
    ProcessWitness,
    check,
    follow_exec,
    host_process,
    observe,
    signal_if_match,
    wait_gone,
)

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or witness_mod.read_boot_id() is None,
    reason="runs both readers, which needs Linux /proc",
)

NOW = "2026-01-01T12:00:00Z"
HANG = 30.0  # only a guard against hanging, never asserted
SLEEP = shutil.which("sleep") or "/bin/sleep"
BOTH = pytest.mark.parametrize("reader", [PROC_READER, PSUTIL_READER])


def _env(marker: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
    if marker is not None:
        env[MARKER_ENV] = marker
    return env


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    spawned: list[subprocess.Popen[bytes]] = []
    yield spawned
    for proc in spawned:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=HANG)


def sleeper(children: list[subprocess.Popen[bytes]], marker: str | None = None) -> int:
    proc = subprocess.Popen([SLEEP, "60"], env=_env(marker))
    children.append(proc)
    return proc.pid


def seen(pid: int, reader: str, **kw: str) -> ProcessWitness:
    w = observe(pid, nonce="n", observed_at=NOW, reader=reader, **kw)
    assert w is not None
    return w


def wait_for_exe(pid: int, name: str) -> None:
    deadline = time.monotonic() + HANG
    while os.path.basename(psutil.Process(pid).exe()) != name:
        assert time.monotonic() < deadline, f"pid {pid} never exec'd {name}"
        time.sleep(0.01)


# --- the psutil reader on real processes -------------------------------------------------


def test_psutil_witness_matches_a_live_process(children: list[subprocess.Popen[bytes]]) -> None:
    pid = sleeper(children, marker="m-1")
    w = seen(pid, PSUTIL_READER)
    assert w.start_clock == CLOCK_EPOCH_US
    assert w.boot_id == f"boottime:{round(psutil.boot_time())}"
    assert w.start_ticks == round(psutil.Process(pid).create_time() * 1_000_000)
    assert w.executable is not None and os.path.samefile(w.executable, SLEEP)
    assert w.marker == "m-1"
    result = check(w)
    assert result.state == MATCH, result.reason
    assert result.executable is not None and os.path.samefile(result.executable, SLEEP)
    stored = ProcessWitness.from_json(json.dumps(w.to_json()))
    assert stored == w and check(stored).state == MATCH


def test_the_proc_reader_stays_the_default_on_linux(
    children: list[subprocess.Popen[bytes]],
) -> None:
    assert witness_mod.DEFAULT_READER == PROC_READER
    pid = sleeper(children)
    w = observe(pid, nonce="n", observed_at=NOW)
    assert w is not None and w.start_clock == CLOCK_TICKS
    assert w.boot_id == witness_mod.read_boot_id()


def test_psutil_is_imported_only_when_its_reader_is_used() -> None:
    code = textwrap.dedent(
        f"""
        import os, sys
        from onstation.harness import witness
        w = witness.observe(os.getpid(), nonce="n", observed_at={NOW!r})
        assert witness.check(w).state == "MATCH"
        assert "psutil" not in sys.modules, "the proc path imported psutil"
        w = witness.observe(os.getpid(), nonce="n", observed_at={NOW!r}, reader="psutil")
        assert witness.check(w).state == "MATCH"
        assert "psutil" in sys.modules
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=HANG, check=False)  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_psutil_witness_of_a_killed_process_is_gone(
    children: list[subprocess.Popen[bytes]],
) -> None:
    pid = sleeper(children)
    w = seen(pid, PSUTIL_READER)
    os.kill(pid, signal.SIGKILL)  # our child: a zombie until reaped
    assert wait_gone(w, timeout_s=HANG)
    assert check(w).state == GONE
    assert observe(pid, nonce="n", observed_at=NOW, reader=PSUTIL_READER) is None
    children[-1].wait(timeout=HANG)
    result = check(w)
    assert result.state == GONE, result.reason
    sent = signal_if_match(w, signal.SIGKILL)
    assert sent.state == GONE and not sent.signalled


def test_psutil_another_process_at_the_pid_is_mismatch_and_not_signalled(
    children: list[subprocess.Popen[bytes]],
) -> None:
    pid = sleeper(children)
    w = seen(pid, PSUTIL_READER)
    # The witness of a process that held this pid one microsecond earlier.
    other = w.replace(start_ticks=w.start_ticks - 1)
    result = check(other)
    assert result.state == MISMATCH and result.gone, result.reason
    for sig in (signal.SIGTERM, signal.SIGKILL):
        sent = signal_if_match(other, sig)
        assert sent.state == MISMATCH and not sent.signalled
    assert children[-1].poll() is None  # nothing reached it
    assert check(w.replace(marker="another-launch")).state == MISMATCH


def test_psutil_signal_reaches_the_matching_process(
    children: list[subprocess.Popen[bytes]],
) -> None:
    pid = sleeper(children, marker="m-2")
    w = seen(pid, PSUTIL_READER)
    sent = signal_if_match(w, signal.SIGTERM)
    assert sent.state == MATCH and sent.signalled, sent.reason
    assert "no pidfd" in sent.reason
    assert children[-1].wait(timeout=HANG) == -signal.SIGTERM


def test_psutil_other_boot_or_unreadable_is_unknown(
    children: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = sleeper(children, marker="m-3")
    w = seen(pid, PSUTIL_READER)
    assert check(w.replace(boot_id="boottime:1")).state == UNKNOWN
    reader = witness_mod._reader(PSUTIL_READER)

    def denied(proc: object) -> str | None:
        raise psutil.AccessDenied(pid)

    monkeypatch.setattr(reader, "_marker", denied)
    result = check(w)
    assert result.state == UNKNOWN, result.reason
    assert not signal_if_match(w, signal.SIGKILL).signalled
    unmarked = observe(pid, nonce="n", observed_at=NOW, reader=PSUTIL_READER)
    assert unmarked is not None and unmarked.marker is None  # weaker, as with /proc
    monkeypatch.undo()
    monkeypatch.setattr(reader, "boot_id", lambda: None)
    assert check(w).state == UNKNOWN
    with pytest.raises(OSError, match="boot id"):
        observe(pid, nonce="n", observed_at=NOW, reader=PSUTIL_READER)
    monkeypatch.undo()
    assert children[-1].poll() is None


def test_a_proc_witness_is_never_read_by_psutil(children: list[subprocess.Popen[bytes]]) -> None:
    """Each witness is checked by the reader that made it; the clocks never mix."""
    pid = sleeper(children)
    by_proc, by_psutil = seen(pid, PROC_READER), seen(pid, PSUTIL_READER)
    assert by_proc.start_ticks != by_psutil.start_ticks
    assert check(by_proc).state == MATCH and check(by_psutil).state == MATCH
    # A witness whose boot id is from the other reader: never a match, never "gone".
    assert check(by_proc.replace(boot_id=by_psutil.boot_id)).state == UNKNOWN
    assert check(by_psutil.replace(boot_id=by_proc.boot_id)).state == UNKNOWN


# --- the exec rule -----------------------------------------------------------------------


def wrapper(
    children: list[subprocess.Popen[bytes]], tmp_path: Path, marker: str | None
) -> tuple[int, Path]:
    """A shell script that waits for a file, then replaces itself with ``sleep``."""
    go = tmp_path / "go"
    script = tmp_path / "shim"
    script.write_text(f'#!/bin/sh\nwhile [ ! -e "{go}" ]; do sleep 0.01; done\nexec {SLEEP} 30\n')
    script.chmod(0o755)
    proc = subprocess.Popen([str(script)], env=_env(marker))
    children.append(proc)
    return proc.pid, go


@BOTH
def test_an_exec_by_the_witnessed_process_is_still_a_match(
    children: list[subprocess.Popen[bytes]], tmp_path: Path, reader: str
) -> None:
    pid, go = wrapper(children, tmp_path, marker="shim-launch")
    before = seen(pid, reader, marker="shim-launch")  # as the launcher records it
    assert before.executable is not None
    assert not os.path.samefile(before.executable, SLEEP)  # still the shell
    assert check(before).state == MATCH
    go.touch()
    wait_for_exe(pid, os.path.basename(SLEEP))
    result = check(before)
    assert result.state == MATCH, result.reason
    assert "exec'd from" in result.reason and before.executable in result.reason
    assert result.executable is not None and os.path.samefile(result.executable, SLEEP)
    after = follow_exec(before, result)
    assert after.executable == result.executable and after.marker == before.marker
    plain = check(after)
    assert plain.state == MATCH and "exec'd" not in plain.reason
    # A witness that recorded another launch's marker is still not this process.
    assert check(before.replace(marker="another-launch")).state == MISMATCH
    sent = signal_if_match(before, signal.SIGTERM)
    assert sent.signalled, sent.reason
    assert children[-1].wait(timeout=HANG) == -signal.SIGTERM


@BOTH
def test_an_exec_without_a_marker_is_still_mismatch(
    children: list[subprocess.Popen[bytes]], tmp_path: Path, reader: str
) -> None:
    pid, go = wrapper(children, tmp_path, marker=None)
    before = seen(pid, reader)
    assert before.marker is None
    go.touch()
    wait_for_exe(pid, os.path.basename(SLEEP))
    result = check(before)
    assert result.state == MISMATCH, result.reason
    assert not signal_if_match(before, signal.SIGTERM).signalled
    assert children[-1].poll() is None


# --- the host process of a hook ----------------------------------------------------------

HOOK = "from onstation.harness import witness; w = witness.host_process(reader={reader!r}); print(w.pid if w else None)"  # noqa: E501
# A fake agent: runs its hook command through a shell, as Claude Code and Codex do, and
# reports its own pid with what the hook said.
AGENT = textwrap.dedent(
    """
    import os, subprocess, sys
    out = subprocess.run(["sh", "-c", sys.argv[1]], capture_output=True, text=True, check=True)
    print(os.getpid(), out.stdout.strip())
    """
)


def run_agent(command: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", AGENT, command], capture_output=True,
                         text=True, timeout=HANG, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    agent, hook = out.stdout.split()
    return agent, hook


SHAPES = {
    "sh -c": "{hook}",  # the shell may exec straight into python
    "sh -c, forking": "true; {hook}",
    "wrappers": "env FOO=1 timeout 30 {hook}",
    "a shell in a shell": "sh -c {quoted_and_true}",
}


@BOTH
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_host_process_is_the_agent_that_runs_the_hook(reader: str, shape: str) -> None:
    hook = f"{shlex.quote(sys.executable)} -c {shlex.quote(HOOK.format(reader=reader))}"
    command = SHAPES[shape].format(hook=hook, quoted_and_true=shlex.quote(hook + "; true"))
    agent, reported = run_agent(command)
    assert reported == agent


@BOTH
def test_host_process_witnesses_the_host(reader: str) -> None:
    w = host_process(reader=reader)  # pytest's parent: whatever ran the test run
    me = psutil.Process(os.getpid())
    expected = next(
        (p.pid for p in me.parents() if not witness_mod.is_hook_wrapper(p.name())), None
    )
    if expected is None or expected <= 1:
        assert w is None
    else:
        assert w is not None and w.pid == expected and check(w).state == MATCH
        assert w.observed_at.endswith("Z") and w.nonce == "host-process"


@BOTH
def test_host_process_stops_at_init(reader: str) -> None:
    assert host_process(1, reader=reader) is None
    # A start pid that no process holds: nothing to walk.
    assert host_process(2**22 + 1, reader=reader) is None
