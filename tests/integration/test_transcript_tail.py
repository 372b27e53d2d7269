"""The predecessor's transcript tail on real files: bounded, host-shaped, tolerant."""

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
from onstation.harness import transcript_tail
from onstation.harness.transcript import read_fill
from onstation.harness.transcript_tail import (
    MAX_ENTRY_CHARS,
    TailReading,
    read_tail,
    tail_for_session,
)
from onstation.plan.build import bounded_tail

ROLES = {"user", "assistant", "tool", "system"}

# --- Claude Code lines, shaped as the host writes them ---------------------------------------
# Envelope and message shapes: harness-formats.md §3.2 (daaain/claude-code-log fixtures
# sidechain_integrated.jsonl, dag_compact_after_rewind.jsonl, minimal_showcase/*.jsonl); the
# declined-call text: docs/hosts.md (the "doesn't want to proceed" row).

_ENVELOPE = {
    "parentUuid": "p",
    "isSidechain": False,
    "userType": "external",
    "cwd": "/workspace/example-app",
    "sessionId": "55550000-0000-4000-8000-000000000001",
    "version": "2.1.173",
    "timestamp": "2026-06-15T10:00:01.000Z",
}


def claude_user(content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": "u",
        **_ENVELOPE,
        **extra,
        "message": {"role": "user", "content": content},
    }


def claude_assistant(content: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "stop_reason": "tool_use",
        "content": content,
        "usage": {"input_tokens": 120, "output_tokens": 40},
    }
    return {
        "type": "assistant",
        "uuid": "a",
        **_ENVELOPE,
        **extra,
        "message": message,
        "requestId": "req_1",
    }


CLAUDE_LINES: list[dict[str, Any]] = [
    {"type": "summary", "summary": "Repository tour", "leafUuid": "l1"},
    claude_user(
        "<local-command-caveat>Caveat: generated locally</local-command-caveat>", isMeta=True
    ),
    claude_user("Run the tests and fix what fails."),
    claude_assistant(
        [
            {"type": "thinking", "thinking": "SECRET PLAN the user must not see", "signature": "x"},
            {"type": "text", "text": "Let me run the suite first."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Bash",
                "input": {
                    "command": "pytest -q",
                    "description": "Run test suite",
                    "timeout": 120000,
                },
            },
        ]
    ),
    claude_user(
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1 failed, 41 passed"}],
        toolUseResult={"stdout": "1 failed, 41 passed"},
    ),
    claude_assistant(
        [
            {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "Edit",
                "input": {
                    "file_path": "/workspace/example-app/src/x.py",
                    "old_string": "a",
                    "new_string": "b",
                },
            },
        ]
    ),
    claude_user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "is_error": True,
                "content": "The user doesn't want to proceed with this tool use. "
                "The tool use was rejected.",
            }
        ]
    ),
    # A subagent's line inside the main file (older versions): another context window.
    claude_assistant([{"type": "text", "text": "sidechain report"}], isSidechain=True),
    claude_user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_3",
                "content": [
                    {"type": "text", "text": "module web: 38 files"},
                    {"type": "text", "text": "module jobs: 14 files"},
                ],
            }
        ]
    ),
    {"type": "system", "subtype": "turn_duration", "durationMs": 1200, **_ENVELOPE},
    {
        "type": "system",
        "subtype": "compact_boundary",
        "parentUuid": None,
        "logicalParentUuid": "b2a2",
        "isSidechain": False,
        "sessionId": "s1",
        "version": "2.1.0",
        "uuid": "cb",
        "content": "Conversation compacted",
        "level": "info",
        "compactMetadata": {"trigger": "auto", "preTokens": 150000},
    },
    claude_user(
        [
            {
                "type": "text",
                "text": "This session is being continued from a previous "
                "conversation that ran out of context. Summary: tests fixed.",
            }
        ],
        isCompactSummary=True,
    ),
    claude_assistant([{"type": "text", "text": "All 42 tests pass now."}]),
]

