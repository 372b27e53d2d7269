"""Where the host compacts a body's context, read from where the host documents its settings.

Claude Code (env-vars and model-config docs): ``DISABLE_AUTO_COMPACT`` / ``DISABLE_COMPACT``
turn automatic compaction off; ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (a plain integer) sets the
auto-compact window and wins over the ``autoCompactWindow`` setting;
``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`` (1-100) lowers the point. Variables set in a settings
file's ``env`` block are written into Claude Code's environment, which hooks and the status
line inherit, so the environment is read first; ``autoCompactWindow`` is read from the
settings files (local project, project, user; the first that sets it). Codex: the
``model_auto_compact_token_limit`` of ``$CODEX_HOME/config.toml``.

The arithmetic is :mod:`onstation.core.compaction`'s; this module only reads.
"""

from __future__ import annotations

import os
from _collections_abc import Mapping  # as collections.abc, without collections (hot path)

from onstation.core.compaction import (
    claude_compaction_point,
    codex_compaction_point,
    compaction_warning,
    tiers_past_compaction,
)
from onstation.core.fastjson import loads

TYPE_CHECKING = False  # imported on the hook path: typing costs import time
if TYPE_CHECKING:
    from onstation.core.hull import TierPolicy

#: Settings files larger than this are not read (a hook must answer in bounded time).
_MAX_SETTINGS_BYTES = 1 << 20


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _plain_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _window_setting(value: object) -> int | None:
    """``autoCompactWindow`` as the /autocompact command writes it: a token count, ``500k``,
    ``1M``, or a bare 100-1000 meaning thousands (model-config docs)."""
    if isinstance(value, str):
        text = value.strip().lower()
        for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
            if text.endswith(suffix):
                number = text[:-1].strip()
                try:
                    return int(float(number) * factor) if number else None
                except ValueError:
                    return None
    tokens = _plain_int(value)
    if tokens is not None and 100 <= tokens <= 1000:
        return tokens * 1000
    return tokens


def _json_file(path: str) -> Mapping[str, object] | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_SETTINGS_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_SETTINGS_BYTES:
        return None
    try:
        data = loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, Mapping) else None


def claude_settings_files(project: str | None, env: Mapping[str, str]) -> list[str]:
    """Claude Code's settings files that may set ``autoCompactWindow``, highest precedence
    first: the project's local and shared settings, then the user's."""
    files: list[str] = []
    if project:
        files += [os.path.join(project, ".claude", "settings.local.json"),
                  os.path.join(project, ".claude", "settings.json")]  # fmt: skip
    config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    files.append(os.path.join(config, "settings.json"))
    return files


def claude_point(
    window: int, *, project: str | None = None, env: Mapping[str, str] | None = None
) -> float | None:
    """Where Claude Code auto-compacts a ``window``-token context, in percent of it (None:
    never, automatic compaction is off)."""
    env = os.environ if env is None else env
    disabled = _truthy(env.get("DISABLE_AUTO_COMPACT")) or _truthy(env.get("DISABLE_COMPACT"))
    pct: float | None = None
    raw_pct = env.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")
    if raw_pct:
        try:
            pct = float(raw_pct)
        except ValueError:
            pct = None
    chosen = _plain_int(env.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW"))
    if chosen is None and not disabled:
        for path in claude_settings_files(project, env):
            settings = _json_file(path)
            if settings is not None and "autoCompactWindow" in settings:
                chosen = _window_setting(settings["autoCompactWindow"])
                break
    return claude_compaction_point(
        window, auto_compact_window=chosen, pct_override=pct, disabled=disabled
    )


def codex_point(window: int, *, env: Mapping[str, str] | None = None) -> float | None:
    """Where Codex compacts, from ``model_auto_compact_token_limit`` in its config.toml (None:
    not set, or not readable)."""
    env = os.environ if env is None else env
    home = env.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
    try:
        import tomllib

        with open(os.path.join(home, "config.toml"), "rb") as fh:
            raw = fh.read(_MAX_SETTINGS_BYTES + 1)
        if len(raw) > _MAX_SETTINGS_BYTES:
            return None
        config = tomllib.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    return codex_compaction_point(window, _plain_int(config.get("model_auto_compact_token_limit")))


def host_point(
    harness: str, window: int, *, project: str | None = None,
    env: Mapping[str, str] | None = None,
) -> float | None:  # fmt: skip
    """The compaction point of ``harness`` (an adapter name) for a ``window``-token context."""
    if harness == "codex":
        return codex_point(window, env=env)
    if harness == "claude-code":
        return claude_point(window, project=project, env=env)
    return None


def compaction_report(
    harness: str, window: int, policy: TierPolicy, *, project: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, object]:  # fmt: skip
    """What ``onstation doctor`` (or a hull status) shows about the host's compaction point:
    the point (percent of ``window``, None: never or unknown), the tiers of ``policy`` past
    it, and the warning line (None when Red and Critical come before it)."""
    point = host_point(harness, window, project=project, env=env)
    return {
        "window": window,
        "compaction_point": None if point is None else round(point, 2),
        "tiers_past_compaction": [t.value for t in tiers_past_compaction(policy, point)],
        "warning": compaction_warning(policy, point),
    }
