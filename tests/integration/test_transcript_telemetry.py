"""Transcript and Codex rollout telemetry on real files: incremental, bounded, tolerant."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.harness import codex, transcript
from onstation.harness.transcript import (
    ANCHOR_BYTES,
    DEFAULT_TAIL_BYTES,
    MAX_SCAN_BYTES,
    TranscriptCursor,
    read_fill,
)

# --- fixtures from harness-formats.md (sections 3.2 and 5.2), "…" filled in ---------------

SAMPLE_ASSISTANT = (
    '{"parentUuid":"83a7cabd-0000","isSidechain":false,"userType":"external",'
    '"cwd":"e:\\\\Workspace\\\\src\\\\github\\\\claude-code-log",'
    '"sessionId":"88a8d761-0000","version":"2.0.46","uuid":"91c82c1c-0000",'
    '"timestamp":"2025-11-19T22:55:40.790Z","type":"assistant",'
    '"message":{"id":"msg_011b5A5rZCXR7eBYR4VbohVZ","type":"message","role":"assistant",'
    '"model":"claude-sonnet-4-5-20250929",'
    '"content":[{"type":"text","text":"Excellent research! ..."}],"stop_reason":"tool_use",'
    '"stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":2952,'
    '"cache_read_input_tokens":141272,"output_tokens":190,"service_tier":"standard",'
    '"server_tool_use":null}},"requestId":"req_011CVJ5Au8m6JgC6Ly7SbVPv"}'
)
SAMPLE_ASSISTANT_TOKENS = 3 + 2952 + 141272

SAMPLE_BOUNDARY = (
    '{"type":"system","subtype":"compact_boundary","parentUuid":null,"logicalParentUuid":"b2a2",'
    '"isSidechain":false,"sessionId":"s1","version":"2.1.0","uuid":"cb",'
    '"content":"Conversation compacted","level":"info",'
    '"compactMetadata":{"trigger":"auto","preTokens":150000}}'
)
SAMPLE_COMPACT_SUMMARY = (
    '{"type":"user","parentUuid":"cb","isSidechain":false,"uuid":"cs","isCompactSummary":true,'
    '"message":{"role":"user","content":[{"type":"text","text":"This session is being continued '
    'from a previous conversation that ran out of context. Summary: ..."}]}}'
)

CODEX_TOKEN_COUNT = (
    '{"timestamp":"2026-05-14T10:00:00.000Z","type":"event_msg","payload":{"type":"token_count",'
    '"info":{"model":"gpt-5.3-codex","last_token_usage":{"input_tokens":2500,'
    '"cached_input_tokens":500,"output_tokens":300,"reasoning_output_tokens":200,'
    '"total_tokens":3000},"total_token_usage":{"input_tokens":3500,"cached_input_tokens":750,'
    '"output_tokens":425,"reasoning_output_tokens":275,"total_tokens":4200}}}}'
)


def assistant(
    inp: int,
    cache_creation: int = 0,
    cache_read: int = 0,
    *,
    msg_id: str = "msg_1",
    request_id: str = "req_1",
    model: str = "claude-sonnet-4-5-20250929",
    **envelope: Any,
) -> str:
    line = {
        "parentUuid": "p",
        "isSidechain": False,
        "type": "assistant",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": inp,
                "cache_creation_input_tokens": cache_creation,
                "cache_read_input_tokens": cache_read,
                "output_tokens": 77,
            },
        },
        "requestId": request_id,
        **envelope,
    }
    return json.dumps(line)


def user(text: str = "hello") -> str:
    return json.dumps(
        {"type": "user", "isSidechain": False, "message": {"role": "user", "content": text}}
    )


def boundary(post_tokens: int | None = None, **envelope: Any) -> str:
    line = json.loads(SAMPLE_BOUNDARY)
    if post_tokens is not None:
        line["compactMetadata"]["postTokens"] = post_tokens
    line.update(envelope)
    return json.dumps(line)


def write(path: Path, *lines: str, end: str = "\n") -> None:
    path.write_text("\n".join(lines) + end, encoding="utf-8")


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


class ReadSpy:
    """Records every pread (offset, length) and every parsed line the readers make."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[tuple[int, int]] = []
        self.parsed: list[bytes] = []
        real_pread, real_loads = os.pread, transcript._loads

        def pread(fd: int, length: int, offset: int) -> bytes:
            self.reads.append((offset, length))
            return real_pread(fd, length, offset)

        def loads(line: bytes) -> Any:
            self.parsed.append(bytes(line))
            return real_loads(line)

        monkeypatch.setattr(transcript.os, "pread", pread)
        monkeypatch.setattr(transcript, "_loads", loads)

    def reset(self) -> None:
        self.reads.clear()
        self.parsed.clear()

    @property
    def lowest(self) -> int:
        return min(offset for offset, _ in self.reads)

    @property
    def total(self) -> int:
        return sum(length for _, length in self.reads)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> ReadSpy:
    return ReadSpy(monkeypatch)


