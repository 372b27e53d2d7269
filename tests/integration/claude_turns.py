"""Claude Code transcript lines for the hook tests: one assistant turn with its usage."""

from __future__ import annotations

import json
from pathlib import Path


def assistant_turn(transcript: Path, n: int, tokens: int, session_id: str = "sess-1") -> None:
    """Append the ``n``-th assistant turn, ``tokens`` of context used, to ``transcript``."""
    usage = {"input_tokens": 3, "cache_read_input_tokens": tokens - 3, "output_tokens": 5}
    with transcript.open("a") as fh:
        fh.write(json.dumps({
            "type": "assistant", "sessionId": session_id, "uuid": f"u{n}", "requestId": f"r{n}",
            "message": {"id": f"m{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                        "usage": usage, "content": []}}) + "\n")  # fmt: skip
