"""Pure parts of process witnesses: /proc/PID/stat parsing and the witness records."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.harness.witness import (
    GONE,
    MATCH,
    MISMATCH,
    UNKNOWN,
    ProcessWitness,
    WitnessCheck,
    parse_stat_start_ticks,
)

# A real line from /proc/self/stat (cat), start ticks 253812.
REAL_LINE = (
    "31399 (cat) R 31394 31394 30064 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 253812 3133440 "
    "416 18446744073709551615 94860323323904 94860323343785 140722030555088 0 0 0 0 0 0 0 0 0 "
    "17 1 0 0 0 0 0 94860323359792 94860323361408 94860914921472 140722030562010 "
    "140722030562030 140722030562030 140722030563307 0\n"
)


def stat_line(comm: str, ticks: int, *, pid: int = 1234, state: str = "S") -> str:
    """A stat line shaped like the kernel's: fields 3..21, then 22 = ticks, then the rest."""
    before = [state, "1", "1234", "1234", "0", "-1", "4194560", "100", "0", "0", "0"]
    before += ["3", "1", "0", "0", "20", "0", "1", "0"]  # fields 14..21
    assert len(before) == 19  # fields 3..21
    after = ["3133440", "416", "18446744073709551615"] + ["0"] * 28
    return f"{pid} ({comm}) " + " ".join([*before, str(ticks), *after]) + "\n"


def test_real_line() -> None:
    assert parse_stat_start_ticks(REAL_LINE) == 253812


@pytest.mark.parametrize(
    "comm",
    [
        "a) b)",  # the brief's example: 1234 (a) b)) S 1 ...
        "my proc",
        "",
        "(",
        ")",
        ") S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 99",  # a fake field list
        "tab\there",
        "new\nline",
        "((x))",
        "ünïcødé",
    ],
)
def test_comm_with_spaces_and_parentheses(comm: str) -> None:
    assert parse_stat_start_ticks(stat_line(comm, 987654)) == 987654


def test_brief_example_literal() -> None:
    line = "1234 (a) b)) S 1 1234 1234 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 1 0 4242 1 2 3"
    assert parse_stat_start_ticks(line) == 4242


@pytest.mark.parametrize(
    "line",
    [
        "",
        "1234 cat S 1 2",  # no parentheses at all
        "1234 (cat S 1 2 3",  # unterminated comm
        "1234 (cat) S 1 2 3",  # too few fields
        stat_line("cat", 1).replace(" 0 1 0 1 ", " 0 1 0 x ", 1),  # non-numeric field 22
        "1234 (cat) " + " ".join(["1"] * 19) + " -5 1 2",  # negative ticks
        ") 1234 (cat " + " ".join(["1"] * 25),  # ")" before "("
    ],
)
def test_malformed_lines_raise_value_error(line: str) -> None:
    with pytest.raises(ValueError, match="stat"):
        parse_stat_start_ticks(line)


@given(
    comm=st.text(max_size=64),
    ticks=st.integers(min_value=0, max_value=2**64 - 1),
    pid=st.integers(min_value=1, max_value=2**22),
    state=st.sampled_from("RSDZTtXxIWP"),
)
def test_random_comm_never_breaks_field_22(comm: str, ticks: int, pid: int, state: str) -> None:
    assert parse_stat_start_ticks(stat_line(comm, ticks, pid=pid, state=state)) == ticks


@given(st.text(max_size=400))
def test_arbitrary_text_only_raises_value_error(text: str) -> None:
    try:
        ticks = parse_stat_start_ticks(text)
    except ValueError:
        return
    assert ticks >= 0


# --- records -----------------------------------------------------------------------------


def witness(**changes: object) -> ProcessWitness:
    fields: dict[str, object] = {
        "host": "h1",
        "boot_id": "f7f505ca-d2f2-45a8-8a7a-a630f2805f69",
        "pid": 4242,
        "start_ticks": 253812,
        "executable": "/usr/bin/python3",
        "nonce": "launch-1",
        "observed_at": "2026-01-01T12:00:00Z",
    }
    fields.update(changes)
    return ProcessWitness(**fields)  # type: ignore[arg-type]


def test_witness_json_round_trip() -> None:
    w = witness()
    assert ProcessWitness.from_json(w.to_json()) == w
    assert ProcessWitness.from_json(json.dumps(w.to_json())) == w
    assert hash(ProcessWitness.from_json(w.to_json())) == hash(w)
    assert ProcessWitness.from_json(witness(executable=None).to_json()).executable is None


def test_witness_marker_round_trip_and_old_witnesses_still_load() -> None:
    marked = witness(marker="c0ffee")
    assert marked.to_json()["marker"] == "c0ffee"
    assert ProcessWitness.from_json(json.dumps(marked.to_json())) == marked
    assert marked != witness()  # the marker is part of the identity
    # A witness stored before markers existed: no "marker" key, loads as an unmarked one.
    old = witness().to_json()
    assert "marker" not in old
    assert ProcessWitness.from_json(old).marker is None


def test_witness_is_immutable() -> None:
    w = witness()
    with pytest.raises(AttributeError):
        w.pid = 1
    assert w.replace(pid=7).pid == 7
    assert w.pid == 4242


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"pid": 0}, "pid"),
        ({"pid": -1}, "pid"),
        ({"pid": True}, "pid"),
        ({"pid": "42"}, "pid"),
        ({"start_ticks": -1}, "start_ticks"),
        ({"host": ""}, "host"),
        ({"boot_id": None}, "boot_id"),
        ({"nonce": ""}, "nonce"),
        ({"executable": ""}, "executable"),
        ({"observed_at": "yesterday"}, "observed_at"),
        ({"observed_at": "2026-01-01T12:00:00+02:00"}, "observed_at"),
        ({"observed_at": "2026-01-01T12:00:00"}, "observed_at"),
        ({"marker": ""}, "marker"),
        ({"marker": "a\0b"}, "marker"),
        ({"marker": 7}, "marker"),
    ],
)
def test_witness_rejects_bad_fields(changes: dict[str, object], field: str) -> None:
    with pytest.raises(BadInput, match=field):
        witness(**changes)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("{not json", "not JSON"),
        ("[]", "object"),
        ({"v": 2}, "version"),
        ({**witness().to_json(), "extra": 1}, "extra"),
        ({k: v for k, v in witness().to_json().items() if k != "nonce"}, "nonce"),
    ],
)
def test_witness_from_json_rejects(data: object, needle: str) -> None:
    with pytest.raises(BadInput, match=needle):
        ProcessWitness.from_json(data)  # type: ignore[arg-type]


def test_check_record() -> None:
    ok = WitnessCheck(MATCH, "fine", signalled=True)
    assert ok.alive and not ok.gone
    assert WitnessCheck.from_json(ok.to_json()) == ok
    assert WitnessCheck(GONE, "x").gone and WitnessCheck(MISMATCH, "x").gone
    unknown = WitnessCheck(UNKNOWN, "x")
    assert not unknown.gone and not unknown.alive
    with pytest.raises(BadInput):
        WitnessCheck("ALIVE", "x")
    with pytest.raises(BadInput):
        WitnessCheck(MISMATCH, "x", signalled=True)
    with pytest.raises(BadInput):
        WitnessCheck(MATCH, "two\nlines")
