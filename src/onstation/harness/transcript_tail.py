"""The last turns of a predecessor's transcript, read boundedly, for the capsule's tail.

A relief carries the end of the old body's conversation into the capsule as untrusted
evidence. This module reads at most ``max_bytes`` ending where the hooks had read
(:class:`~onstation.harness.transcript.TranscriptCursor` ``offset``), never the whole file,
and turns the host's lines into ``{role, text}`` entries. It does not redact: the capsule
builder (:func:`onstation.plan.build.bounded_tail`) strips invisible characters, normalises
and redacts every text, then cuts it to the schema's length. Texts are therefore cut here
only far beyond that length, so a secret is seen whole by the redaction rules.

What is carried, and what is left out (host formats: docs/hosts.md, harness-formats.md):

Claude Code (``~/.claude/projects/<project>/<session>.jsonl``)
    ``user``/``assistant`` lines: ``text`` blocks under the message's role, ``tool_use`` as
    assistant ``[tool_use NAME] SUMMARY``, ``tool_result`` as role ``tool`` (prefixed
    ``[tool_result error]`` when ``is_error``), images as ``[image]``. Left out: thinking
    blocks (the model's scratch, not the conversation), sidechain and subagent lines
    (another context window), ``isMeta`` lines (host-injected caveats and skill bodies),
    ``summary`` lines (one-line titles that may point into another session), and ``system``
    lines except ``compact_boundary``, kept as a system entry because the successor should
    know the turns before it were summarised. The compaction summary (``isCompactSummary``)
    and locally made API-error messages (``isApiErrorMessage``) are system entries: the host
    wrote them, not the user or the model.

Codex CLI (``$CODEX_HOME/sessions/.../rollout-*.jsonl``)
    ``response_item`` lines: ``message`` (user, assistant), ``function_call`` and
    ``custom_tool_call`` as assistant ``[tool_call NAME] ARGS``, ``local_shell_call``,
    ``web_search_call``, and their outputs as role ``tool``; a ``compacted`` record with a
    message is a system entry. Left out: ``reasoning``, ``event_msg`` (UI copies of the
    response items), ``turn_context``, ``session_meta``, ``developer``/``system`` messages,
    and user messages that are Codex's own context injections (``<environment_context>``,
    AGENTS.md instructions, ...): they are configuration the successor's host gives it
    afresh, they would crowd the few tail slots, and a capsule never carries instructions.

Standard library only; not on the hook hot path (a relief calls it once).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from onstation.core.errors import BadInput
from onstation.harness.transcript import ANCHOR_BYTES, TranscriptCursor

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "HARNESSES",
    "MAX_ENTRY_CHARS",
    "TailReading",
    "read_tail",
    "tail_for_session",
]

DEFAULT_MAX_BYTES: Final = 256 * 1024
DEFAULT_MAX_ENTRIES: Final = 20

MAX_ENTRY_CHARS: Final = 16000
"""Longest text an entry keeps. Four times the capsule's limit: the builder cuts to its own
limit only after redacting, so a secret near the schema's cut is still seen whole."""

HARNESSES: Final[Mapping[str, str]] = {
    "claude-code": "claude-code",
    "codex": "codex",
    "codex-cli": "codex",  # the Codex adapter's plan name (harness/adapters.py)
}
"""Accepted harness names and the transcript format each one writes."""

_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

# Indirection so tests can count the bytes read.
_pread: Callable[[int, int, int], bytes] = os.pread

# C0 controls other than tab, newline and carriage return (and DEL): a transcript may hold
# terminal output, and a NUL cannot be stored in a PostgreSQL text or jsonb value.
_CONTROLS: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

#: Text blocks Codex injects as user messages (its context fragments), never user intent.
#: From ``openai/codex`` ``codex-rs/protocol`` (``ENVIRONMENT_CONTEXT_OPEN_TAG``,
#: ``USER_INSTRUCTIONS_OPEN_TAG``) and rollouts written by ``codex-rs/core`` (AGENTS.md
#: heading, permissions, skills, plugins, collaboration mode); sources in docs/hosts.md.
_CODEX_CONTEXT_PREFIXES: Final = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<permissions instructions>",
    "<skills_instructions>",
    "<plugins_instructions>",
    "<recommended_plugins>",
    "<collaboration_mode>",
    "<personality_spec>",
    "<app-context>",
    "<skill>",
)

