"""What the fake agent is told to do (its options) and the model windows it can claim."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

MODEL_200K = "claude-sonnet-4-5-20250929"
MODEL_1M = MODEL_200K + "[1m]"
#: The real context windows, each with the model id that makes a transcript reader see it.
WINDOWS = {200_000: MODEL_200K, 1_000_000: MODEL_1M}


@dataclass
class Options:
    """What the fake agent was told to do (see ``onstation fake-agent --help``)."""

    workspace: Path
    node: str | None = None
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    steps: int = 12
    tokens_per_step: int = 8000
    start_tokens: int = 15000
    window: int = 200_000
    push_every: int = 4
    db: str | None = None
    crash_at: int | None = None
    crash_after_dispatch: int | None = None
    hang_at: int | None = None
    wake_after_fence: int | None = None
    fence_wait: float = 600.0
    heartbeat: float | None = None
    log: Path | None = None
    transcript: Path | None = None
    prompt: str | None = None
    coordinator: str | None = None
    step_seconds: float = 0.0
    scratch_workspace: bool = False
