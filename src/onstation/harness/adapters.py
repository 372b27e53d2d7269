"""One adapter per harness: what differs between the hosts onstation serves.

A :class:`HarnessAdapter` holds every fact about a host that the rest of onstation branches
on: its name and the other names it goes by, the program that runs it, the hook events
installed into it and where its settings live, what its Stop hook must print when onstation
has nothing to say, which reader reads its context fill, the harness name its bodies record
and its capsules carry, and which launcher starts a successor under it. Code elsewhere asks
the adapter (:func:`adapter`, :func:`find`) instead of comparing harness names.

A :class:`HookCall` is one hook payload parsed once into typed fields, defensively: a field
of the wrong type counts as absent (None), as every reader of the payload did before.

Standard library only at import (the hook hot path imports this module): the transcript
readers, the launchers and the error classes are imported when first asked for.
"""

from __future__ import annotations

from onstation.core.frozen import FrozenRecord

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping
    from typing import Any

    from onstation.core.hull import FillReading
    from onstation.harness.launch import Launcher
    from onstation.harness.transcript import TranscriptCursor

    ReadFill = Callable[..., tuple[FillReading | None, TranscriptCursor]]


# -- transcript readers and launchers, imported on first use ------------------------------


def _claude_transcript() -> ReadFill:
    from onstation.harness.transcript import read_fill

    return read_fill


def _codex_rollout() -> ReadFill:
    from onstation.harness.codex import read_fill

    return read_fill


def _claude_launcher(model: str | None) -> Launcher:
    from onstation.harness.launch import ClaudeLauncher

    return ClaudeLauncher(model)


def _codex_launcher(model: str | None) -> Launcher:
    from onstation.harness.launch import CodexLauncher

    return CodexLauncher(model)


def _fake_launcher(model: str | None) -> Launcher:
    from onstation.harness.launch import FakeLauncher

    return FakeLauncher()  # the fake agent has one model of its own


# -- the adapter ----------------------------------------------------------------------------


#: The adapter's fields, in order (``as_dict``, ``repr``).
_ADAPTER_FIELDS = (
    "name", "aliases", "plan_harness", "source_harness", "session_harness", "program",
    "hook_events", "settings_env", "settings_dir", "settings_file", "installs_statusline",
    "installs_skills", "quiet_stop", "fill_reader", "make_launcher", "project_settings_file",
)  # fmt: skip


