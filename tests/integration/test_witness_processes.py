"""Process witnesses against real child processes (goal G14: no signal to a reused pid).

Proof that nothing was sent uses a child that traps the catchable signals and, when its
stdin is closed, prints the signals it received and exits 0. Waits are bounded by generous
timeouts only to avoid hanging; nothing asserts how long anything took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from onstation.harness import process_table
from onstation.harness import witness as witness_mod
from onstation.harness.witness import (
    GONE,
    MATCH,
    MISMATCH,
    UNKNOWN,
    ProcessWitness,
    WitnessCheck,
    check,
    observe,
    read_boot_id,
    signal_if_match,
    wait_gone,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or read_boot_id() is None,
    reason="process witnesses need Linux /proc",
)

NOW = "2026-01-01T12:00:00Z"
HANG = 30.0  # only a guard against hanging, never asserted

SLEEPER = "import time; time.sleep(60)"
RECORDER = """
import signal, sys
got = []
for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda n, f: got.append(n))
print("ready", flush=True)
sys.stdin.read()
print("signals:" + ",".join(str(n) for n in got), flush=True)
"""

# Every signal signal_if_match is asked to send in the refusal tests; SIGKILL is included
# because a wrongly delivered one would show as a dead child.
REFUSED_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGKILL)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    spawned: list[subprocess.Popen[str]] = []
    yield spawned
    for proc in spawned:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=HANG)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def sleeper(children: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], text=True)
    children.append(proc)
    return proc


def recorder(children: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RECORDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    children.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"  # handlers installed
    return proc


def signals_received(proc: subprocess.Popen[str]) -> str:
    """Close the recorder's stdin; it exits 0 and reports what it caught."""
    assert proc.poll() is None, "the recorder died: a signal reached it"
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == 0
    line = out.strip().splitlines()[-1]
    assert line.startswith("signals:")
    return line.removeprefix("signals:")


def wait_past_tick(ticks: int) -> None:
    """Return once the boot clock (/proc/uptime) is past ``ticks`` clock ticks."""
    per_second = os.sysconf("SC_CLK_TCK")
    for _ in range(100_000):
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        if uptime * per_second > ticks + 2:
            return
        time.sleep(0.005)
    pytest.fail("the boot clock did not advance")


def witness_of(proc: subprocess.Popen[str], nonce: str = "launch-1") -> ProcessWitness:
    w = observe(proc.pid, nonce=nonce, observed_at=NOW)
    assert w is not None
    return w


def assert_nothing_sent(proc: subprocess.Popen[str], expected: ProcessWitness) -> None:
    for sig in REFUSED_SIGNALS:
        result = signal_if_match(expected, sig)
        assert result.state != MATCH and not result.signalled
    assert signals_received(proc) == ""


def test_observe_and_match(children: list[subprocess.Popen[str]]) -> None:
    proc = sleeper(children)
    w = witness_of(proc, nonce="abc")
    assert w.pid == proc.pid
    assert w.boot_id == read_boot_id()
    assert w.host == os.uname().nodename
    assert w.nonce == "abc" and w.observed_at == NOW
    assert w.executable is not None
    assert os.path.samefile(w.executable, sys.executable)
    result = check(w)
    assert result.state == MATCH, result.reason
    assert result.alive and not result.signalled
    assert check(ProcessWitness.from_json(w.to_json())).state == MATCH


def test_observe_self_matches_pure_parser() -> None:
    w = observe(os.getpid(), nonce="self", observed_at=NOW)
    assert w is not None
    with open(f"/proc/{os.getpid()}/stat", encoding="utf-8") as handle:
        assert witness_mod.parse_stat_start_ticks(handle.read()) == w.start_ticks
    assert check(w).state == MATCH


def test_killed_and_reaped_is_gone(children: list[subprocess.Popen[str]]) -> None:
    proc = sleeper(children)
    w = witness_of(proc)
    proc.kill()
    proc.wait(timeout=HANG)
    result = check(w)
    assert result.state == GONE, result.reason
    assert result.gone
    assert wait_gone(w, timeout_s=HANG)
    sent = signal_if_match(w, signal.SIGKILL)
    assert sent.state in (GONE, MISMATCH) and not sent.signalled