# --- Claude Code transcript: what counts ----------------------------------------------------


def test_sample_line_gives_input_plus_cache(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, user(), SAMPLE_ASSISTANT)
    reading, cursor = read_fill(path)
    assert reading is not None
    assert reading.used_tokens == SAMPLE_ASSISTANT_TOKENS
    assert reading.window_tokens == 200_000
    assert reading.percent == pytest.approx(SAMPLE_ASSISTANT_TOKENS / 2000)
    assert reading.source == "transcript"
    assert reading.model == "claude-sonnet-4-5-20250929"
    assert cursor.offset == path.stat().st_size
    assert cursor.message_id == "msg_011b5A5rZCXR7eBYR4VbohVZ"
    assert cursor.request_id == "req_011CVJ5Au8m6JgC6Ly7SbVPv"


def test_last_usage_wins_never_a_sum(tmp_path: Path) -> None:
    # ccusage's test-transcript.jsonl expectation: last usage 2000/200/800 -> 3000 (1.5 %).
    path = tmp_path / "t.jsonl"
    write(path, user(), assistant(9000, 1, 1, msg_id="a"), user(), assistant(2000, 200, 800))
    reading, _ = read_fill(path)
    assert reading is not None
    assert reading.used_tokens == 3000
    assert reading.percent == 1.5


def test_sidechain_subagent_error_and_synthetic_lines_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(
        path,
        assistant(50_000, msg_id="main"),
        assistant(190_000, msg_id="side", isSidechain=True),
        assistant(180_000, msg_id="agent", agentId="a1b2"),
        assistant(170_000, msg_id="err", isApiErrorMessage=True),
        assistant(0, msg_id="synth", model="<synthetic>"),
        user('tool output mentioning "usage" and compact_boundary'),
        json.dumps({"type": "assistant", "message": {"id": "x", "usage": {"input_tokens": "9"}}}),
        json.dumps({"type": "assistant", "message": {"id": "y", "content": []}}),
        json.dumps({"type": "summary", "summary": "s", "leafUuid": "u"}),
        json.dumps([1, 2, 3]),
    )
    reading, cursor = read_fill(path)
    assert reading is not None
    assert reading.used_tokens == 50_000
    assert cursor.message_id == "main"