CLAUDE_EXPECTED = [
    {"role": "user", "text": "Run the tests and fix what fails."},
    {"role": "assistant", "text": "Let me run the suite first."},
    {"role": "assistant", "text": "[tool_use Bash] pytest -q"},
    {"role": "tool", "text": "1 failed, 41 passed"},
    {"role": "assistant", "text": "[tool_use Edit] /workspace/example-app/src/x.py"},
    {
        "role": "tool",
        "text": "[tool_result error] The user doesn't want to proceed with this "
        "tool use. The tool use was rejected.",
    },
    {"role": "tool", "text": "module web: 38 files\nmodule jobs: 14 files"},
    {
        "role": "system",
        "text": "[compact_boundary] the conversation before this was compacted (auto)",
    },
    {
        "role": "system",
        "text": "[compact summary] This session is being continued from a "
        "previous conversation that ran out of context. Summary: tests "
        "fixed.",
    },
    {"role": "assistant", "text": "All 42 tests pass now."},
]

# --- Codex rollout lines ------------------------------------------------------------------------
# {"timestamp", "type", "payload"} (RolloutLine / RolloutItem, openai/codex codex-rs/protocol);
# payload shapes from ResponseItem in codex-rs/protocol/src/models.rs and the rollout fixture
# daaain/claude-code-log test/test_data/codex/sessions/2026/01/02/rollout-...jsonl.


def rollout(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-02T03:04:05.000Z", "type": kind, "payload": payload}


def response(payload: dict[str, Any]) -> dict[str, Any]:
    return rollout("response_item", payload)


CODEX_LINES: list[dict[str, Any]] = [
    rollout(
        "session_meta",
        {
            "id": "1111",
            "timestamp": "2026-01-02T03:04:05.000Z",
            "cwd": "/w",
            "originator": "codex_cli_rs",
            "cli_version": "0.171.0",
            "instructions": "base instructions",
        },
    ),
    rollout(
        "turn_context",
        {
            "cwd": "/w",
            "model": "gpt-5.3-codex",
            "approval_policy": "never",
            "sandbox_policy": {"type": "read-only"},
        },
    ),
    response(
        {
            "type": "message",
            "role": "developer",
            "content": [
                {
                    "type": "input_text",
                    "text": "<permissions instructions>sandbox...</permissions instructions>",
                }
            ],
        }
    ),
    response(
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\n"
                    "Be brief\n</INSTRUCTIONS>",
                },
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
                },
            ],
        }
    ),
    rollout("event_msg", {"type": "user_message", "message": "List the files."}),
    response(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "List the files."}],
        }
    ),
    response(
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "I will look"}],
            "encrypted_content": "ENCRYPTED_MUST_NOT_RENDER",
        }
    ),
    response(
        {
            "type": "function_call",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "find . -maxdepth 1 -type f"}),
            "call_id": "call-1",
        }
    ),
    response(
        {"type": "function_call_output", "call_id": "call-1", "output": "./alpha.txt\n./beta.txt"}
    ),
    response(
        {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", "cat gamma.txt"], "workdir": "/w"}),
            "call_id": "call-2",
        }
    ),
    response(
        {
            "type": "function_call_output",
            "call_id": "call-2",
            "output": json.dumps(
                {
                    "output": "cat: gamma.txt: No such file",
                    "metadata": {"exit_code": 1, "duration_seconds": 0.1},
                }
            ),
        }
    ),
    response(
        {
            "type": "custom_tool_call",
            "name": "apply_patch",
            "call_id": "call-3",
            "input": "*** Begin Patch\n*** Add File: gamma.txt\n+x\n*** End Patch",
        }
    ),
    response(
        {
            "type": "custom_tool_call_output",
            "call_id": "call-3",
            "output": [{"type": "output_text", "text": "Done!"}],
        }
    ),
    response(
        {
            "type": "local_shell_call",
            "call_id": "call-4",
            "status": "completed",
            "action": {
                "type": "exec",
                "command": ["ls", "-la"],
                "timeout_ms": None,
                "working_directory": None,
                "env": None,
                "user": None,
            },
        }
    ),
    response(
        {
            "type": "function_call_output",
            "call_id": "call-4",
            "output": {"content": "permission denied", "success": False},
        }
    ),
    response(
        {
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "pytest fixtures"},
        }
    ),
    rollout("event_msg", {"type": "agent_message", "message": "Created gamma.txt."}),
    response(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Created gamma.txt."}],
        }
    ),
    rollout("event_msg", {"type": "token_count", "info": None}),
    rollout("compacted", {"message": "Summary: listed files, created gamma.txt."}),
    rollout("future_record", {"safe": "ignored"}),
]