def test_zombie_is_gone_and_not_observed(children: list[subprocess.Popen[str]]) -> None:
    proc = sleeper(children)
    w = witness_of(proc)
    os.kill(proc.pid, signal.SIGKILL)  # our own child, pid held until we reap it
    assert wait_gone(w, timeout_s=HANG)  # exited but unreaped: a zombie is gone
    result = check(w)
    assert result.state == GONE and "exited" in result.reason
    assert observe(proc.pid, nonce="n", observed_at=NOW) is None
    assert not signal_if_match(w, signal.SIGTERM).signalled
    proc.wait(timeout=HANG)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("field", ["start_ticks", "executable"])
def test_wrong_witness_is_mismatch_and_sends_nothing(
    children: list[subprocess.Popen[str]], field: str
) -> None:
    proc = recorder(children)
    real = witness_of(proc)
    wrong = (
        real.replace(start_ticks=real.start_ticks + 1)
        if field == "start_ticks"
        else real.replace(executable="/usr/bin/not-the-witnessed-program")
    )
    result = check(wrong)
    assert result.state == MISMATCH, result.reason
    assert result.gone and not result.alive
    assert wait_gone(wrong, timeout_s=HANG)  # a mismatch is reported as gone
    assert_nothing_sent(proc, wrong)  # still alive, exits 0 having caught nothing


def test_signal_with_right_witness_terminates(children: list[subprocess.Popen[str]]) -> None:
    proc = sleeper(children)
    w = witness_of(proc)
    result = signal_if_match(w, signal.SIGTERM)
    assert result.state == MATCH and result.signalled, result.reason
    assert proc.wait(timeout=HANG) == -signal.SIGTERM
    assert check(w).state == GONE


def test_signal_delivered_is_the_one_asked_for(children: list[subprocess.Popen[str]]) -> None:
    proc = recorder(children)
    w = witness_of(proc)
    assert signal_if_match(w, signal.SIGUSR1).signalled
    assert signals_received(proc) == str(int(signal.SIGUSR1))


def test_wait_gone_sees_termination(children: list[subprocess.Popen[str]]) -> None:
    proc = sleeper(children)
    w = witness_of(proc)
    assert not wait_gone(w, timeout_s=0.0)  # alive: one check, no waiting
    assert signal_if_match(w, signal.SIGKILL).signalled
    assert wait_gone(w, timeout_s=HANG)
    proc.wait(timeout=HANG)


@pytest.mark.parametrize("field", ["host", "boot_id"])
def test_other_host_or_boot_is_unknown(children: list[subprocess.Popen[str]], field: str) -> None:
    proc = recorder(children)
    real = witness_of(proc)
    other = (
        real.replace(host=real.host + "-elsewhere")
        if field == "host"
        else real.replace(boot_id=str(uuid.uuid4()))
    )
    result = check(other)
    assert result.state == UNKNOWN, result.reason
    assert not result.gone and not result.alive
    assert not wait_gone(other, timeout_s=0.0)  # never assumed dead
    assert_nothing_sent(proc, other)


def test_g14_pid_reuse_simulation(children: list[subprocess.Popen[str]]) -> None:
    """Record a witness, let the body die, then face "same pid, different start time"."""
    old = sleeper(children)
    recorded = witness_of(old)
    old.kill()
    old.wait(timeout=HANG)
    assert check(recorded).state == GONE
    # Start ticks have a 10 ms resolution: a newcomer forked within the same tick would be
    # indistinguishable by start time, which is not the situation simulated here.
    wait_past_tick(recorded.start_ticks)

    # An unrelated process now holds the pid the witness names (crafted, not a real reuse):
    # the old body's start ticks and executable, the newcomer's pid.
    newcomer = recorder(children)
    now = witness_of(newcomer)
    reused = recorded.replace(pid=newcomer.pid)
    assert reused.start_ticks != now.start_ticks
    result = check(reused)
    assert result.state == MISMATCH, result.reason
    assert result.gone  # 100 % of mismatches reported as gone
    assert wait_gone(reused, timeout_s=HANG)
    assert_nothing_sent(newcomer, reused)  # 0 signals to the reused pid


