"""The transcript writer: the session JSONL, line for line as Claude Code writes it.

Each line has Claude Code's envelope (``parentUuid``, ``sessionId``, ``cwd``, ``version``,
...); each API call is two streaming lines sharing ``message.id`` and ``requestId``, whose
``usage`` shows the context the call was made with.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from onstation.harness.fake_agent.common import now

CLAUDE_VERSION = "2.1.240"


class Transcript:
    """Writes the session JSONL as Claude Code does: envelope + Anthropic Messages lines."""

    def __init__(
        self, path: Path, session_id: str, cwd: Path, model: str, branch: str | None
    ) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = str(cwd)
        self.model = model
        self.branch = branch
        self.parent: str | None = None
        self.calls = 0
        self.last_tokens: int | None = None
        self.last_text = ""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _envelope(self, kind: str) -> dict[str, Any]:
        line_id = str(uuid.uuid4())
        line = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": CLAUDE_VERSION,
            "gitBranch": self.branch or "",
            "type": kind,
            "uuid": line_id,
            "timestamp": now(),
        }
        self.parent = line_id
        return line

    def _append(self, *lines: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(line) + "\n" for line in lines))

    def user_prompt(self, text: str) -> None:
        line = self._envelope("user")
        line["message"] = {"role": "user", "content": text}
        self._append(line)

    def assistant(self, tokens: int, content: list[dict[str, Any]], stop_reason: str) -> None:
        """One API call: two streaming lines sharing message.id and requestId."""
        self.calls += 1
        suffix = uuid.uuid4().hex[:20]
        input_tokens = min(3, tokens)
        creation = min(500, tokens - input_tokens)
        usage = {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": tokens - input_tokens - creation,
            "output_tokens": 120,
            "service_tier": "standard",
        }
        lines = []
        # The first line streams the text, the last one carries the tool call and stop reason.
        for part, stop in ((content[:1], None), (content, stop_reason)):
            line = self._envelope("assistant")
            line["message"] = {
                "id": f"msg_{suffix}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": part,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
            line["requestId"] = f"req_{suffix}"
            lines.append(line)
        self._append(*lines)
        self.last_tokens = tokens
        self.last_text = next((c["text"] for c in content if c.get("type") == "text"), "")

    def tool_result(
        self, tool_use_id: str, text: str, is_error: bool, result: dict[str, Any]
    ) -> None:
        line = self._envelope("user")
        line["message"] = {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_use_id,
                    "content": text,
                    "is_error": is_error,
                }
            ],
        }
        line["toolUseResult"] = result
        self._append(line)
