"""Incremental context-fill reading from a Codex CLI rollout file (JSONL).

Rollout lines are ``{"timestamp", "type", "payload"}``. Fill comes from the newest
``event_msg`` whose ``payload.type`` is ``token_count`` with a non-null ``info``:
``info.last_token_usage.total_tokens`` (or input + output when the total is missing; cached
input is already inside ``input_tokens``) over ``info.model_context_window`` (else the
caller's declared window, else the model's default, else ``DEFAULT_WINDOW``). A top-level
``compacted`` record after it voids that usage until the next ``token_count``.

Same cursor discipline as :mod:`onstation.harness.transcript` (the cursor class is shared,
with ``format == "codex"``). Standard library only: imported on the hook hot path.
"""

from __future__ import annotations

import os

from onstation.core.hull import SOURCE_CODEX_TOKEN_COUNT, FillReading
from onstation.harness import transcript as _t
from onstation.harness.transcript import (
    DEFAULT_TAIL_BYTES,
    FORMAT_CODEX,
    Event,
    TranscriptCursor,
    count,
    reading_from_cursor,
)

__all__ = ["DEFAULT_TAIL_BYTES", "CodexCursor", "classify_codex_line", "read_fill"]

CodexCursor = TranscriptCursor
"""The cursor of a rollout file is a :class:`TranscriptCursor` with ``format == "codex"``."""


def classify_codex_line(line: bytes) -> Event | None:
    """A ``token_count`` usage, a ``compacted`` boundary, or None."""
    if b"token_count" not in line and b"compacted" not in line:
        return None
    try:
        obj = _t._loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if kind == "compacted":
        return Event(boundary=True)
    payload = obj.get("payload")
    if kind != "event_msg" or not isinstance(payload, dict):
        return None
    if payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    if not isinstance(info, dict):
        return None  # info is null before the first response of a turn
    last = info.get("last_token_usage")
    if not isinstance(last, dict):
        return None
    model = info.get("model")
    model = model if isinstance(model, str) and model else None
    window = count(info.get("model_context_window")) or None
    impossible = _impossible_usage(last)
    if impossible is not None:
        return Event(boundary=False, rejected=impossible, window=window, model=model)
    tokens = count(last.get("total_tokens"))
    if tokens is None:
        input_tokens = count(last.get("input_tokens"))
        output_tokens = count(last.get("output_tokens"))
        if input_tokens is None:
            return None
        tokens = input_tokens + (output_tokens or 0)
    return Event(boundary=False, tokens=tokens, window=window, model=model)


#: The components of a ``last_token_usage`` (cached input is part of input, reasoning part
#: of output; total = input + output).
_COMPONENTS = ("input_tokens", "cached_input_tokens", "output_tokens",
               "reasoning_output_tokens", "total_tokens")  # fmt: skip


def _impossible_usage(usage: dict[str, object]) -> str | None:
    """Why a ``last_token_usage`` cannot be a real API call's usage, or None.

    Codex writes estimate records around a compaction: every component zero except
    ``total_tokens``. Any record whose components do not add up (total is neither input +
    output nor input + output + reasoning),
    hold a part larger than its whole (cached > input, reasoning > output), or hold a
    negative or non-numeric count, is refused as unknown, never read as a fill.
    """
    values: dict[str, int] = {}
    for key in _COMPONENTS:
        raw = usage.get(key)
        if raw is None:
            continue
        counted = count(raw)
        if counted is None:
            return f"codex.token_count: {key} {raw!r} is not a token count"
        values[key] = counted
    total = values.get("total_tokens")
    inp, out = values.get("input_tokens"), values.get("output_tokens")
    reasoning = values.get("reasoning_output_tokens", 0)
    # Reasoning is part of output in Codex's own records; some writers count it beside it.
    if (
        total is not None
        and inp is not None
        and out is not None
        and total not in (inp + out, inp + out + reasoning)
    ):
        return (
            f"codex.token_count: components do not add up (input {inp} + output {out} != "
            f"total {total})"
        )
    if values.get("cached_input_tokens", 0) > (inp if inp is not None else total or 0):
        return "codex.token_count: cached input exceeds input"
    if out is not None and reasoning > out and total != (inp or 0) + out + reasoning:
        return "codex.token_count: reasoning output exceeds output"
    return None


def read_fill(
    path: str | os.PathLike[str],
    cursor: TranscriptCursor | None = None,
    *,
    model: str | None = None,
    declared_window: int | None = None,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> tuple[FillReading | None, TranscriptCursor]:
    """The current fill of a Codex rollout file, and the cursor for the next call.

    The window the rollout itself records (``model_context_window``, which already folds in
    Codex's config overrides) wins over ``declared_window``, which wins over ``model``.
    """
    new_cursor = _t.advance(path, cursor, classify_codex_line, FORMAT_CODEX, tail_bytes)
    reading = reading_from_cursor(
        new_cursor,
        model=model,
        declared_window=declared_window,
        usage_source=SOURCE_CODEX_TOKEN_COUNT,
        file_window_first=True,
    )
    return reading, new_cursor