class HarnessAdapter(FrozenRecord):
    """The facts of one harness (immutable).

    - ``name``: the harness's own name (``onstation hook NAME``, ``--harness NAME``);
      ``aliases``: other names it goes by (the resurrection plan's ``codex-cli``).
    - ``plan_harness``: its name in plans, capacity evidence and on a launcher
      (``Launcher.harness``); ``source_harness``: the ``sourceHarness`` of a capsule built
      for a body that runs under it; ``session_harness``: the hook harness its bodies speak
      (a fake agent speaks Claude Code's hooks), recorded on their sessions.
    - ``program``: the executable a successor needs on PATH (None: none to look for).
    - ``hook_events``: the hook events install adds (empty: the harness has no hooks).
    - ``settings_env``, ``settings_dir``, ``settings_file``: where its settings live: the
      user install's base is ``$settings_env`` or ``~/settings_dir``, with ``settings_file``
      in it; a project's is ``settings_dir/project_settings_file`` in the project
      (``project_settings_file`` defaults to ``settings_file``; Claude Code's is the
      uncommitted ``settings.local.json``).
    - ``installs_statusline``, ``installs_skills``: whether install adds a status line and
      the onstation skills.
    - ``quiet_stop``: what its Stop hook must print when onstation decides nothing (None:
      nothing).
    - ``fill_reader`` and ``make_launcher``: functions returning its transcript reader
      (``read_fill``) and a launcher for it; use :meth:`read_fill` and :meth:`launcher`.
    """

    __slots__ = _ADAPTER_FIELDS

    name: str
    aliases: tuple[str, ...]
    plan_harness: str
    source_harness: str
    session_harness: str
    program: str | None
    hook_events: tuple[str, ...]
    settings_env: str | None
    settings_dir: str | None
    settings_file: str | None
    installs_statusline: bool
    installs_skills: bool
    quiet_stop: Mapping[str, Any] | None
    fill_reader: Callable[[], ReadFill]
    make_launcher: Callable[[str | None], Launcher]
    project_settings_file: str | None

    def __init__(
        self,
        name: str,
        *,
        aliases: tuple[str, ...] = (),
        plan_harness: str,
        source_harness: str,
        session_harness: str,
        program: str | None,
        hook_events: tuple[str, ...] = (),
        settings_env: str | None = None,
        settings_dir: str | None = None,
        settings_file: str | None = None,
        installs_statusline: bool = False,
        installs_skills: bool = False,
        quiet_stop: Mapping[str, Any] | None = None,
        fill_reader: Callable[[], ReadFill],
        make_launcher: Callable[[str | None], Launcher],
        project_settings_file: str | None = None,
    ) -> None:
        self._set(
            name=name, aliases=tuple(aliases), plan_harness=plan_harness,
            source_harness=source_harness, session_harness=session_harness, program=program,
            hook_events=tuple(hook_events), settings_env=settings_env, settings_dir=settings_dir,
            settings_file=settings_file, installs_statusline=installs_statusline,
            installs_skills=installs_skills, quiet_stop=quiet_stop, fill_reader=fill_reader,
            make_launcher=make_launcher,
            project_settings_file=project_settings_file or settings_file,
        )  # fmt: skip

    @property
    def has_hooks(self) -> bool:
        """Whether onstation installs hooks into this harness."""
        return bool(self.hook_events)

    def names(self) -> tuple[str, ...]:
        """Its name, then its aliases."""
        return (self.name, *self.aliases)

    def no_decision(self, event: str) -> dict[str, Any] | None:
        """What to print for ``event`` when onstation decides nothing (a fresh dict), or None.

        Codex requires JSON on stdout for Stop even then; every other answer is silence.
        """
        if event == "Stop" and self.quiet_stop is not None:
            return dict(self.quiet_stop)
        return None

    def with_notice(
        self, event: str, output: dict[str, Any] | None, message: str
    ) -> dict[str, Any] | None:
        """``output`` with ``systemMessage`` (a notice the host shows the user) where the host
        shows it on ``event``; ``output`` unchanged elsewhere (docs/hosts.md)."""
        hidden = _NOTICE_HIDDEN.get(self.session_harness, frozenset())
        if event in hidden or not message:
            return output
        return {**(output or {}), "systemMessage": message[:_NOTICE_MAX]}

    def with_stop(
        self, event: str, output: dict[str, Any] | None, reason: str
    ) -> dict[str, Any] | None:
        """``output`` with ``continue: false`` and ``stopReason`` (the host stops the agent)
        where the host honours them on ``event``. Codex rejects both on PreToolUse, and a
        rejected answer fails open, so there the answer keeps only its deny."""
        if event not in _STOP_EVENTS.get(self.session_harness, frozenset()):
            return output
        return {**(output or {}), "continue": False, "stopReason": reason[:_NOTICE_MAX]}

    def read_fill(
        self,
        path: str | os.PathLike[str],
        cursor: TranscriptCursor | None = None,
        *,
        model: str | None = None,
        declared_window: int | None = None,
    ) -> tuple[FillReading | None, TranscriptCursor]:
        """Read the context fill from this harness's transcript (incrementally);
        ``declared_window`` is the window the host declared for the body, if any."""
        return self.fill_reader()(path, cursor, model=model, declared_window=declared_window)

    def launcher(self, model: str | None = None) -> Launcher:
        """A launcher that starts a successor under this harness."""
        return self.make_launcher(model)

    def __hash__(self) -> int:  # quiet_stop is a mapping: one adapter per name
        return hash(self.name)