#: ``tool_use`` input fields that name what a call does, most telling first.
_SUMMARY_KEYS: Final = ("command", "cmd", "file_path", "notebook_path", "path", "pattern",
                        "url", "query", "description", "prompt")  # fmt: skip


@dataclass(frozen=True)
class TailReading:
    """The tail read from one transcript.

    ``entries``: the newest entries, oldest first, each ``{"role", "text"}`` (role one of
    user, assistant, tool, system). ``cursor``: where the read ended (``HARNESS:OFFSET:DIGEST``;
    None when there was no file). ``truncated``: older entries existed that are not here
    (more than ``max_entries`` in the window, or the window began after the file's start).
    ``lines_skipped``: lines in the window that could not be read (torn, malformed, not a
    JSON object); lines left out on purpose (thinking, sidechains, ...) are not counted.
    """

    entries: list[dict[str, str]]
    cursor: str | None
    truncated: bool
    lines_skipped: int


_EMPTY = TailReading(entries=[], cursor=None, truncated=False, lines_skipped=0)


def read_tail(
    path: str | os.PathLike[str],
    *,
    harness: str,
    end_offset: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> TailReading:
    """The last ``max_entries`` entries in the ``max_bytes`` of ``path`` before ``end_offset``.

    ``end_offset`` is where the hooks had read (None: the end of the file; beyond the end:
    the end). A missing file gives an empty reading; a symlink, a non-regular file or an
    unknown harness is a :class:`BadInput`. At most ``max_bytes`` bytes are read.
    """
    fmt = _format(harness)
    _check_bounds(end_offset, max_bytes, max_entries)
    fd = _open(path)
    if fd is None:
        return _EMPTY
    try:
        st = os.fstat(fd)
        return _read(fd, st, path, fmt, end_offset, max_bytes, max_entries)
    finally:
        os.close(fd)


def tail_for_session(
    transcript_path: str | None,
    telemetry_cursor: Mapping[str, Any] | str | None,
    harness: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> TailReading | None:
    """The tail of a session's transcript up to where its hooks had read, or None without one.

    ``telemetry_cursor`` is the session record's stored :class:`TranscriptCursor` (its JSON
    text or the decoded object; a malformed one is a :class:`BadInput`). Its offset bounds
    the read only while it still describes this file (same format, device and inode, the
    file not shorter, the bytes before the offset unchanged); otherwise the file was
    rotated or rewritten and the tail is read to the file's end.
    """
    if not transcript_path:
        return None
    fmt = _format(harness)
    _check_bounds(None, max_bytes, max_entries)
    cursor = TranscriptCursor.from_json(telemetry_cursor) if telemetry_cursor else None
    fd = _open(transcript_path)
    if fd is None:
        return _EMPTY
    try:
        st = os.fstat(fd)
        end = cursor.offset if cursor is not None and _describes(fd, st, cursor, fmt) else None
        return _read(fd, st, transcript_path, fmt, end, max_bytes, max_entries)
    finally:
        os.close(fd)


# --- reading --------------------------------------------------------------------------------


def _format(harness: str) -> str:
    fmt = HARNESSES.get(harness) if isinstance(harness, str) else None
    if fmt is None:
        known = ", ".join(sorted(HARNESSES))
        raise BadInput(f"harness: unknown {harness!r} (known: {known})", field="harness")
    return fmt


def _check_bounds(end_offset: int | None, max_bytes: int, max_entries: int) -> None:
    for name, value, least in (("max_bytes", max_bytes, 1), ("max_entries", max_entries, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise BadInput(f"{name}: must be an integer >= {least}, got {value!r}", field=name)
    if end_offset is not None and (
        isinstance(end_offset, bool) or not isinstance(end_offset, int) or end_offset < 0
    ):
        raise BadInput(f"end_offset: must be a non-negative integer, got {end_offset!r}")


def _open(path: str | os.PathLike[str]) -> int | None:
    """A read-only descriptor of the regular file at ``path`` (never through a final
    symlink), or None when there is no file."""
    name = os.fspath(path)
    try:
        fd = os.open(name, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"transcript {name}: is a symlink (not followed)") from None
        raise BadInput(f"transcript {name}: cannot open ({exc.strerror})") from None
    except ValueError as exc:  # a NUL in the path
        raise BadInput(f"transcript: cannot open ({exc})") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BadInput(f"transcript {name}: not a regular file")
    return fd


def _describes(fd: int, st: os.stat_result, cursor: TranscriptCursor, fmt: str) -> bool:
    """Whether ``cursor`` (written by the telemetry reader) describes a prefix of this file."""
    if cursor.format != fmt or (cursor.dev, cursor.ino) != (st.st_dev, st.st_ino):
        return False
    if st.st_size < cursor.offset or st.st_size < cursor.size:
        return False
    length = min(ANCHOR_BYTES, cursor.offset)
    before = _pread(fd, length, cursor.offset - length) if length else b""
    return before.hex() == cursor.anchor


def _read_range(fd: int, start: int, end: int) -> bytes:
    chunks: list[bytes] = []
    offset = start
    while offset < end:
        chunk = _pread(fd, end - offset, offset)
        if not chunk:
            break  # the file shrank while it was read
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _read(
    fd: int,
    st: os.stat_result,
    path: str | os.PathLike[str],
    fmt: str,
    end_offset: int | None,
    max_bytes: int,
    max_entries: int,
) -> TailReading:
    end = st.st_size if end_offset is None else min(end_offset, st.st_size)
    start = max(0, end - max_bytes)
    data = _read_range(fd, start, end)
    if start > 0:
        # The window's first byte only tells whether the next one starts a line: a line cut
        # by the window's start is dropped whole, never read as a fragment.
        newline = data.find(b"\n")
        data = b"" if newline < 0 else data[newline + 1 :]
    convert = _claude_entries if fmt == "claude-code" else _codex_entries
    found: list[tuple[str, str]] = []
    skipped = 0
    # The last piece may lack its newline (still being written, or an offset inside a
    # line): it is tried like the others and counted as skipped when it does not parse.
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        obj = _parse(raw)
        if obj is None:
            skipped += 1
            continue
        for role, raw_text in convert(obj):
            text = _bound(raw_text)
            if text.strip():
                found.append((role, text))
    kept = found[-max_entries:] if max_entries else []
    return TailReading(
        entries=[{"role": role, "text": text} for role, text in kept],
        cursor=_cursor(path, fmt, end),
        truncated=start > 0 or len(found) > len(kept),
        lines_skipped=skipped,
    )


def _parse(raw: bytes) -> dict[str, Any] | None:
    # Undecodable bytes become U+FFFD rather than losing the whole line.
    try:
        obj = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _bound(text: str) -> str:
    """``text`` safe to carry: controls removed, lone surrogates (from ``\\ud800`` escapes)
    replaced, and cut at :data:`MAX_ENTRY_CHARS`, preferably at whitespace so the cut does
    not split a token the redaction rules would otherwise recognise."""
    text = _CONTROLS.sub("", text)
    text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) <= MAX_ENTRY_CHARS:
        return text
    head = text[:MAX_ENTRY_CHARS]
    space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:space] if space >= MAX_ENTRY_CHARS - 1000 else head


def _cursor(path: str | os.PathLike[str], fmt: str, end: int) -> str:
    # A digest, never the path: transcript paths hold user names and project directories
    # (~/.claude/projects/-home-alice-..., $CODEX_HOME/sessions/...), and the cursor travels
    # in the capsule to another body and into review output. The digest still tells two
    # files apart and lets an operator check a path they already know.
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    return f"{fmt}:{end}:{digest}"


# --- Claude Code ----------------------------------------------------------------------------


def _claude_entries(obj: dict[str, Any]) -> list[tuple[str, str]]:
    # Sidechain and subagent lines describe another context window (as in transcript.py).
    if obj.get("isSidechain") is True or obj.get("agentId"):
        return []
    kind = obj.get("type")
    if kind == "system":
        if obj.get("subtype") != "compact_boundary":
            return []
        meta = obj.get("compactMetadata")
        trigger = meta.get("trigger") if isinstance(meta, dict) else None
        how = f" ({trigger})" if isinstance(trigger, str) and trigger else ""
        return [("system", f"[compact_boundary] the conversation before this was compacted{how}")]
    if kind not in ("user", "assistant") or obj.get("isMeta") is True:
        return []
    message = obj.get("message")
    if not isinstance(message, dict):
        return []
    role = "assistant" if kind == "assistant" else "user"
    prefix = ""
    if obj.get("isCompactSummary") is True:
        role, prefix = "system", "[compact summary] "
    elif kind == "assistant" and obj.get("isApiErrorMessage") is True:
        role, prefix = "system", "[api error] "
    content = message.get("content")
    if isinstance(content, str):
        return [(role, prefix + content)]
    if not isinstance(content, list):
        return []
    out: list[tuple[str, str]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text" and isinstance(block.get("text"), str):
            out.append((role, prefix + block["text"]))
        elif btype in ("tool_use", "server_tool_use"):
            name = _name(block.get("name"))
            out.append(("assistant", f"[tool_use {name}] {_input_summary(block.get('input'))}"))
        elif btype == "tool_result":
            mark = "[tool_result error] " if block.get("is_error") is True else ""
            out.append(("tool", mark + _blocks_text(block.get("content"))))
        elif btype == "image":
            out.append((role, "[image]"))
        # thinking, redacted_thinking and unknown blocks are left out
    return out


def _name(value: object) -> str:
    return value if isinstance(value, str) and value else "?"


def _input_summary(value: object) -> str:
    """The field of a tool call's input that says what it does (the command, the file), else
    its compact JSON; file contents and patches are left out when a path names the call."""
    if isinstance(value, dict):
        for key in _SUMMARY_KEYS:
            field = value.get(key)
            if isinstance(field, str) and field:
                return field
            if isinstance(field, list) and field and all(isinstance(p, str) for p in field):
                return " ".join(field)
    if isinstance(value, str):
        return value
    return _compact_json(value)


def _compact_json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return ""


def _blocks_text(value: object) -> str:
    """A result's text: a string, or the texts of a list of content blocks."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return "" if value is None else _compact_json(value)
    parts: list[str] = []
    for block in value:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif block.get("type") in ("image", "input_image"):
                parts.append("[image]")
    return "\n".join(parts)


# --- Codex CLI ------------------------------------------------------------------------------


def _codex_entries(obj: dict[str, Any]) -> list[tuple[str, str]]:
    kind = obj.get("type")
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        return []
    if kind == "compacted":
        message = payload.get("message")
        if isinstance(message, str) and message.strip():
            return [("system", f"[compacted] {message}")]
        return []
    if kind != "response_item":
        return []
    ptype = payload.get("type")
    if ptype == "message":
        return _codex_message(payload)
    if ptype in ("function_call", "custom_tool_call"):
        name = _name(payload.get("name"))
        args = payload.get("arguments") if ptype == "function_call" else payload.get("input")
        return [("assistant", f"[tool_call {name}] {_codex_arguments(args)}")]
    if ptype == "local_shell_call":
        action = payload.get("action")
        command = action.get("command") if isinstance(action, dict) else None
        return [("assistant", f"[tool_call local_shell] {_input_summary({'command': command})}")]
    if ptype == "web_search_call":
        action = payload.get("action")
        return [("assistant", f"[web_search] {_input_summary(action)}")]
    if ptype in ("function_call_output", "custom_tool_call_output"):
        return [("tool", _codex_output(payload.get("output")))]
    return []  # reasoning, ghost snapshots, encrypted compaction, unknown items


def _codex_message(payload: dict[str, Any]) -> list[tuple[str, str]]:
    role = payload.get("role")
    if role not in ("user", "assistant"):
        return []  # developer / system: configuration, not conversation
    content = payload.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        return []
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        text = block.get("text")
        if isinstance(text, str):
            if role == "user" and text.lstrip().startswith(_CODEX_CONTEXT_PREFIXES):
                continue
            parts.append(text)
        elif block.get("type") == "input_image":
            parts.append("[image]")
    return [(str(role), "\n".join(parts))] if parts else []


def _codex_arguments(value: object) -> str:
    """A call's arguments: the command when the JSON names one, else the raw text."""
    if not isinstance(value, str):
        return _compact_json(value)
    if value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, dict):
            for key in ("cmd", "command"):
                if key in parsed:
                    summary = _input_summary({key: parsed[key]})
                    if summary:
                        return summary
    return value


def _codex_output(value: object) -> str:
    """A tool output: a string (exec tools wrap ``{"output", "metadata": {"exit_code"}}`` in
    it), a list of content items, or the older ``{content, success}`` object."""
    if isinstance(value, str):
        if value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                return value
            output = parsed.get("output") if isinstance(parsed, dict) else None
            if isinstance(output, str):
                meta = parsed.get("metadata")
                code = meta.get("exit_code") if isinstance(meta, dict) else None
                failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
                return (f"[tool_result exit {code}] " if failed else "") + output
        return value
    if isinstance(value, dict):
        text = value.get("content", value.get("output"))
        mark = "[tool_result error] " if value.get("success") is False else ""
        return mark + _blocks_text(text)
    return _blocks_text(value)
