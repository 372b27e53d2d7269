"""The workspace configuration file, ``.onstation/config.json``, found from any directory below.

Keys (all optional)::

    {
      "node": "exec-login",            # the identity this workspace works for
      "db": "postgresql://...",        # the ledger (else ONSTATION_DB, else the default file)
      "tiers": "relief",               # "relief", "coordinator", or thresholds:
                                       # {"amber": 25, "red": 33, "critical": 38}
      "supervised": false,             # true: a team lead decides relief; no self-requests
      "effects": {...},                # effect patterns (see docs/effects.md)
      "hook_fail": "open"              # "open" (default) or "closed": an effect-capable
                                       # call the hook cannot check (ledger unreachable) is
                                       # then denied; ONSTATION_HOOK_FAIL=closed does the same
    }
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput

CONFIG_DIR = ".onstation"
CONFIG_FILE = "config.json"
_KEYS = {"node", "db", "tiers", "supervised", "effects", "hook_fail"}
#: The values of ``hook_fail`` (docs/hooks.md, "When the hook cannot check a call").
HOOK_FAIL_MODES = ("open", "closed")


@dataclass(frozen=True)
class WorkspaceConfig:
    """What one workspace's configuration file says (defaults where it is silent)."""

    path: Path | None = None
    node: str | None = None
    db: str | None = None
    tiers: Any = "relief"
    supervised: bool = False
    effects: dict[str, Any] = field(default_factory=dict)
    #: "open" or "closed" when the file says so; None when it is silent.
    hook_fail: str | None = None


def find_config(start: str | Path) -> Path | None:
    """The nearest ``.onstation/config.json`` at or above ``start``."""
    here = Path(os.path.realpath(start))
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_DIR / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def load_config(start: str | Path) -> WorkspaceConfig:
    """Read the nearest configuration file; a malformed one is a :class:`BadInput`."""
    path = find_config(start)
    if path is None:
        return WorkspaceConfig()
    from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

    raw = read_bounded(path, MAX_SMALL_JSON_BYTES, "workspace configuration")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadInput(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: must hold a JSON object")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise BadInput(f"{path}: unknown key {unknown[0]!r}")
    supervised = data.get("supervised", False)
    if not isinstance(supervised, bool):
        raise BadInput(f"{path}: supervised must be true or false")
    effects = data.get("effects", {})
    if not isinstance(effects, dict):
        raise BadInput(f"{path}: effects must be an object")
    for key in ("node", "db"):
        if key in data and not isinstance(data[key], str):
            raise BadInput(f"{path}: {key} must be a string")
    hook_fail = data.get("hook_fail")
    if hook_fail is not None and hook_fail not in HOOK_FAIL_MODES:
        raise BadInput(f"{path}: hook_fail must be one of {', '.join(HOOK_FAIL_MODES)}")
    return WorkspaceConfig(
        path=path,
        node=data.get("node"),
        db=data.get("db"),
        tiers=data.get("tiers", "relief"),
        supervised=supervised,
        effects=effects,
        hook_fail=hook_fail,
    )


def read_config_file(workspace: str | Path) -> dict[str, Any]:
    """What ``workspace/.onstation/config.json`` holds now ({} when there is none).

    Bounded like every input, and a damaged file is a :class:`BadInput`; commands that
    write it call this first, before any other write, so a refusal leaves nothing changed.
    """
    from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

    target = Path(workspace) / CONFIG_DIR / CONFIG_FILE
    if not target.is_file() or target.is_symlink():
        return {}
    raw = read_bounded(target, MAX_SMALL_JSON_BYTES, "workspace configuration")
    try:
        loaded = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadInput(f"{target}: not readable JSON ({exc}); fix or remove it") from exc
    return loaded if isinstance(loaded, dict) else {}


def write_config(
    workspace: str | Path, values: dict[str, Any], existing: dict[str, Any] | None = None
) -> Path:
    """Write (merge into) ``workspace/.onstation/config.json`` atomically."""
    from onstation.harness.files import write_inside

    if existing is None:
        existing = read_config_file(workspace)
    merged = {**existing, **{k: v for k, v in values.items() if v is not None}}
    return write_inside(workspace, [CONFIG_DIR, CONFIG_FILE], json.dumps(merged, indent=2) + "\n")