def test_reuse_between_check_and_pidfd_open_is_caught(
    children: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first check is made to lie (as if the pid were recycled right after it)."""
    proc = recorder(children)
    stale = witness_of(proc).replace(start_ticks=1)
    real_check = witness_mod.check
    calls: list[str] = []

    def racy_check(expected: ProcessWitness) -> WitnessCheck:
        calls.append("check")
        if len(calls) == 1:
            return WitnessCheck(MATCH, "stale view before the pidfd was opened")
        return real_check(expected)

    monkeypatch.setattr(witness_mod, "check", racy_check)
    result = signal_if_match(stale, signal.SIGUSR1)
    monkeypatch.undo()
    assert len(calls) == 2  # re-checked after the pidfd was opened
    assert result.state == MISMATCH and not result.signalled
    assert signals_received(proc) == ""


def test_without_pidfd_refuses(
    children: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = recorder(children)
    w = witness_of(proc)
    monkeypatch.delattr(os, "pidfd_open")
    result = signal_if_match(w, signal.SIGUSR1)
    assert result.state == UNKNOWN and "pidfd" in result.reason and not result.signalled
    monkeypatch.undo()
    assert signals_received(proc) == ""


def test_kernel_without_pidfd_refuses(
    children: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = recorder(children)
    w = witness_of(proc)

    def enosys(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", enosys)
    result = signal_if_match(w, signal.SIGUSR1)
    monkeypatch.undo()
    assert result.state == UNKNOWN and not result.signalled
    assert signals_received(proc) == ""


def test_pidfd_reports_reaped_process(children: list[subprocess.Popen[str]]) -> None:
    proc = sleeper(children)
    pidfd = os.pidfd_open(proc.pid)
    try:
        assert witness_mod._pidfd_holds_pid(pidfd, proc.pid) is True
        proc.kill()
        proc.wait(timeout=HANG)
        assert witness_mod._pidfd_holds_pid(pidfd, proc.pid) in (False, None)
    finally:
        os.close(pidfd)


def test_hidden_proc_entry_is_unknown_not_gone(
    children: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """/proc mounted with hidepid hides a live process; pidfd_open still sees it."""
    proc = recorder(children)
    w = witness_of(proc)
    monkeypatch.setattr(process_table, "_read_proc", lambda pid, **kw: None)
    result = check(w)
    assert result.state == UNKNOWN, result.reason
    assert not signal_if_match(w, signal.SIGUSR1).signalled
    monkeypatch.undo()
    assert signals_received(proc) == ""


def test_unreadable_proc_is_unknown(
    children: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = recorder(children)
    w = witness_of(proc)
    monkeypatch.setattr(process_table, "BOOT_ID_PATH", "/nonexistent/boot_id")
    assert check(w).state == UNKNOWN
    assert not signal_if_match(w, signal.SIGKILL).signalled
    with pytest.raises(OSError, match="boot id"):
        observe(proc.pid, nonce="n", observed_at=NOW)
    monkeypatch.undo()

    def denied(pid: int, **kw: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(process_table, "_read_proc", denied)
    assert check(w).state == UNKNOWN
    monkeypatch.undo()
    assert signals_received(proc) == ""


def test_pidfd_reaped_during_check_sends_nothing(
    children: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the pidfd says its process no longer holds the pid, nothing is sent."""
    proc = recorder(children)
    w = witness_of(proc)
    monkeypatch.setattr(witness_mod, "_pidfd_holds_pid", lambda fd, pid: False)
    result = signal_if_match(w, signal.SIGUSR1)
    monkeypatch.undo()
    assert result.state == GONE and not result.signalled
    assert signals_received(proc) == ""