#: Events both hosts send and install registers. PostCompact starts a new context epoch
#: (relief/hooks.py ``on_post_compact``); both hosts have it and neither takes a matcher for
#: it (Claude Code hooks reference; Codex ``codex-rs/hooks/schema/generated/
#: post-compact.command.input.schema.json``, ``matcher_pattern_for_event``).
_SHARED_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                  "PreCompact", "PostCompact")  # fmt: skip

#: Events whose ``systemMessage`` the host discards, by hook harness (docs/hosts.md): Claude
#: Code's hooks reference, "JSON output"; every Codex output schema accepts it and its
#: parsers show it as a warning (codex-rs/hooks/src/engine/output_parser.rs).
_NOTICE_HIDDEN: dict[str, frozenset[str]] = {
    "claude-code": frozenset({"PreCompact", "PostCompact", "Notification", "SessionEnd"}),
}
#: Events on which ``continue: false`` + ``stopReason`` stop the agent, by hook harness:
#: Claude Code (universal fields, "takes precedence"); Codex everywhere but PreToolUse and
#: PermissionRequest, whose parser rejects them ("unsupported continue:false").
_STOP_EVENTS: dict[str, frozenset[str]] = {
    "claude-code": frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                              "PostToolUseFailure", "Stop"}),
    "codex": frozenset({"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"}),
}  # fmt: skip
#: Output strings are capped by the host at 10,000 characters (harness-formats.md §1.4).
_NOTICE_MAX = 9000

#: Claude Code (``claude``): hooks, status line and skills in ``.claude/settings.json``.
CLAUDE_CODE = HarnessAdapter(
    "claude-code",
    plan_harness="claude-code",
    source_harness="claude-code",
    session_harness="claude-code",
    program="claude",
    # PostToolUseFailure and PermissionDenied settle a dispatched effect whose tool failed or
    # was denied (docs/hosts.md); Codex has neither event.
    hook_events=(*_SHARED_EVENTS, "SessionEnd", "PostToolUseFailure", "PermissionDenied"),
    settings_env="CLAUDE_CONFIG_DIR",
    settings_dir=".claude",
    settings_file="settings.json",
    # A project install writes the uncommitted local settings (harness-formats.md §1.1).
    project_settings_file="settings.local.json",
    installs_statusline=True,
    installs_skills=True,
    fill_reader=_claude_transcript,
    make_launcher=_claude_launcher,
)

#: Codex CLI (``codex``): hooks in ``.codex/hooks.json``; fill from its rollout file.
CODEX = HarnessAdapter(
    "codex",
    aliases=("codex-cli",),
    plan_harness="codex-cli",
    source_harness="codex",
    session_harness="codex",
    program="codex",
    hook_events=_SHARED_EVENTS,
    settings_env="CODEX_HOME",
    settings_dir=".codex",
    settings_file="hooks.json",
    quiet_stop={"continue": True},
    fill_reader=_codex_rollout,
    make_launcher=_codex_launcher,
)

#: The shipped fake agent (``onstation fake-agent``): speaks Claude Code's hooks and writes
#: Claude Code transcripts; nothing to install, no program to look for.
FAKE = HarnessAdapter(
    "fake",
    plan_harness="claude-code",
    source_harness="claude-code",
    session_harness="claude-code",
    program=None,
    fill_reader=_claude_transcript,
    make_launcher=_fake_launcher,
)

#: Every adapter by name, in the order ``--harness`` lists them.
ADAPTERS: dict[str, HarnessAdapter] = {a.name: a for a in (FAKE, CLAUDE_CODE, CODEX)}

#: The harnesses with hooks (``onstation hook``, ``install``, ``uninstall``).
HOOK_HARNESSES: tuple[str, ...] = tuple(a.name for a in ADAPTERS.values() if a.has_hooks)

_BY_ANY_NAME: dict[str, HarnessAdapter] = {n: a for a in ADAPTERS.values() for n in a.names()}


def find(name: object, *, aliases: bool = True) -> HarnessAdapter | None:
    """The adapter ``name`` names (an alias too, unless ``aliases`` is False), or None."""
    if not isinstance(name, str):
        return None
    return (_BY_ANY_NAME if aliases else ADAPTERS).get(name)


