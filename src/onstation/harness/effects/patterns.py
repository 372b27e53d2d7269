"""Which calls count as effects: the built-in recognizers, their defaults and configuration.

:class:`EffectPatterns` says which built-in families are on, which extra shell commands
(``cmd.<name>`` regexes) and which MCP tools count as effects; :func:`patterns_from_mapping`
builds one from the ``effects`` section of a config file and rejects bad config with a
:class:`~onstation.core.errors.BadInput` naming the field.
"""

from __future__ import annotations

from _collections_abc import Mapping  # as collections.abc, without collections (hot path)

from onstation.core.errors import BadInput
from onstation.core.frozen import FrozenRecord
from onstation.core.lazyre import LazyPattern

TYPE_CHECKING = False  # typing, dataclasses and re cost a Bash PreToolUse hook import time
if TYPE_CHECKING:
    import re
    from typing import Any


class CommandPattern(FrozenRecord):
    """A configured shell command that counts as an effect (``cmd.<name>``)."""

    __slots__ = ("name", "regex", "destination")  # noqa: RUF023 - field order
    name: str
    regex: re.Pattern[str]
    destination: str | None

    def __init__(self, name: str, regex: re.Pattern[str], destination: str | None = None) -> None:
        self._set(name=name, regex=regex, destination=destination)


#: Built-in recognizers that configuration can switch off.
BUILTINS: tuple[str, ...] = ("git_push", "gh", "npm_publish", "http", "mcp")

#: Words in an MCP tool name that make the call an effect.
DEFAULT_MCP_VERBS: tuple[str, ...] = ("create", "send", "post", "delete", "merge")

#: Where ``npm publish`` goes when neither the package, the environment nor an ``.npmrc``
#: names a registry.
DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org"


class EffectPatterns(FrozenRecord):
    """Which calls count as effects: built-ins, extra shell regexes, MCP verbs and globs.

    ``mcp_verbs`` is the full verb list in force (defaults plus configured ones);
    ``mcp_tools`` are ``fnmatch`` globs of full tool names that are always effects and
    ``mcp_ignore`` globs that never are (ignore wins).
    """

    __slots__ = ("builtins", "commands", "mcp_verbs", "mcp_tools", "mcp_ignore")  # noqa: RUF023 - field order
    builtins: frozenset[str]
    commands: tuple[CommandPattern, ...]
    mcp_verbs: tuple[str, ...]
    mcp_tools: tuple[str, ...]
    mcp_ignore: tuple[str, ...]

    def __init__(
        self,
        builtins: frozenset[str] = frozenset(BUILTINS),
        commands: tuple[CommandPattern, ...] = (),
        mcp_verbs: tuple[str, ...] = DEFAULT_MCP_VERBS,
        mcp_tools: tuple[str, ...] = (),
        mcp_ignore: tuple[str, ...] = (),
    ) -> None:
        self._set(builtins=builtins, commands=commands, mcp_verbs=mcp_verbs,
                  mcp_tools=mcp_tools, mcp_ignore=mcp_ignore)  # fmt: skip


DEFAULT_PATTERNS = EffectPatterns()

_CONFIG_KEYS = ("disable", "commands", "mcp_verbs", "mcp_tools", "mcp_ignore")
_COMMAND_KEYS = ("name", "regex", "destination")
_NAME_RE = LazyPattern(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_VERB_RE = LazyPattern(r"^[a-z][a-z0-9]{0,31}$")


def patterns_from_mapping(mapping: Any, *, where: str = "effects") -> EffectPatterns:
    """Build patterns from a config mapping; bad config raises :class:`BadInput`.

    Format (every key optional)::

        {"disable": ["npm_publish"],
         "commands": [{"name": "deploy", "regex": "^make deploy\\b", "destination": "prod"}],
         "mcp_verbs": ["publish"], "mcp_tools": ["mcp__pay__*"], "mcp_ignore": ["mcp__x__post_get"]}
    """
    import re  # here, not at the top: the default patterns (most hook calls) need none

    def bad(path: str, reason: str) -> BadInput:
        return BadInput(f"{path}: {reason}", field=path)

    if not isinstance(mapping, Mapping):
        raise bad(where, "must be a mapping")
    for key in mapping:
        if key not in _CONFIG_KEYS:
            raise bad(f"{where}.{key}", f"unknown key (expected one of {', '.join(_CONFIG_KEYS)})")

    def str_list(key: str) -> list[str]:
        value = mapping.get(key, [])
        if not isinstance(value, list):
            raise bad(f"{where}.{key}", "must be a list of strings")
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise bad(f"{where}.{key}[{index}]", "must be a non-empty string")
        return [item.strip() for item in value]

    disabled = str_list("disable")
    for index, builtin in enumerate(disabled):
        if builtin not in BUILTINS:
            raise bad(
                f"{where}.disable[{index}]", f"{builtin!r} is not one of {', '.join(BUILTINS)}"
            )
    verbs = str_list("mcp_verbs")
    for index, verb in enumerate(verbs):
        if not _VERB_RE.match(verb):
            raise bad(f"{where}.mcp_verbs[{index}]", f"{verb!r} must be one lower-case word")
    mcp_tools = str_list("mcp_tools")
    mcp_ignore = str_list("mcp_ignore")

    raw_commands = mapping.get("commands", [])
    if not isinstance(raw_commands, list):
        raise bad(f"{where}.commands", "must be a list of mappings")
    commands: list[CommandPattern] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw_commands):
        path = f"{where}.commands[{index}]"
        if not isinstance(entry, Mapping):
            raise bad(path, "must be a mapping with name and regex")
        for key in entry:
            if key not in _COMMAND_KEYS:
                raise bad(f"{path}.{key}", f"unknown key (expected {', '.join(_COMMAND_KEYS)})")
        cmd_name = entry.get("name")
        if not isinstance(cmd_name, str) or not _NAME_RE.match(cmd_name):
            raise bad(f"{path}.name", "must match [a-z0-9][a-z0-9_-]{0,63}")
        if cmd_name in seen:
            raise bad(f"{path}.name", f"{cmd_name!r} is used twice")
        seen.add(cmd_name)
        regex = entry.get("regex")
        if not isinstance(regex, str) or not regex or len(regex) > 1000:
            raise bad(f"{path}.regex", "must be a non-empty string of at most 1000 characters")
        try:
            compiled = re.compile(regex)
        except re.error as exc:
            raise bad(f"{path}.regex", f"invalid regular expression ({exc})") from exc
        destination = entry.get("destination")
        if destination is not None and (
            not isinstance(destination, str) or not destination.strip() or len(destination) > 2048
        ):
            raise bad(
                f"{path}.destination", "must be a non-empty string of at most 2048 characters"
            )
        dest = destination.strip() if isinstance(destination, str) else None
        commands.append(CommandPattern(cmd_name, compiled, dest))

    base_verbs = () if "mcp" in disabled else DEFAULT_MCP_VERBS
    return EffectPatterns(
        builtins=frozenset(b for b in BUILTINS if b not in disabled),
        commands=tuple(commands),
        mcp_verbs=tuple(dict.fromkeys([*base_verbs, *verbs])),
        mcp_tools=tuple(mcp_tools),
        mcp_ignore=tuple(mcp_ignore),
    )
