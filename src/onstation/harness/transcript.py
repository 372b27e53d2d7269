"""Incremental context-fill reading from a Claude Code transcript (JSONL), never whole.

Transcripts grow to hundreds of MB and hooks run after every tool call, so each call reads
only bytes it has not consumed before (from a :class:`TranscriptCursor`), scanning backwards
from the end for the last *decisive* line and stopping there. Without a cursor it reads a
bounded tail. Fill is the last main-chain assistant usage (input + cache_creation +
cache_read) unless a compaction boundary came after it. Never a sum across lines.

The scanning engine is shared with :mod:`onstation.harness.codex`. Standard library only:
this module is imported on the hook hot path.
"""

from __future__ import annotations

import math
import os

# ``_collections_abc``, which ``collections.abc`` re-exports: importing the latter runs
# ``collections/__init__``, milliseconds of every hook process (see core.hull).
from _collections_abc import Callable, Iterator, Mapping

from onstation.core.errors import BadInput
from onstation.core.fastjson import loads, loads_bytes
from onstation.core.frozen import FrozenRecord
from onstation.core.hull import (
    DEFAULT_WINDOW,
    SOURCE_TRANSCRIPT,
    SOURCE_TRANSCRIPT_POST_COMPACTION,
    FillReading,
    fill_percent,
    model_window,
)

# On the hook hot path: no typing or dataclasses imports at run time (see core.hull).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

DEFAULT_TAIL_BYTES: Final = 64 * 1024
"""First window read from the end of the file; doubled while no decisive line is found."""

MAX_SCAN_BYTES: Final = 16 * 1024 * 1024
"""Most bytes one call scans. A transcript whose last 16 MiB hold no assistant usage and no
compaction boundary gives no reading rather than a slow hook."""

ANCHOR_BYTES: Final = 32
"""Bytes just before the cursor offset remembered to detect a file rewritten in place."""

CURSOR_VERSION: Final = 1
FORMAT_CLAUDE_CODE: Final = "claude-code"
FORMAT_CODEX: Final = "codex"

# Indirection so tests can observe which lines get parsed; also avoids an attribute lookup.
_loads: Callable[[bytes], Any] = loads_bytes


_FIELD_ORDER: Final = (
    "format", "offset", "dev", "ino", "size", "anchor", "usage_tokens", "usage_window", "model",
    "compacted", "post_tokens", "message_id", "request_id", "rejected",
)  # fmt: skip