def test_streaming_duplicates_update_the_latest(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(
        path,
        assistant(100, 0, 40_000, msg_id="m1", request_id="r1"),
        assistant(10, 0, 50_000, msg_id="m2", request_id="r2"),
        assistant(10, 0, 50_000, msg_id="m2", request_id="r2"),
        assistant(12, 0, 50_000, msg_id="m2", request_id="r2"),
    )
    reading, cursor = read_fill(path)
    assert reading is not None and reading.used_tokens == 50_012
    append(path, assistant(12, 0, 50_000, msg_id="m2", request_id="r2") + "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 50_012
    assert (cursor.message_id, cursor.request_id) == ("m2", "r2")


def test_compaction_without_post_tokens_gives_no_reading_until_next_usage(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(150_000), SAMPLE_BOUNDARY, SAMPLE_COMPACT_SUMMARY)
    reading, cursor = read_fill(path)
    assert reading is None
    assert cursor.compacted and cursor.usage_tokens is None
    append(path, user() + "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is None
    append(path, assistant(20_000, 5_000, msg_id="after") + "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 25_000
    assert reading.source == "transcript" and not cursor.compacted


def test_compaction_with_post_tokens(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(150_000), boundary(post_tokens=12_345), SAMPLE_COMPACT_SUMMARY)
    reading, cursor = read_fill(path)
    assert reading is not None
    assert reading.source == "transcript.post_compaction"
    assert reading.used_tokens == 12_345
    # Incrementally, too: the boundary arrives after a usage already in the cursor.
    path2 = tmp_path / "t2.jsonl"
    write(path2, assistant(150_000))
    reading, cursor = read_fill(path2)
    assert reading is not None and reading.used_tokens == 150_000
    append(path2, boundary(post_tokens=9_000) + "\n")
    reading, cursor = read_fill(path2, cursor)
    assert reading is not None and reading.used_tokens == 9_000
    assert reading.source == "transcript.post_compaction"


def test_sidechain_boundary_does_not_reset(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(70_000), boundary(post_tokens=10, isSidechain=True))
    reading, _ = read_fill(path)
    assert reading is not None and reading.used_tokens == 70_000


def test_boundary_before_last_usage_is_irrelevant(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(150_000), boundary(post_tokens=5), assistant(30_000, msg_id="n"))
    reading, _ = read_fill(path)
    assert reading is not None and reading.used_tokens == 30_000


def test_window_declared_and_from_model(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(100_000, model="claude-opus-4-6"))
    reading, _ = read_fill(path)
    assert reading is not None and reading.window_tokens == 200_000 and reading.percent == 50
    reading, _ = read_fill(path, model="claude-opus-4-6[1m]")
    assert reading is not None and reading.window_tokens == 1_000_000 and reading.percent == 10
    assert reading.model == "claude-opus-4-6[1m]"
    reading, _ = read_fill(path, model="claude-opus-4-6[1m]", declared_window=400_000)
    assert reading is not None and reading.window_tokens == 400_000


def test_no_usage_at_all_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, user(), user())
    reading, cursor = read_fill(path)
    assert reading is None and cursor.offset == path.stat().st_size
    missing = tmp_path / "nope.jsonl"
    reading, empty = read_fill(missing)
    assert reading is None and empty.offset == 0
    reading, same = read_fill(missing, cursor)
    assert reading is None and same == cursor
    path.write_bytes(b"")
    reading, cursor = read_fill(path)
    assert reading is None and cursor.offset == 0


# --- truncated lines and incremental reads ------------------------------------------------


def test_truncated_last_line_is_not_consumed_until_complete(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    done = assistant(40_000, msg_id="m1") + "\n"
    late = assistant(60_000, msg_id="m2")
    path.write_text(done + late[:50], encoding="utf-8")
    reading, cursor = read_fill(path)
    assert reading is not None and reading.used_tokens == 40_000
    assert cursor.offset == len(done)
    append(path, late[50:])  # complete JSON, still no newline: the writer is mid-line
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 40_000
    assert cursor.offset == len(done)
    append(path, "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 60_000
    assert cursor.offset == path.stat().st_size


def test_invalid_json_last_line_is_left_for_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    done = assistant(40_000, msg_id="m1") + "\n"
    path.write_text(done + '{"type":"assistant","message":{"usage"\n', encoding="utf-8")
    reading, cursor = read_fill(path)
    assert reading is not None and reading.used_tokens == 40_000
    assert cursor.offset == len(done)
    # Once more lines follow, the torn line is history: skipped, never fatal.
    append(path, assistant(45_000, msg_id="m2") + "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 45_000
    assert cursor.offset == path.stat().st_size


def test_appends_are_read_incrementally(tmp_path: Path, spy: ReadSpy) -> None:
    path = tmp_path / "t.jsonl"
    # The head holds lines the reader would parse (they mention "usage") if it ever read them.
    head = "".join(f'GARBAGE {i} "usage" not json {{{{{{\n' for i in range(2000)) + "".join(
        user("x" * 200) + "\n" for i in range(400)
    )
    path.write_text(head + assistant(30_000) + "\n", encoding="utf-8")
    reading, cursor = read_fill(path)
    assert reading is not None and reading.used_tokens == 30_000
    assert not any(b"GARBAGE" in line for line in spy.parsed)
    assert spy.lowest >= path.stat().st_size - DEFAULT_TAIL_BYTES

    for step in range(1, 6):
        spy.reset()
        before = cursor.offset
        added = user("y" * 100) + "\n" + assistant(30_000 + step, msg_id=f"m{step}") + "\n"
        append(path, added)
        reading, cursor = read_fill(path, cursor)
        assert reading is not None and reading.used_tokens == 30_000 + step
        assert cursor.offset == before + len(added.encode())
        # Only the new bytes, plus the short anchor that proves the file was not rewritten.
        assert spy.lowest >= before - ANCHOR_BYTES
        assert spy.total <= len(added.encode()) + 2 * ANCHOR_BYTES
        assert not any(b"GARBAGE" in line for line in spy.parsed)

    spy.reset()
    reading, same = read_fill(path, cursor)  # nothing new
    assert reading is not None and same == cursor
    assert spy.total <= 2 * ANCHOR_BYTES


def test_append_without_usage_keeps_the_remembered_reading(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(80_000))
    _, cursor = read_fill(path)
    append(path, user() + "\n" + user() + "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 80_000
    assert cursor.offset == path.stat().st_size


def test_rotation_truncation_and_rewrite_start_afresh(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, user("a" * 500), assistant(80_000))
    _, cursor = read_fill(path)
    # Truncated and rewritten shorter.
    write(path, assistant(1_000, msg_id="new"))
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 1_000
    # Rewritten in place, same inode, longer than before: the anchor no longer matches.
    write(path, user("b" * 900), assistant(2_000, msg_id="newer"))
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 2_000
    # Rotated: a new file under the same name.
    fresh = tmp_path / "fresh.jsonl"
    write(fresh, assistant(3_000, msg_id="rot"))
    fresh.replace(path)
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 3_000


def test_cursor_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path, assistant(80_000), boundary(post_tokens=7))
    _, cursor = read_fill(path)
    text = json.dumps(cursor.to_json())
    assert TranscriptCursor.from_json(json.loads(text)) == cursor
    assert TranscriptCursor.from_json(text) == cursor


@pytest.mark.parametrize(
    "data",
    [
        "not json",
        "[]",
        {"offset": 3},
        {"v": 99},
        {"v": 1, "offset": "3"},
        {"v": 1, "offset": -1},
        {"v": 1, "offset": True},
        {"v": 1, "compacted": 1},
        {"v": 1, "model": 5},
    ],
)
def test_cursor_from_bad_json(data: Any) -> None:
    with pytest.raises(BadInput):
        TranscriptCursor.from_json(data)


# --- large files: bounded tail, widening, cap -------------------------------------------


def big_filler(target_bytes: int) -> bytes:
    line = (user("z" * 1000) + "\n").encode()
    return line * (target_bytes // len(line))


@pytest.fixture(scope="module")
def big_transcript(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    with path.open("wb") as handle:
        handle.write(b'\x00\xff NOT JSON AT ALL "usage" compact_boundary {{{' * 1000 + b"\n")
        handle.write(big_filler(50 * 1024 * 1024))
        handle.write((assistant(123_456) + "\n").encode())
        handle.write(big_filler(8 * 1024))
    yield path
    path.unlink()


def test_large_transcript_first_read_touches_only_a_bounded_tail(
    big_transcript: Path, spy: ReadSpy
) -> None:
    size = big_transcript.stat().st_size
    assert size > 50 * 1024 * 1024
    reading, cursor = read_fill(big_transcript)
    assert reading is not None and reading.used_tokens == 123_456
    assert cursor.offset == size
    assert spy.lowest >= size - DEFAULT_TAIL_BYTES
    assert spy.total <= DEFAULT_TAIL_BYTES + ANCHOR_BYTES
    assert not any(b"NOT JSON" in line for line in spy.parsed)


def test_tail_widens_backwards_to_find_an_older_usage(tmp_path: Path, spy: ReadSpy) -> None:
    path = tmp_path / "t.jsonl"
    tail = big_filler(1024 * 1024)
    with path.open("wb") as handle:
        handle.write(b'HEAD NOT JSON "usage"\n' * 10_000)
        handle.write(big_filler(4 * 1024 * 1024))
        handle.write((assistant(77_000) + "\n").encode())
        handle.write(tail)
    size = path.stat().st_size
    reading, cursor = read_fill(path)
    assert reading is not None and reading.used_tokens == 77_000
    assert cursor.offset == size
    assert size - spy.lowest <= 4 * len(tail)  # doubling overshoots by at most 2x
    assert not any(b"HEAD" in line for line in spy.parsed)


def test_scan_is_capped_when_no_usage_is_near_the_end(tmp_path: Path, spy: ReadSpy) -> None:
    path = tmp_path / "t.jsonl"
    with path.open("wb") as handle:
        handle.write((assistant(99_000) + "\n").encode())
        handle.write(big_filler(MAX_SCAN_BYTES + 2 * 1024 * 1024))
    size = path.stat().st_size
    reading, cursor = read_fill(path)
    assert reading is None
    assert cursor.offset == size
    assert spy.lowest >= size - MAX_SCAN_BYTES
    assert spy.total <= MAX_SCAN_BYTES + ANCHOR_BYTES
    # The cursor is usable: the next usage is found incrementally.
    append(path, assistant(11_000, msg_id="n") + "\n")
    reading, cursor = read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 11_000


def test_one_line_longer_than_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    long_usage = json.loads(assistant(42_000))
    long_usage["message"]["content"] = [{"type": "text", "text": "w" * 300_000}]
    write(path, user(), json.dumps(long_usage))
    reading, cursor = read_fill(path, tail_bytes=1024)
    assert reading is not None and reading.used_tokens == 42_000
    assert cursor.offset == path.stat().st_size


# --- property: incremental == fresh ------------------------------------------------------

LINE_KINDS = st.one_of(
    st.builds(lambda n: assistant(n, msg_id=f"m{n}"), st.integers(0, 300_000)),
    st.builds(lambda n: assistant(n, isSidechain=True), st.integers(0, 300_000)),
    st.just(user()),
    st.just(SAMPLE_BOUNDARY),
    st.builds(lambda n: boundary(post_tokens=n), st.integers(0, 50_000)),
    st.just("not json at all"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(LINE_KINDS, min_size=0, max_size=25),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
    tail=st.sampled_from([7, 64, 1024, DEFAULT_TAIL_BYTES]),
)
def test_incremental_reads_agree_with_one_fresh_read(
    lines: list[str], cuts: list[int], tail: int
) -> None:
    data = "".join(line + "\n" for line in lines).encode()
    points = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"")
        cursor = None
        written = 0
        for point in points:
            with path.open("ab") as handle:
                handle.write(data[written:point])
            written = point
            reading, cursor = read_fill(path, cursor, tail_bytes=tail)
            assert cursor.offset <= point
            assert data[cursor.offset - 1 : cursor.offset] in (b"", b"\n")
        fresh, fresh_cursor = read_fill(path, tail_bytes=tail)
        assert reading == fresh
        # Everything is consumed except a last line that is not (yet) valid JSON.
        expected = len(data)
        if lines and lines[-1] == "not json at all":
            expected -= len(lines[-1]) + 1
        assert cursor is not None and cursor.offset == fresh_cursor.offset == expected


# --- Codex rollouts ------------------------------------------------------------------------


def token_count(
    total: int | None, *, window: int | None = None, info: bool = True, **usage: int
) -> str:
    if not info:
        return json.dumps(
            {
                "timestamp": "t",
                "type": "event_msg",
                "payload": {"type": "token_count", "info": None},
            }
        )
    last: dict[str, int] = dict(usage)
    if total is not None:
        last["total_tokens"] = total
    body: dict[str, Any] = {"last_token_usage": last, "total_token_usage": {"total_tokens": 1}}
    if window is not None:
        body["model_context_window"] = window
    return json.dumps(
        {
            "timestamp": "t",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": body,
                "rate_limits": {"primary": {"used_percent": 3.0}},
            },
        }
    )


CODEX_META = json.dumps(
    {"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "cli_version": "0.130"}}
)
CODEX_TURN = json.dumps(
    {"timestamp": "t", "type": "turn_context", "payload": {"turn_id": "1", "model": "gpt-5.3"}}
)
CODEX_ITEM = json.dumps(
    {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "content": []}}
)


def test_codex_sample_without_window_uses_default(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    write(path, CODEX_META, CODEX_TURN, CODEX_TOKEN_COUNT)
    reading, cursor = codex.read_fill(path)
    assert reading is not None
    assert reading.source == "codex.token_count"
    assert reading.used_tokens == 3000
    assert reading.window_tokens == 200_000
    assert reading.percent == 1.5
    assert reading.model == "gpt-5.3-codex"
    assert cursor.format == "codex"
    reading, _ = codex.read_fill(path, declared_window=300_000)
    assert reading is not None and reading.percent == 1.0


def test_codex_model_context_window_wins(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    write(path, token_count(129_200, window=258_400))
    reading, _ = codex.read_fill(path, declared_window=100_000)
    assert reading is not None
    assert reading.window_tokens == 258_400 and reading.percent == 50


def test_codex_null_info_and_odd_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    write(
        path,
        token_count(50_000, window=200_000),
        token_count(None, info=False),
        CODEX_ITEM,
        json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "agent_message"}}),
        json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": []}}),
        json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {}}}),
        json.dumps({"type": "brand_new_record", "payload": {"token_count": 1}}),
        "{torn",
        "",
    )
    reading, _ = codex.read_fill(path)
    assert reading is not None and reading.used_tokens == 50_000 and reading.percent == 25


def test_codex_missing_total_uses_input_plus_output(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    write(path, token_count(None, input_tokens=2500, cached_input_tokens=500, output_tokens=300))
    reading, _ = codex.read_fill(path)
    assert reading is not None and reading.used_tokens == 2800


def test_codex_incremental_appends_and_compaction(tmp_path: Path, spy: ReadSpy) -> None:
    path = tmp_path / "rollout.jsonl"
    write(path, CODEX_META, token_count(10_000, window=100_000))
    reading, cursor = codex.read_fill(path)
    assert reading is not None and reading.percent == 10
    for step in range(1, 4):
        spy.reset()
        before = cursor.offset
        added = CODEX_ITEM + "\n" + token_count(10_000 * (step + 1), window=100_000) + "\n"
        append(path, added)
        reading, cursor = codex.read_fill(path, cursor)
        assert reading is not None and reading.percent == 10 * (step + 1)
        assert spy.lowest >= before - ANCHOR_BYTES
        assert cursor.offset == path.stat().st_size
    append(path, token_count(None, info=False) + "\n")
    reading, cursor = codex.read_fill(path, cursor)
    assert reading is not None and reading.percent == 40
    append(path, json.dumps({"timestamp": "t", "type": "compacted", "payload": {}}) + "\n")
    reading, cursor = codex.read_fill(path, cursor)
    assert reading is None
    append(path, token_count(5_000, window=100_000) + "\n")
    reading, cursor = codex.read_fill(path, cursor)
    assert reading is not None and reading.percent == 5


def test_codex_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    first = token_count(20_000, window=200_000) + "\n"
    second = token_count(40_000, window=200_000)
    path.write_text(first + second[:30], encoding="utf-8")
    reading, cursor = codex.read_fill(path)
    assert reading is not None and reading.used_tokens == 20_000
    assert cursor.offset == len(first)
    append(path, second[30:] + "\n")
    reading, cursor = codex.read_fill(path, cursor)
    assert reading is not None and reading.used_tokens == 40_000


def test_cursor_of_another_format_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    write(path, token_count(20_000, window=200_000))
    _, codex_cursor = codex.read_fill(path)
    reading, claude_cursor = read_fill(path, codex_cursor)
    assert reading is None and claude_cursor.format == "claude-code"