CODEX_EXPECTED = [
    {"role": "user", "text": "List the files."},
    {"role": "assistant", "text": "[tool_call exec_command] find . -maxdepth 1 -type f"},
    {"role": "tool", "text": "./alpha.txt\n./beta.txt"},
    {"role": "assistant", "text": "[tool_call shell] bash -lc cat gamma.txt"},
    {"role": "tool", "text": "[tool_result exit 1] cat: gamma.txt: No such file"},
    {
        "role": "assistant",
        "text": "[tool_call apply_patch] *** Begin Patch\n*** Add File: "
        "gamma.txt\n+x\n*** End Patch",
    },
    {"role": "tool", "text": "Done!"},
    {"role": "assistant", "text": "[tool_call local_shell] ls -la"},
    {"role": "tool", "text": "[tool_result error] permission denied"},
    {"role": "assistant", "text": "[web_search] pytest fixtures"},
    {"role": "assistant", "text": "Created gamma.txt."},
    {"role": "system", "text": "[compacted] Summary: listed files, created gamma.txt."},
]


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes returned by every read the module makes."""
    reads: list[int] = []
    real = transcript_tail._pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        chunk = real(fd, length, offset)
        reads.append(len(chunk))
        return chunk

    monkeypatch.setattr(transcript_tail, "_pread", pread)
    return reads


# --- what each host's lines become ------------------------------------------------------------


def test_claude_code_lines_become_entries(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl(CLAUDE_LINES))
    reading = read_tail(str(path), harness="claude-code", max_entries=50)
    assert reading.entries == CLAUDE_EXPECTED
    assert reading.truncated is False
    assert reading.lines_skipped == 0
    assert "SECRET PLAN" not in json.dumps(reading.entries)  # thinking is never carried
    assert "sidechain report" not in json.dumps(reading.entries)


def test_codex_rollout_lines_become_entries(tmp_path: Path) -> None:
    path = write(tmp_path / "rollout.jsonl", jsonl(CODEX_LINES))
    reading = read_tail(str(path), harness="codex", max_entries=50)
    assert reading.entries == CODEX_EXPECTED
    text = json.dumps(reading.entries)
    for hidden in ("AGENTS.md", "environment_context", "permissions", "ENCRYPTED", "I will look"):
        assert hidden not in text
    # The adapter's plan name reads the same format.
    assert read_tail(str(path), harness="codex-cli", max_entries=50).entries == CODEX_EXPECTED


def test_only_the_last_entries_are_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl(CLAUDE_LINES))
    reading = read_tail(str(path), harness="claude-code", max_entries=3)
    assert reading.entries == CLAUDE_EXPECTED[-3:]
    assert reading.truncated is True
    assert read_tail(str(path), harness="claude-code", max_entries=0).entries == []


def test_entries_pass_through_the_capsule_builder_redacted(tmp_path: Path) -> None:
    token = "ghp_" + "R3moteT0ken" * 4
    lines = [
        claude_assistant(
            [
                {
                    "type": "tool_use",
                    "id": "t",
                    "name": "Bash",
                    "input": {"command": f"GH_TOKEN={token} git push"},
                }
            ]
        ),
        claude_user([{"type": "tool_result", "tool_use_id": "t", "content": f"token {token}"}]),
    ]
    path = write(tmp_path / "s.jsonl", jsonl(lines))
    reading = read_tail(str(path), harness="claude-code")
    assert token in json.dumps(reading.entries)  # redaction is the builder's job
    tail, cut = bounded_tail(reading.entries)
    assert token not in json.dumps(tail)
    assert [entry["role"] for entry in tail] == ["assistant", "tool"]
    assert cut is False


def test_texts_are_cut_far_beyond_the_capsule_limit(tmp_path: Path) -> None:
    medium = "m" * 5000  # longer than the capsule's 4000: left for the builder to cut
    long_words = ("word " * 5000).strip()  # 24999 characters
    lines = [
        claude_user([{"type": "tool_result", "tool_use_id": "a", "content": medium}]),
        claude_user([{"type": "tool_result", "tool_use_id": "b", "content": long_words}]),
        claude_user([{"type": "tool_result", "tool_use_id": "c", "content": "x" * 20000}]),
    ]
    path = write(tmp_path / "s.jsonl", jsonl(lines))
    texts = [e["text"] for e in read_tail(str(path), harness="claude-code").entries]
    assert texts[0] == medium
    # Cut at whitespace near the limit, so no word is split; a text without any is cut hard.
    assert 15000 <= len(texts[1]) <= MAX_ENTRY_CHARS and texts[1].endswith("word")
    assert texts[2] == "x" * MAX_ENTRY_CHARS


def test_controls_and_lone_surrogates_are_made_safe(tmp_path: Path) -> None:
    line = b'{"type":"user","message":{"role":"user","content":"a\\u0000b\\u001bc\\ud800d\\te"}}\n'
    path = write(tmp_path / "s.jsonl", line)
    (entry,) = read_tail(str(path), harness="claude-code").entries
    assert entry == {"role": "user", "text": "abc?d\te"}
    entry["text"].encode("utf-8")  # a lone surrogate would raise here


# --- bounded reading ----------------------------------------------------------------------------


def test_a_large_file_is_read_only_at_its_end(tmp_path: Path, counted: list[int]) -> None:
    # 5 MB of lines no parser accepts, then 100 valid lines of ~1 KB: if any filler byte
    # were parsed it would show in lines_skipped.
    filler = b"{not json, filler line of an old turn " + b"z" * 60 + b"\n"
    tail_lines = [claude_user(f"turn {i} " + "p" * 1000) for i in range(100)]
    path = tmp_path / "big.jsonl"
    with path.open("wb") as handle:
        handle.write(filler * (5 * 1024 * 1024 // len(filler)))
        handle.write(jsonl(tail_lines))
    limit = 64 * 1024
    reading = read_tail(str(path), harness="claude-code", max_bytes=limit, max_entries=20)
    assert [e["text"].split(" ")[1] for e in reading.entries] == [str(i) for i in range(80, 100)]
    assert reading.lines_skipped == 0
    assert reading.truncated is True
    assert sum(counted) <= limit


def test_the_window_drops_a_line_cut_by_its_start(tmp_path: Path, counted: list[int]) -> None:
    first = jsonl([claude_user("first " + "f" * 200)])
    second = jsonl([claude_user("second")])
    path = write(tmp_path / "s.jsonl", first + second)
    # The window starts inside the first line: that line is dropped, not counted as skipped.
    cut = read_tail(str(path), harness="claude-code", max_bytes=len(second) + 50)
    assert [e["text"] for e in cut.entries] == ["second"]
    assert (cut.lines_skipped, cut.truncated) == (0, True)
    # The window's first byte is the newline before "second": that line is whole.
    exact = read_tail(str(path), harness="claude-code", max_bytes=len(second) + 1)
    assert [e["text"] for e in exact.entries] == ["second"]
    # One byte less and nothing tells whether "second" was whole: it is dropped.
    short = read_tail(str(path), harness="claude-code", max_bytes=len(second))
    assert short.entries == []
    assert max(counted) <= len(second) + 50


def test_the_end_offset_is_honoured(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl([claude_user("seen by the hooks")]))
    offset = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(jsonl([claude_user("written after the cursor")]))
    reading = read_tail(str(path), harness="claude-code", end_offset=offset)
    assert [e["text"] for e in reading.entries] == ["seen by the hooks"]
    assert reading.cursor is not None and reading.cursor.startswith(f"claude-code:{offset}:")
    everything = read_tail(str(path), harness="claude-code")
    assert [e["text"] for e in everything.entries][-1] == "written after the cursor"


def test_an_offset_beyond_the_end_reads_to_the_end(tmp_path: Path) -> None:
    data = jsonl([claude_user("only line")])
    path = write(tmp_path / "s.jsonl", data)
    reading = read_tail(str(path), harness="claude-code", end_offset=10 * len(data))
    assert [e["text"] for e in reading.entries] == ["only line"]
    assert reading.cursor is not None and reading.cursor.startswith(f"claude-code:{len(data)}:")


def test_torn_malformed_and_undecodable_lines_are_tolerated(tmp_path: Path) -> None:
    data = (
        jsonl([claude_user("before")])
        + b"{this is not json}\n"
        + b"[1, 2, 3]\n"
        + b'{"type":"user","message":{"role":"user","content":"caf\xe9 \xff bytes"}}\n'
        + b"\n   \n"
        + jsonl([claude_user("after")])
        + b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"te'
    )
    path = write(tmp_path / "s.jsonl", data)
    reading = read_tail(str(path), harness="claude-code")
    assert [e["text"] for e in reading.entries] == ["before", "caf\ufffd \ufffd bytes", "after"]
    assert reading.lines_skipped == 3  # not JSON, not an object, torn last line


def test_a_complete_last_line_without_its_newline_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl([claude_user("a")]) + jsonl([claude_user("b")])[:-1])
    reading = read_tail(str(path), harness="claude-code")
    assert [e["text"] for e in reading.entries] == ["a", "b"]
    assert reading.lines_skipped == 0


# --- the cursor, missing files, refusals --------------------------------------------------------


def test_the_cursor_names_the_position_not_the_path(tmp_path: Path) -> None:
    home = tmp_path / "home" / "alice-smith" / ".claude" / "projects" / ("-x" * 100) / ("-y" * 100)
    home.mkdir(parents=True)
    path = write(home / "session.jsonl", jsonl([claude_user("hi")]))
    cursor = read_tail(str(path), harness="claude-code").cursor
    assert cursor is not None and len(cursor) <= 512
    assert "alice" not in cursor and "/" not in cursor
    fmt, offset, _digest = cursor.split(":")
    assert (fmt, int(offset)) == ("claude-code", path.stat().st_size)
    other = write(tmp_path / "other.jsonl", jsonl([claude_user("hi")]))
    assert read_tail(str(other), harness="claude-code").cursor != cursor
    assert read_tail(str(path), harness="claude-code").cursor == cursor


def test_a_missing_file_gives_an_empty_reading(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    assert read_tail(missing, harness="codex") == TailReading([], None, False, 0)
    assert tail_for_session(missing, None, "codex") == TailReading([], None, False, 0)


def test_refusals(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl([claude_user("hi")]))
    with pytest.raises(BadInput, match="harness"):
        read_tail(str(path), harness="gemini")
    with pytest.raises(BadInput, match="harness"):
        tail_for_session(str(path), None, "aider")
    with pytest.raises(BadInput, match="max_bytes"):
        read_tail(str(path), harness="codex", max_bytes=0)
    with pytest.raises(BadInput, match="max_entries"):
        read_tail(str(path), harness="codex", max_entries=-1)
    with pytest.raises(BadInput, match="end_offset"):
        read_tail(str(path), harness="codex", end_offset=-5)
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    with pytest.raises(BadInput, match="symlink"):
        read_tail(str(link), harness="claude-code")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        read_tail(str(fifo), harness="claude-code")  # refused without blocking
    with pytest.raises(BadInput, match="not a regular file"):
        read_tail(str(tmp_path), harness="claude-code")


# --- from the session record --------------------------------------------------------------------


def _assistant_with_usage(text: str) -> dict[str, Any]:
    return claude_assistant([{"type": "text", "text": text}])


def test_tail_for_session_stops_where_the_hooks_read(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl([claude_user("go"), _assistant_with_usage("done")]))
    _, cursor = read_fill(path)  # what the hooks store as telemetry_cursor
    with path.open("ab") as handle:
        handle.write(jsonl([claude_user("after the cursor")]))
    stored = json.dumps(cursor.to_json())
    for form in (stored, json.loads(stored)):  # the JSON text or the decoded record
        reading = tail_for_session(str(path), form, "claude-code")
        assert reading is not None
        assert [e["text"] for e in reading.entries] == ["go", "done"]
        assert reading.cursor is not None
        assert reading.cursor.startswith(f"claude-code:{cursor.offset}:")
    no_cursor = tail_for_session(str(path), None, "claude-code")
    assert no_cursor is not None and no_cursor.entries[-1]["text"] == "after the cursor"


def test_tail_for_session_without_a_transcript_is_none() -> None:
    assert tail_for_session(None, None, "claude-code") is None
    assert tail_for_session("", '{"v": 1}', "codex") is None


def test_a_cursor_for_another_file_is_not_trusted(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl([claude_user("old " + "o" * 300)]))
    _, cursor = read_fill(path)
    # The file is replaced (rotation): the stored offset describes bytes no longer there.
    replacement = write(tmp_path / "new.jsonl", jsonl([claude_user("new 1"), claude_user("new 2")]))
    os.replace(replacement, path)
    reading = tail_for_session(str(path), cursor.to_json(), "claude-code")
    assert reading is not None
    assert [e["text"] for e in reading.entries] == ["new 1", "new 2"]
    # A cursor of the other format does not bound the read either.
    codex_cursor = cursor.replace(format="codex").to_json()
    mixed = tail_for_session(str(path), codex_cursor, "claude-code")
    assert mixed is not None and len(mixed.entries) == 2


def test_a_malformed_stored_cursor_is_bad_input(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", jsonl([claude_user("hi")]))
    with pytest.raises(BadInput, match="transcript cursor"):
        tail_for_session(str(path), "{not json", "claude-code")


# --- arbitrary bytes ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory)


_PIECES = st.sampled_from(
    [json.dumps(line).encode() for line in CLAUDE_LINES + CODEX_LINES]
    + [b"\n", b"{", b"}", b'"', b"\xff\xfe", b"\\ud800", b"null", b"[]", b'{"type":"user"}']
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(st.binary(max_size=4000), st.lists(_PIECES, max_size=40).map(b"".join)),
    harness=st.sampled_from(["claude-code", "codex"]),
    max_bytes=st.integers(min_value=1, max_value=5000),
    max_entries=st.integers(min_value=0, max_value=25),
    end_offset=st.one_of(st.none(), st.integers(min_value=0, max_value=6000)),
)
def test_arbitrary_bytes_never_raise(
    scratch: Path,
    data: bytes,
    harness: str,
    max_bytes: int,
    max_entries: int,
    end_offset: int | None,
) -> None:
    path = write(scratch / "any.jsonl", data)
    reading = read_tail(
        str(path),
        harness=harness,
        end_offset=end_offset,
        max_bytes=max_bytes,
        max_entries=max_entries,
    )
    assert len(reading.entries) <= max_entries
    for entry in reading.entries:
        assert set(entry) == {"role", "text"} and entry["role"] in ROLES
        assert 0 < len(entry["text"]) <= MAX_ENTRY_CHARS
        entry["text"].encode("utf-8")
    assert reading.cursor is not None and len(reading.cursor) <= 512
    assert reading.lines_skipped <= data.count(b"\n") + 1
    bounded_tail(reading.entries)  # the builder accepts whatever the reader gives