class TranscriptCursor(FrozenRecord):
    """Where a reader stopped in one transcript file, and what it had concluded there.

    ``offset`` is the byte offset of the next unread complete line; ``dev``/``ino``/``size``
    and ``anchor`` (hex of the bytes just before ``offset``) detect rotation, truncation or a
    rewrite, after which the file is read afresh. The remaining fields are the last decisive
    event before ``offset``: a usage (``usage_tokens``, ``usage_window`` when the file
    declares one, ``model``, ``message_id``/``request_id`` of the counted line, so streaming
    repeats of one API call replace it), or a compaction boundary after it (``compacted``,
    with ``post_tokens`` when recorded), or an impossible record (``rejected``: why; the
    reading is then unknown, never the figure). Immutable; serialize with :meth:`to_json`.
    """

    __slots__ = _FIELD_ORDER

    format: str
    offset: int
    dev: int
    ino: int
    size: int
    anchor: str
    usage_tokens: int | None
    usage_window: int | None
    model: str | None
    compacted: bool
    post_tokens: int | None
    message_id: str | None
    request_id: str | None
    rejected: str | None

    def __init__(
        self,
        format: str = FORMAT_CLAUDE_CODE,
        offset: int = 0,
        dev: int = 0,
        ino: int = 0,
        size: int = 0,
        anchor: str = "",
        usage_tokens: int | None = None,
        usage_window: int | None = None,
        model: str | None = None,
        compacted: bool = False,
        post_tokens: int | None = None,
        message_id: str | None = None,
        request_id: str | None = None,
        rejected: str | None = None,
    ) -> None:
        values = (format, offset, dev, ino, size, anchor, usage_tokens, usage_window, model,
                  compacted, post_tokens, message_id, request_id, rejected)  # fmt: skip
        self._set(**dict(zip(_FIELD_ORDER, values, strict=True)))

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict (store it between hook calls)."""
        return {"v": CURSOR_VERSION, **self.as_dict()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> TranscriptCursor:
        """The cursor stored by :meth:`to_json` (a dict or its JSON text); BadInput if malformed."""
        if isinstance(data, str):
            try:
                data = loads(data)
            except ValueError as exc:
                raise BadInput(f"transcript cursor: not JSON ({exc})") from None
        if not isinstance(data, Mapping):
            raise BadInput("transcript cursor: must be a JSON object")
        if data.get("v") != CURSOR_VERSION:
            raise BadInput(f"transcript cursor v: unsupported version {data.get('v')!r}")
        kwargs: dict[str, Any] = {}
        for name, kinds in _CURSOR_FIELDS.items():
            value = data.get(name, _DEFAULTS[name])
            if isinstance(value, bool) and bool not in kinds:
                raise BadInput(f"transcript cursor {name}: wrong type {type(value).__name__}")
            if not isinstance(value, kinds):
                raise BadInput(f"transcript cursor {name}: wrong type {type(value).__name__}")
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise BadInput(f"transcript cursor {name}: must not be negative")
            kwargs[name] = value
        return cls(**kwargs)


_NONE = type(None)
_CURSOR_FIELDS: Final[dict[str, tuple[type, ...]]] = {
    "format": (str,),
    "offset": (int,),
    "dev": (int,),
    "ino": (int,),
    "size": (int,),
    "anchor": (str,),
    "usage_tokens": (int, _NONE),
    "usage_window": (int, _NONE),
    "model": (str, _NONE),
    "compacted": (bool,),
    "post_tokens": (int, _NONE),
    "message_id": (str, _NONE),
    "request_id": (str, _NONE),
    "rejected": (str, _NONE),
}
_DEFAULTS: Final[dict[str, Any]] = TranscriptCursor().as_dict()


class Event:
    """A decisive line: a usage (``tokens``), a compaction boundary (``boundary``), or a
    usage record whose figures are impossible (``rejected``: why)."""

    # A plain slotted class, not a dataclass: building dataclasses costs import time on
    # the hook hot path, and this one is internal.
    __slots__ = ("boundary", "message_id", "model", "post_tokens", "rejected", "request_id",
                 "tokens", "window")  # fmt: skip

    def __init__(
        self,
        *,
        boundary: bool,
        tokens: int | None = None,
        window: int | None = None,
        model: str | None = None,
        message_id: str | None = None,
        request_id: str | None = None,
        post_tokens: int | None = None,
        rejected: str | None = None,
    ) -> None:
        self.boundary = boundary
        self.rejected = rejected
        self.tokens = tokens
        self.window = window
        self.model = model
        self.message_id = message_id
        self.request_id = request_id
        self.post_tokens = post_tokens

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Event({fields})"


Classifier = Callable[[bytes], "Event | None"]
"""Turns one complete line into a decisive event, or None for any other (or unparseable) line."""


def count(value: object) -> int | None:
    """A non-negative token count (JSON may write 12.0), else None. bool is not a count."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return int(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def classify_claude_line(line: bytes) -> Event | None:
    """A main-chain assistant usage, a main-chain compaction boundary, or None."""
    # Cheap byte test first: most lines are user/tool output and never need parsing.
    if b'"usage"' not in line and b"compact_boundary" not in line:
        return None
    try:
        obj = _loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    # Sidechain and subagent lines describe another context window, not this body's.
    if obj.get("isSidechain") is True or obj.get("agentId"):
        return None
    kind = obj.get("type")
    if kind == "system":
        if obj.get("subtype") != "compact_boundary":
            return None
        meta = obj.get("compactMetadata")
        post = count(meta.get("postTokens")) if isinstance(meta, dict) else None
        return Event(boundary=True, post_tokens=post)
    if kind != "assistant" or obj.get("isApiErrorMessage"):
        return None
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    model = _text(message.get("model"))
    if model == "<synthetic>":
        # Claude Code's locally made messages (interruptions, errors) carry all-zero usage.
        return None
    tokens = _context_tokens(message.get("usage"))
    if tokens is None:
        return None
    return Event(
        boundary=False,
        tokens=tokens,
        model=model,
        message_id=_text(message.get("id")),
        request_id=_text(obj.get("requestId")),
    )


def _context_tokens(usage: object) -> int | None:
    """input + cache_creation + cache_read; None unless input_tokens is a count."""
    if not isinstance(usage, dict):
        return None
    total = count(usage.get("input_tokens"))
    if total is None:
        return None
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        value = usage.get(key)
        if value is not None:
            extra = count(value)
            if extra is None:
                return None
            total += extra
    return total


