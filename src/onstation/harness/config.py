"""The workspace configuration file, ``.onstation/config.json``, found from any directory below.

Keys (all optional)::

    {
      "node": "exec-login",            # the identity this workspace works for
      "db": "postgresql://...",        # the ledger (else ONSTATION_DB, else the default file)
      "tiers": "relief",               # "relief", "coordinator", or thresholds:
                                       # {"amber": 25, "red": 33, "critical": 38}
      "supervised": false,             # true: a team lead decides relief; no self-requests
      "effects": {...}                 # effect patterns (see docs/effects.md)
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
_KEYS = {"node", "db", "tiers", "supervised", "effects"}


@dataclass(frozen=True)
class WorkspaceConfig:
    """What one workspace's configuration file says (defaults where it is silent)."""

    path: Path | None = None
    node: str | None = None
    db: str | None = None
    tiers: Any = "relief"
    supervised: bool = False
    effects: dict[str, Any] = field(default_factory=dict)


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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
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
    return WorkspaceConfig(
        path=path,
        node=data.get("node"),
        db=data.get("db"),
        tiers=data.get("tiers", "relief"),
        supervised=supervised,
        effects=effects,
    )


def write_config(workspace: str | Path, values: dict[str, Any]) -> Path:
    """Write (merge into) ``workspace/.onstation/config.json`` atomically."""
    from onstation.harness.files import write_inside

    existing: dict[str, Any] = {}
    target = Path(workspace) / CONFIG_DIR / CONFIG_FILE
    if target.is_file() and not target.is_symlink():
        loaded = json.loads(target.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            existing = loaded
    merged = {**existing, **{k: v for k, v in values.items() if v is not None}}
    return write_inside(workspace, [CONFIG_DIR, CONFIG_FILE], json.dumps(merged, indent=2) + "\n")