def adapter(name: str) -> HarnessAdapter:
    """The adapter ``name`` (or one of its aliases) names; BadInput for an unknown harness."""
    found = find(name)
    if found is None:
        from onstation.core.errors import BadInput

        known = ", ".join(ADAPTERS)
        raise BadInput(f"unknown harness {name!r}; one of {known}")
    return found


# -- one hook payload -----------------------------------------------------------------------


def _text(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else None


#: A hook call's fields, in order.
_CALL_FIELDS = (
    "harness", "event", "session_id", "cwd", "transcript_path", "tool_name", "tool_use_id",
    "tool_input", "tool_response", "source", "reason", "trigger", "prompt", "model",
    "permission_mode", "raw",
)  # fmt: skip


class HookCall(FrozenRecord):
    """One hook call: the harness, the event, and the payload's fields, typed.

    Every string field is the payload's value when it is a string and None otherwise (a
    wrong type counts as absent; an empty string is kept, for the caller to judge);
    ``tool_input`` is a dict or None. ``tool_response`` is kept as given, whatever its type
    (a non-object response is still a response). ``raw`` is the payload as parsed, every
    field included, for what needs the rest.
    """

    __slots__ = _CALL_FIELDS

    harness: str
    event: str
    session_id: str | None
    cwd: str | None
    transcript_path: str | None
    tool_name: str | None
    tool_use_id: str | None
    tool_input: dict[str, Any] | None
    tool_response: Any
    source: str | None
    reason: str | None
    trigger: str | None
    prompt: str | None
    model: str | None
    permission_mode: str | None
    raw: dict[str, Any]

    def __init__(
        self,
        harness: str,
        event: str,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        transcript_path: str | None = None,
        tool_name: str | None = None,
        tool_use_id: str | None = None,
        tool_input: dict[str, Any] | None = None,
        tool_response: Any = None,
        source: str | None = None,
        reason: str | None = None,
        trigger: str | None = None,
        prompt: str | None = None,
        model: str | None = None,
        permission_mode: str | None = None,
        raw: dict[str, Any] | None = None,
    ) -> None:
        self._set(
            harness=harness, event=event, session_id=session_id, cwd=cwd,
            transcript_path=transcript_path, tool_name=tool_name, tool_use_id=tool_use_id,
            tool_input=tool_input, tool_response=tool_response, source=source, reason=reason,
            trigger=trigger, prompt=prompt, model=model, permission_mode=permission_mode,
            raw={} if raw is None else raw,
        )  # fmt: skip

    @classmethod
    def from_payload(cls, harness: str, event: str, payload: dict[str, Any]) -> HookCall:
        """The call a parsed payload (a JSON object) describes; never raises on its fields."""
        tool_input = payload.get("tool_input")
        return cls(
            harness, event,
            session_id=_text(payload, "session_id"),
            cwd=_text(payload, "cwd"),
            transcript_path=_text(payload, "transcript_path"),
            tool_name=_text(payload, "tool_name"),
            tool_use_id=_text(payload, "tool_use_id"),
            tool_input=tool_input if isinstance(tool_input, dict) else None,
            tool_response=payload.get("tool_response"),
            source=_text(payload, "source"),
            reason=_text(payload, "reason"),
            trigger=_text(payload, "trigger"),
            prompt=_text(payload, "prompt"),
            model=_text(payload, "model"),
            permission_mode=_text(payload, "permission_mode"),
            raw=payload,
        )  # fmt: skip

    def __hash__(self) -> int:  # raw and tool_input are dicts: hash the identity of the call
        return hash((self.harness, self.event, self.session_id, self.tool_use_id))


__all__ = [
    "ADAPTERS",
    "CLAUDE_CODE",
    "CODEX",
    "FAKE",
    "HOOK_HARNESSES",
    "HarnessAdapter",
    "HookCall",
    "adapter",
    "find",
]