def _is_complete(line: bytes) -> bool:
    """Whether a newline-terminated last line is a whole JSON value, safe to consume."""
    if line[:1] == b"{" and line.rstrip()[-1:] == b"}":
        # How the writers emit every record. Not parsed here: the last line is often a
        # megabyte of tool output, and lines that matter are parsed by the classifier.
        return True
    try:
        _loads(line)
    except ValueError:
        return False
    return True


class _Backward:
    """Yields the lines of ``[start, end)`` of a file newest first, reading more as needed.

    Only the newest piece may lack its newline (``terminated`` False). Stops, with
    ``capped`` set, once ``cap`` bytes have been read without reaching ``start``.
    """

    def __init__(self, fd: int, start: int, end: int, first: int, cap: int) -> None:
        self.fd, self.start, self.end = fd, start, end
        self.step = max(1, first)
        self.cap = max(cap, self.step)
        self.capped = False

    def _pread(self, length: int, offset: int) -> bytes:
        chunks: list[bytes] = []
        while length > 0:
            chunk = os.pread(self.fd, length, offset)
            if not chunk:
                break
            chunks.append(chunk)
            length -= len(chunk)
            offset += len(chunk)
        return b"".join(chunks)

    def lines(self) -> Iterator[tuple[int, bytes, bool]]:
        pos = self.end  # absolute offset of buf[0]
        buf = b""
        hi = 0  # buf[:hi] is not yet yielded
        newest = True
        while True:
            # The piece ending at hi: its own newline (if any) is buf[hi - 1].
            terminated = hi > 0 and buf[hi - 1 : hi] == b"\n"
            search_end = hi - 1 if terminated else hi
            idx = buf.rfind(b"\n", 0, search_end) if search_end > 0 else -1
            if idx >= 0 or (pos == self.start and hi > 0):
                line_start = idx + 1
                if newest or terminated:
                    body_end = hi - 1 if terminated else hi
                    yield pos + line_start, buf[line_start:body_end], terminated
                newest = False
                hi = line_start
                continue
            if pos == self.start:
                return
            if self.end - pos >= self.cap:
                self.capped = True
                return
            new_pos = max(self.start, pos - self.step, self.end - self.cap)
            self.step *= 2
            buf = self._pread(pos - new_pos, new_pos) + buf[:hi]
            hi = len(buf)
            pos = new_pos


class _Scan:
    __slots__ = ("event", "offset", "reached_start")

    def __init__(self, offset: int, event: Event | None, reached_start: bool) -> None:
        self.offset, self.event, self.reached_start = offset, event, reached_start


def _scan(fd: int, start: int, end: int, classify: Classifier, tail_bytes: int) -> _Scan:
    """Find the consumable end of ``[start, end)`` and the newest decisive line in it."""
    walker = _Backward(fd, start, end, tail_bytes, MAX_SCAN_BYTES)
    offset: int | None = None
    for line_start, line, terminated in walker.lines():
        if offset is None:
            if not terminated:
                continue  # still being written: leave it for the next call
            if not _is_complete(line):
                # A torn or not-yet-valid last line is re-read next time, not consumed.
                offset = line_start
                continue
            offset = line_start + len(line) + 1
        event = classify(line)
        if event is not None:
            return _Scan(offset=offset, event=event, reached_start=False)
    if offset is None:
        # No complete line (a single unterminated line longer than the cap is being written):
        # stay put so that line is read whole once it ends.
        offset = start
    return _Scan(offset=offset, event=None, reached_start=not walker.capped)


def _anchor(fd: int, offset: int) -> str:
    length = min(ANCHOR_BYTES, offset)
    if length == 0:
        return ""
    return os.pread(fd, length, offset - length).hex()


