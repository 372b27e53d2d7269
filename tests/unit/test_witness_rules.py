"""Pure parts of issue 12: the start clock of a witness, the exec rule, the host picker."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.harness import witness as witness_mod
from onstation.harness.witness import (
    CLOCK_EPOCH_US,
    CLOCK_TICKS,
    HOOK_WRAPPERS,
    MATCH,
    MISMATCH,
    UNKNOWN,
    ProcessWitness,
    WitnessCheck,
    follow_exec,
    is_hook_wrapper,
    parse_stat_parent,
    pick_host,
)


def witness(**changes: object) -> ProcessWitness:
    fields: dict[str, object] = {
        "host": "h1",
        "boot_id": "f7f505ca-d2f2-45a8-8a7a-a630f2805f69",
        "pid": 4242,
        "start_ticks": 253812,
        "executable": "/bin/dash",
        "nonce": "launch-1",
        "observed_at": "2026-01-01T12:00:00Z",
    }
    fields.update(changes)
    return ProcessWitness(**fields)  # type: ignore[arg-type]


# --- the start clock ---------------------------------------------------------------------


def test_a_ticks_witness_stores_as_before() -> None:
    w = witness()
    assert w.start_clock == CLOCK_TICKS
    assert "start_clock" not in w.to_json()
    # Exactly the keys of a witness stored before issue 12.
    assert set(w.to_json()) == {"v", "host", "boot_id", "pid", "start_ticks", "executable",
                                "nonce", "observed_at"}  # fmt: skip


def test_an_old_witness_loads_as_a_ticks_witness() -> None:
    old = {"v": 1, "host": "h1", "boot_id": "b", "pid": 7, "start_ticks": 9, "nonce": "n",
           "executable": "/usr/bin/python3", "observed_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    loaded = ProcessWitness.from_json(json.dumps(old))
    assert loaded.start_clock == CLOCK_TICKS and loaded.marker is None
    assert loaded.to_json() == old


def test_an_epoch_witness_round_trips_with_its_clock() -> None:
    w = witness(start_clock=CLOCK_EPOCH_US, start_ticks=1_767_268_800_123_456,
                boot_id="boottime:1767260000", marker="m")  # fmt: skip
    data = w.to_json()
    assert data["start_clock"] == CLOCK_EPOCH_US
    assert ProcessWitness.from_json(json.dumps(data)) == w
    assert w != w.replace(start_clock=CLOCK_TICKS)  # the clock is part of the identity


@pytest.mark.parametrize("clock", ["", "seconds", None, 3])
def test_an_unknown_clock_is_rejected(clock: object) -> None:
    with pytest.raises(BadInput, match="start_clock"):
        witness(start_clock=clock)


# --- the check record --------------------------------------------------------------------


def test_a_match_can_name_the_executable() -> None:
    ok = WitnessCheck(MATCH, "fine", executable="/bin/sleep")
    assert WitnessCheck.from_json(ok.to_json()) == ok
    assert ok != WitnessCheck(MATCH, "fine")
    assert "executable" not in WitnessCheck(MATCH, "fine").to_json()
    assert "executable='/bin/sleep'" in repr(ok)
    with pytest.raises(BadInput, match="executable"):
        WitnessCheck(MISMATCH, "x", executable="/bin/sleep")
    with pytest.raises(BadInput, match="executable"):
        WitnessCheck(MATCH, "x", executable="")


def test_follow_exec_records_the_new_executable_only_for_a_match() -> None:
    w = witness()
    execd = WitnessCheck(MATCH, "exec'd", executable="/bin/sleep")
    assert follow_exec(w, execd) == w.replace(executable="/bin/sleep")
    assert follow_exec(w, WitnessCheck(MATCH, "same", executable="/bin/dash")) is w
    assert follow_exec(w, WitnessCheck(MATCH, "unread")) is w
    assert follow_exec(w, WitnessCheck(MISMATCH, "other")) is w


# --- the exec rule, on fabricated snapshots ----------------------------------------------


def snapshot(
    exe: str | None = "/bin/sleep",
    marker: str | None = None,
    marker_error: str | None = None,
    start: int | None = 253812,
    state: str = "S",
) -> witness_mod._Snapshot:
    return witness_mod._Snapshot(state, start, exe, marker, marker_error)


def compare(expected: ProcessWitness, seen: witness_mod._Snapshot) -> WitnessCheck:
    return witness_mod._compare(expected, seen, witness_mod._reader(witness_mod.PROC_READER))


def test_an_exec_with_the_marker_is_the_same_process() -> None:
    result = compare(witness(marker="m"), snapshot(marker="m"))
    assert result.state == MATCH, result.reason
    assert "exec'd from '/bin/dash' to '/bin/sleep'" in result.reason
    assert result.executable == "/bin/sleep"


def test_an_exec_without_a_recorded_marker_is_still_mismatch() -> None:
    # The process carries a marker, but the witness recorded none: nothing vouches.
    for seen in (snapshot(), snapshot(marker="m")):
        result = compare(witness(), seen)
        assert result.state == MISMATCH and result.executable is None, result.reason


@pytest.mark.parametrize(
    ("seen", "state"),
    [
        (snapshot(marker="other"), MISMATCH),  # another launch's process
        (snapshot(marker=None), MISMATCH),  # a process without any marker
        (snapshot(marker_error="Permission denied"), UNKNOWN),  # cannot tell an exec
        (snapshot(exe=None, marker="m"), UNKNOWN),  # the new executable is unreadable
        (snapshot(marker="m", start=253813), MISMATCH),  # another start time: pid reused
    ],
)
def test_an_exec_needs_every_other_fact(seen: witness_mod._Snapshot, state: str) -> None:
    result = compare(witness(marker="m"), seen)
    assert result.state == state, result.reason


def test_an_unchanged_executable_names_it_and_a_deleted_one_is_the_same() -> None:
    result = compare(witness(marker="m"), snapshot(exe="/bin/dash (deleted)", marker="m"))
    assert result.state == MATCH and "exec" not in result.reason
    assert result.executable == "/bin/dash"


# --- the host picker ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chain", "host"),
    [
        ([(100, "node")], 100),
        ([(101, "sh"), (100, "claude")], 100),
        ([(102, "bash"), (101, "env"), (100, "codex")], 100),
        ([(103, "dash"), (102, "timeout"), (101, "zsh"), (100, "python3")], 100),
        ([(104, "-bash"), (100, "node")], 100),  # a login shell
        ([(105, "/usr/bin/fish"), (100, "fake_agent.py")], 100),  # an executable path
        ([(106, "onstation"), (105, "sh"), (100, "node")], 100),  # a console-script process
        ([(101, "sh"), (1, "systemd")], None),  # orphaned: init adopted the shell
        ([(101, "sh"), (1, "node")], None),  # pid 1 is never the host, whatever its name
        ([(101, "sh"), (0, "kernel")], None),
        ([(101, "sh"), (100, None)], None),  # unreadable: cannot tell a shell
        ([(101, "sh"), (100, "bash")], None),  # the chain ran out
        ([], None),
        ([(100, "bashful")], 100),  # only exact names are wrappers
    ],
)
def test_pick_host_table(chain: list[tuple[int, str | None]], host: int | None) -> None:
    assert pick_host(chain) == host


def test_pick_host_stops_reading_at_the_host() -> None:
    read: list[int] = []

    def lazy() -> object:
        for pid, name in [(3, "sh"), (2, "node"), (1, "init")]:
            read.append(pid)
            yield pid, name

    assert pick_host(lazy()) == 2  # type: ignore[arg-type]
    assert read == [3, 2]


names = st.one_of(st.sampled_from(sorted(HOOK_WRAPPERS)), st.text(min_size=1, max_size=20))


@given(st.lists(st.tuples(st.integers(min_value=2, max_value=2**22), names), max_size=12))
def test_pick_host_is_the_first_non_wrapper(chain: list[tuple[int, str]]) -> None:
    expected = next((pid for pid, name in chain if not is_hook_wrapper(name)), None)
    picked = pick_host(chain)
    assert picked == expected
    # Everything walked past before the host is a wrapper.
    before = chain if picked is None else chain[: [p for p, _ in chain].index(picked)]
    assert all(is_hook_wrapper(name) for _, name in before)


@given(
    st.sampled_from(sorted(HOOK_WRAPPERS)), st.sampled_from(["", "-", "/bin/", "/usr/local/bin/"])
)
def test_every_wrapper_is_recognized_by_name_or_path(name: str, prefix: str) -> None:
    assert is_hook_wrapper(prefix + name)
    assert not is_hook_wrapper(name + "x")


def test_parse_stat_parent() -> None:
    line = "31399 (a) b)) S 31394 31394 30064 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 253812"
    assert parse_stat_parent(line) == (31394, "a) b)")
    for bad in ("", "1 cat S 2", "1 (cat) S", "1 (cat) S x"):
        with pytest.raises(ValueError, match="stat"):
            parse_stat_parent(bad)


def test_the_challenge_answer_stops_at_an_onstation_host() -> None:
    """A hook walks past onstation's own console script; the challenge answer does not:
    the fake agent (``onstation fake-agent``) runs it and is the successor itself."""
    from onstation.harness.witness import HOOK_WRAPPERS, SHELL_WRAPPERS, pick_host

    chain = [(30, "bash"), (20, "/venv/bin/onstation"), (10, "claude")]
    assert pick_host(chain) == 10
    assert pick_host(chain, SHELL_WRAPPERS) == 20
    assert HOOK_WRAPPERS - {"onstation"} == SHELL_WRAPPERS
