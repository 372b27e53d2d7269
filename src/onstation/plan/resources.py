"""Read-only access to the package data shipped with :mod:`onstation.plan`."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from onstation.core.canonical import loads_strict


def data_dir(kind: str) -> Traversable:
    """One of ``schemas``, ``examples``, ``templates``, ``tables``."""
    if kind not in {"schemas", "examples", "templates", "tables"}:
        raise ValueError(f"unknown package data directory {kind!r}")
    return resources.files("onstation.plan").joinpath(kind)


def read_text(kind: str, name: str) -> str:
    """The text of one package data file."""
    return data_dir(kind).joinpath(name).read_text(encoding="utf-8")


def read_json(kind: str, name: str) -> Any:
    """One package data file parsed strictly (no duplicate keys, no NaN)."""
    return loads_strict(read_text(kind, name), f"{kind}/{name}")


def names(kind: str, suffix: str = "") -> list[str]:
    """File names in a package data directory, sorted."""
    return sorted(p.name for p in data_dir(kind).iterdir() if p.name.endswith(suffix))