def advance(
    path: str | os.PathLike[str],
    cursor: TranscriptCursor | None,
    classify: Classifier,
    fmt: str,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> TranscriptCursor:
    """Read what is new in ``path`` since ``cursor`` and return the cursor after it.

    Shared by the Claude Code and Codex readers. A missing file gives back the cursor as it
    was (or an empty one); other OS errors propagate.
    """
    if tail_bytes <= 0:
        raise BadInput(f"tail_bytes: must be positive, got {tail_bytes!r}")
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return cursor if cursor is not None else TranscriptCursor(format=fmt)
    try:
        st = os.fstat(fd)
        size = st.st_size
        base = cursor if cursor is not None and _continues(fd, cursor, fmt, st) else None
        start = base.offset if base is not None else 0
        scan = _scan(fd, start, size, classify, tail_bytes)
        if scan.event is not None:
            state = _from_event(scan.event)
        elif scan.reached_start and base is not None:
            state = base
        else:
            state = TranscriptCursor(format=fmt)
        return state.replace(
            format=fmt,
            offset=scan.offset,
            dev=st.st_dev,
            ino=st.st_ino,
            size=size,
            anchor=_anchor(fd, scan.offset),
        )
    finally:
        os.close(fd)


def _continues(fd: int, cursor: TranscriptCursor, fmt: str, st: os.stat_result) -> bool:
    """Whether ``cursor`` still describes a prefix of this file."""
    if cursor.format != fmt or (cursor.dev, cursor.ino) != (st.st_dev, st.st_ino):
        return False
    if st.st_size < cursor.size or st.st_size < cursor.offset:
        return False
    return _anchor(fd, cursor.offset) == cursor.anchor


def _from_event(event: Event) -> TranscriptCursor:
    if event.boundary:
        # A boundary voids the usage before it. Nothing is carried over (not even the model),
        # so an incremental read and a fresh read of the same bytes always agree; callers
        # pass ``model`` / ``declared_window`` for the window.
        return TranscriptCursor(compacted=True, post_tokens=event.post_tokens)
    if event.rejected is not None:
        # An impossible record (a Codex estimate around a compaction): the fill is unknown
        # until the next credible usage, never the figure it shows.
        return TranscriptCursor(rejected=event.rejected, model=event.model)
    return TranscriptCursor(
        usage_tokens=event.tokens,
        usage_window=event.window,
        model=event.model,
        message_id=event.message_id,
        request_id=event.request_id,
    )


def reading_from_cursor(
    cursor: TranscriptCursor,
    *,
    model: str | None,
    declared_window: int | None,
    usage_source: str,
    file_window_first: bool,
) -> FillReading | None:
    """The fill a cursor's state stands for, or None (no usage yet, compacted without
    ``postTokens``, or an impossible record rejected)."""
    if cursor.rejected is not None:
        return None
    if cursor.compacted:
        used = cursor.post_tokens
        source = SOURCE_TRANSCRIPT_POST_COMPACTION
    else:
        used = cursor.usage_tokens
        source = usage_source
    if used is None:
        return None
    window = _window(cursor, model, declared_window, file_window_first)
    return FillReading(
        used_tokens=used,
        window_tokens=window,
        percent=fill_percent(used, window),
        source=source,
        model=model or cursor.model,
    )


def _window(
    cursor: TranscriptCursor, model: str | None, declared: int | None, file_first: bool
) -> int:
    declared_ok = count(declared) or None
    file_window = cursor.usage_window or None
    for candidate in (file_window, declared_ok) if file_first else (declared_ok, file_window):
        if candidate is not None:
            return candidate
    # The caller's model name may carry a [1m] marker the API model id in the file lacks.
    windows = [model_window(name) for name in (model, cursor.model) if name]
    return max(windows, default=DEFAULT_WINDOW)


def compaction_seen(old: TranscriptCursor | None, new: TranscriptCursor) -> bool:
    """Whether reading up to ``new`` met a compaction the state in ``old`` had not: the
    transcript's boundary (Claude Code ``system/compact_boundary``, a Codex ``compacted``
    record) after the last usage. The ledger starts a new context epoch once per compaction
    however many signals report it."""
    return new.compacted and (old is None or not old.compacted)


def rejection_seen(old: TranscriptCursor | None, new: TranscriptCursor) -> str | None:
    """Why the newest record was rejected as impossible, when ``old`` did not already say so."""
    if new.rejected is None or (old is not None and old.rejected == new.rejected):
        return None
    return new.rejected


def read_fill(
    path: str | os.PathLike[str],
    cursor: TranscriptCursor | None = None,
    *,
    model: str | None = None,
    declared_window: int | None = None,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> tuple[FillReading | None, TranscriptCursor]:
    """The current fill of a Claude Code transcript, and the cursor for the next call.

    With ``cursor``, reads only bytes after ``cursor.offset`` (falls back to a fresh read if
    the file was rotated, truncated or rewritten). Without, reads a tail of ``tail_bytes``,
    doubling backwards up to :data:`MAX_SCAN_BYTES` until a decisive line is found.
    ``declared_window`` (e.g. the status line's ``context_window_size``) wins over the
    window guessed from ``model`` or the transcript's model id.
    """
    new_cursor = advance(path, cursor, classify_claude_line, FORMAT_CLAUDE_CODE, tail_bytes)
    reading = reading_from_cursor(
        new_cursor,
        model=model,
        declared_window=declared_window,
        usage_source=SOURCE_TRANSCRIPT,
        file_window_first=False,
    )
    return reading, new_cursor
