"""The package-publishing family: ``npm publish``, ``pnpm publish``, ``yarn (npm) publish``.

The identity is the registry and the package's name and version, read from the
``package.json`` (or the tarball) being published.
"""

from __future__ import annotations

import os
import re
from _collections_abc import Mapping  # as collections.abc, without collections (hot path)
from typing import Any

from onstation.harness.effects.context import (
    EffectCall,
    _parse_opts,
    _read_text,
    _Seg,
    _Word,
)
from onstation.harness.effects.patterns import DEFAULT_NPM_REGISTRY
from onstation.harness.effects.shell import _word_path

_NPM_VALUE = frozenset(
    {
        "--registry", "--tag", "--access", "--otp", "--workspace", "--prefix", "--dir",
        "--userconfig", "--provenance-file", "--publish-branch", "--report-summary",
        "--filter",
    }
)  # fmt: skip


def _classify_publish(seg: _Seg, prog: str, args: list[_Word]) -> list[EffectCall]:
    parsed = _parse_opts(args, _NPM_VALUE, {"-w": "--workspace", "-C": "--dir"})
    pos = [w.text for w in parsed.positionals]
    # yarn berry spells it `yarn npm publish`; the others `X publish`.
    if prog == "yarn" and pos[:2] == ["npm", "publish"]:
        targets = pos[2:]
    elif pos[:1] == ["publish"]:
        targets = pos[1:]
    else:
        return []
    if parsed.has("--dry-run"):
        return []
    notes: list[str] = []
    base = seg.cwd
    for opt in ("--prefix", "--dir"):
        value = parsed.last(opt)
        if value:
            base = _word_path(_Word(value), base)
    target = targets[0] if targets else None
    workspace = parsed.has("--workspace", "--workspaces", "--recursive", "-r", "--filter")
    manifest: dict[str, Any] | None = None
    pkg_dir: str | None = base
    if target and re.match(r"^[a-z+]+://", target):
        notes.append(f"publishing a remote tarball {target!r}: name and version unresolved")
        pkg_dir = None
    elif target and target.endswith((".tgz", ".tar.gz")):
        path = _word_path(_Word(target), base)
        manifest = _tarball_manifest(path, notes) if path else None
        pkg_dir = os.path.dirname(path) if path else None
    else:
        if target:
            pkg_dir = _word_path(_Word(target), base)
        if workspace:
            notes.append("workspace or recursive publish: packages not enumerated")
        elif pkg_dir is not None:
            manifest = _json_file(os.path.join(pkg_dir, "package.json"), notes)
        else:
            notes.append("package directory unknown")
    name = manifest.get("name") if manifest else None
    version = manifest.get("version") if manifest else None
    registry = parsed.last("--registry") or _npm_registry(manifest, name, pkg_dir, seg.env, notes)
    arguments: dict[str, Any] = {
        "name": name if isinstance(name, str) else None,
        "version": version if isinstance(version, str) else None,
    }
    if workspace:
        arguments["workspace"] = parsed.values("--workspace", "--filter") or True
    return [
        seg.effect(
            "npm.publish",
            registry,
            arguments,
            f"{prog} publish {arguments['name'] or '?'}@{arguments['version'] or '?'} "
            f"to {registry}",
            package_dir=pkg_dir,
            notes=notes or None,
        )
    ]


def _json_file(path: str, notes: list[str]) -> dict[str, Any] | None:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        notes.append(f"{path}: {type(exc).__name__}")
        return None
    if not isinstance(data, dict):
        notes.append(f"{path}: not a JSON object")
        return None
    return data


def _tarball_manifest(path: str, notes: list[str]) -> dict[str, Any] | None:
    import json
    import tarfile

    try:
        with tarfile.open(path, "r:*") as tar:
            member = tar.extractfile("package/package.json")
            data = json.loads(member.read()) if member else None
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        notes.append(f"{path}: {type(exc).__name__}")
        return None
    return data if isinstance(data, dict) else None


def _npm_registry(
    manifest: dict[str, Any] | None,
    name: Any,
    pkg_dir: str | None,
    env: Mapping[str, str],
    notes: list[str],
) -> str:
    publish_config = manifest.get("publishConfig") if manifest else None
    if isinstance(publish_config, dict) and isinstance(publish_config.get("registry"), str):
        notes.append("registry from package.json publishConfig")
        return str(publish_config["registry"])
    for key in ("npm_config_registry", "NPM_CONFIG_REGISTRY"):
        value = env.get(key) or os.environ.get(key)
        if value:
            notes.append(f"registry from {key}")
            return value
    scope = name.split("/", 1)[0] if isinstance(name, str) and name.startswith("@") else None
    rcs = [os.path.join(pkg_dir, ".npmrc")] if pkg_dir else []
    rcs.append(os.path.expanduser("~/.npmrc"))
    for rc in rcs:
        text = _read_text(rc, None)
        if text is None:
            continue
        found: dict[str, str] = {}
        for line in text.splitlines():
            key, eq, value = line.partition("=")
            if eq:
                found[key.strip()] = value.strip()
        for key in ([f"{scope}:registry"] if scope else []) + ["registry"]:
            if found.get(key):
                notes.append(f"registry from {rc} ({key})")
                return found[key]
    return DEFAULT_NPM_REGISTRY
