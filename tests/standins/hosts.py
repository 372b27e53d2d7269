"""Stand-in ``claude`` and ``codex`` binaries for tests: the hosts' launch-time rules, enforced.

Each stand-in parses its command line as the real program does (an unknown flag is a usage
error), reads its prompt where the real one reads it (stdin when no prompt argument, or
``-``), plays a model that runs the commands its prompt tells it to run ("run exactly:"
followed by an indented command line), and lets each command through the host's own gate:

* ``claude`` (Claude Code, print mode). Flags as in the CLI reference
  (code.claude.com/docs/en/cli-reference). A Bash call runs only when a permission rule
  allows it: ``permissions.allow`` / ``deny`` of the project's ``.claude/settings.json`` and
  ``.claude/settings.local.json``, of ``--settings FILE|JSON``, and ``--allowedTools`` /
  ``--disallowedTools``; rule syntax as in code.claude.com/docs/en/permissions (``Tool``,
  ``Tool(specifier)``; a Bash specifier without ``*`` is the exact command, ``*`` is a glob,
  a trailing ``:*`` equals `` *``; deny before allow). Print mode cannot ask, so anything not
  allowed is refused and listed in the result's ``permission_denials``
  (``--permission-mode bypassPermissions`` allows all). The project's hooks run as Claude
  Code runs them: SessionStart, UserPromptSubmit, PreToolUse (before the permission check),
  PostToolUse (after the tool ran), with the documented payload fields. A deny from
  PreToolUse (exit 2, or ``permissionDecision: deny``) stops the call. User-level settings
  (``~/.claude``) are not read, and SessionEnd is not sent (both not needed here).
* ``codex`` (Codex CLI, ``codex exec``). Flags as in ``codex-rs/exec/src/cli.rs`` and
  ``codex-rs/utils/cli/src/shared_options.rs``; clap's usage errors exit 2. Commands run in
  the sandbox the flags and ``-c`` overrides select (developers.openai.com/codex/config-
  reference: ``sandbox_mode``, ``sandbox_workspace_write.writable_roots``, ``network_access``,
  ``exclude_slash_tmp``, ``exclude_tmpdir_env_var``); default read-only. The sandbox is
  emulated: before a command runs, the ledger it would write (an ``onstation`` subcommand's
  ``--db``, else ``ONSTATION_DB``, else the default file) is checked: a SQLite ledger's
  directory must lie in a writable root (workspace-write: the working directory, ``/tmp``,
  ``$TMPDIR``, ``--add-dir`` and ``writable_roots``), a PostgreSQL ledger needs network
  access. A refused command does not run; the model sees it fail, as in the real sandbox.
  Outside a git repository ``codex exec`` refuses to start without ``--skip-git-repo-check``.
  Codex's hooks run as Codex runs them (``codex-rs/hooks``): the project's
  ``.codex/hooks.json`` is read only when ``$CODEX_HOME/config.toml`` trusts the project
  (``[projects."DIR"] trust_level = "trusted"``), and each command handler runs only when
  ``[hooks.state."KEY"] trusted_hash`` holds its current hash (``discovery.rs``); each runs
  through ``$SHELL -lc`` (``command_runner.rs``) with the input of the generated schemas
  (``codex-rs/hooks/schema/generated``): SessionStart (source ``startup``),
  UserPromptSubmit, PreToolUse and PostToolUse of the ``Bash`` tool; the session id is
  Codex's own thread id, never one the launcher chose. With ``STANDIN_CODEX_NPM=1`` the
  launched ``codex`` is Codex's npm wrapper (``codex-cli/bin/codex.js``): it spawns the
  native program as its child and waits for it, so hooks run from that child.

Every decision is appended to ``$STANDIN_RECORD`` (JSON lines) when that is set. After its
commands succeeded the stand-in stays alive (as a model at work does) for
``$STANDIN_LINGER`` seconds (default 60); after a refusal it ends its turn and exits.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path
from typing import Any

#: A command the prompt tells the model to run: an indented line after "run exactly:".
_COMMAND = re.compile(r"run exactly:\n\n  (?P<command>[^\n]+)\n")


def _record(host: str, **fields: Any) -> None:
    path = os.environ.get("STANDIN_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"host": host, **fields}, sort_keys=True) + "\n")


class UsageError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _linger(seconds: float | None = None) -> None:
    deadline = time.monotonic() + (
        seconds if seconds is not None else float(os.environ.get("STANDIN_LINGER", "60"))
    )
    while time.monotonic() < deadline:
        time.sleep(0.2)


def _commands(prompt: str) -> list[str]:
    return [m.group("command") for m in _COMMAND.finditer(prompt)]


def _ledger_of(words: list[str]) -> str:
    """The ledger an ``onstation`` command writes (its ``--db``, else the environment)."""
    for i, word in enumerate(words):
        if word == "--db" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--db="):
            return word[len("--db=") :]
    if os.environ.get("ONSTATION_DB"):
        return os.environ["ONSTATION_DB"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "onstation", "ledger.db")


# -- claude -----------------------------------------------------------------------------------

_CLAUDE_FLAGS = {
    "-p",
    "--print",
    "-c",
    "--continue",
    "--fork-session",
    "--verbose",
    "--include-partial-messages",
    "--replay-user-messages",
    "--strict-mcp-config",
    "--dangerously-skip-permissions",
    "--no-session-persistence",
    "--bare",
}
_CLAUDE_VALUES = {
    "-r": "--resume",
    "--resume": "--resume",
    "--session-id": "--session-id",
    "-n": "--name",
    "--name": "--name",
    "--output-format": "--output-format",
    "--input-format": "--input-format",
    "--model": "--model",
    "--append-system-prompt": "--append-system-prompt",
    "--append-system-prompt-file": "--append-system-prompt-file",
    "--system-prompt": "--system-prompt",
    "--system-prompt-file": "--system-prompt-file",
    "--permission-mode": "--permission-mode",
    "--settings": "--settings",
    "--max-turns": "--max-turns",
    "--max-budget-usd": "--max-budget-usd",
    "--json-schema": "--json-schema",
    "--fallback-model": "--fallback-model",
    "--tools": "--tools",
}
_CLAUDE_LISTS = {
    "--allowedTools": "allow",
    "--allowed-tools": "allow",
    "--disallowedTools": "deny",
    "--disallowed-tools": "deny",
    "--mcp-config": "mcp",
    "--add-dir": "add_dir",
}
_MODES = {"default", "manual", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"}


def _parse_claude(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "flags": set(),
        "allow": [],
        "deny": [],
        "mcp": [],
        "add_dir": [],
        "prompt": None,
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in _CLAUDE_FLAGS and not eq:
            opts["flags"].add(name)
        elif name in _CLAUDE_VALUES:
            if eq:
                value = inline
            else:
                i += 1
                if i >= len(argv):
                    raise UsageError(f"error: option '{name} <value>' argument missing", 1)
                value = argv[i]
            opts[_CLAUDE_VALUES[name]] = value
        elif name in _CLAUDE_LISTS:
            values = [inline] if eq else []
            # Variadic, as the CLI's option parser reads it: up to the next option.
            while not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1
                values.append(argv[i])
            if not values:
                raise UsageError(f"error: option '{name} <values...>' argument missing", 1)
            opts[_CLAUDE_LISTS[name]] += values
        elif arg.startswith("-") and arg != "-":
            # Commander (the CLI's option parser) reports an unknown option and exits 1.
            raise UsageError(f"error: unknown option '{arg}'", 1)
        elif opts["prompt"] is None:
            opts["prompt"] = arg
        else:
            raise UsageError(f"error: too many arguments. Expected 1 argument but got {arg!r}", 1)
        i += 1
    if "-p" not in opts["flags"] and "--print" not in opts["flags"]:
        raise UsageError("error: the stand-in claude runs in print mode only (-p)", 1)
    fmt = opts.get("--output-format", "text")
    if fmt not in ("text", "json", "stream-json"):
        raise UsageError(
            f"error: option '--output-format <format>' argument '{fmt}' is invalid."
            " Allowed choices are text, json, stream-json.",
            1,
        )
    mode = opts.get("--permission-mode", "default")
    if mode not in _MODES:
        raise UsageError(
            f"error: option '--permission-mode <mode>' argument '{mode}' is "
            f"invalid. Allowed choices are {', '.join(sorted(_MODES))}.",
            1,
        )
    for key in ("--session-id",):
        if key in opts:
            try:
                uuid.UUID(opts[key])
            except ValueError:
                raise UsageError("Error: Invalid session ID. Must be a valid UUID.", 1) from None
    return opts


def _load_settings(source: str) -> dict[str, Any]:
    text = source if source.lstrip().startswith("{") else Path(source).read_text("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise UsageError(f"Error: settings {source!r} must hold a JSON object", 1)
    return data


def _rule_matches(rule: str, tool: str, command: str) -> bool:
    """A permission rule against one Bash call (code.claude.com/docs/en/permissions)."""
    match = re.fullmatch(r"([A-Za-z0-9_]+)(?:\((.*)\))?", rule, re.S)
    if match is None or match.group(1) != tool:
        return False
    spec = match.group(2)
    if spec is None or spec == "*":
        return True
    if spec.endswith(":*"):
        spec = spec[:-2] + " *"
    if "*" not in spec:
        return command == spec
    return fnmatch.fnmatchcase(command, spec.replace("[", "[[]"))


def _run_hooks(
    hooks: dict[str, list[Any]],
    event: str,
    payload: dict[str, Any],
    cwd: str,
    tool: str | None = None,
) -> tuple[bool, list[dict[str, Any]]]:
    """Run the hooks of ``event``; (blocked, outputs). Exit 2 or a deny decision blocks."""
    blocked, outputs = False, []
    for group in hooks.get(event, []):
        matcher = str(group.get("matcher") or "")
        if tool is not None and matcher not in ("", "*") and not re.fullmatch(matcher, tool):
            continue
        for handler in group.get("hooks", []):
            if handler.get("type") != "command":
                continue
            done = subprocess.run(
                ["/bin/sh", "-c", handler["command"]],
                input=json.dumps(payload),
                text=True,
                capture_output=True,
                cwd=cwd,
                env={**os.environ, "CLAUDE_PROJECT_DIR": cwd},
                check=False,
            )
            out: dict[str, Any] = {}
            if done.returncode == 0 and done.stdout.lstrip().startswith("{"):
                out = json.loads(done.stdout)
            outputs.append(out)
            decision = (out.get("hookSpecificOutput") or {}).get("permissionDecision")
            if done.returncode == 2 or decision == "deny" or out.get("continue") is False:
                blocked = True
    return blocked, outputs


def claude(argv: list[str]) -> int:
    try:
        opts = _parse_claude(argv)
        prompt = opts["prompt"] if opts["prompt"] not in (None, "-") else sys.stdin.read()
        if not prompt.strip():
            raise UsageError(
                "Error: Input must be provided either through stdin or as a prompt "
                "argument when using --print",
                1,
            )
        cwd = os.getcwd()
        allow, deny = list(opts["allow"]), list(opts["deny"])
        hooks: dict[str, list[Any]] = {}
        sources = [
            Path(cwd, ".claude", "settings.json"),
            Path(cwd, ".claude", "settings.local.json"),
        ]
        layers = [_load_settings(str(p)) for p in sources if p.is_file()]
        if "--settings" in opts:
            layers.append(_load_settings(opts["--settings"]))
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        _record("claude", event="usage_error", argv=argv, message=str(exc))
        return exc.code
    for layer in layers:
        permissions = layer.get("permissions") or {}
        allow += list(permissions.get("allow") or [])
        deny += list(permissions.get("deny") or [])
        for event, groups in (layer.get("hooks") or {}).items():
            hooks.setdefault(event, []).extend(groups)
    mode = opts.get("--permission-mode", "default")
    if "--dangerously-skip-permissions" in opts["flags"]:
        mode = "bypassPermissions"
    session = opts.get("--session-id") or opts.get("--resume") or str(uuid.uuid4())
    base = {
        "session_id": session,
        "transcript_path": str(Path(cwd, ".standin-transcript.jsonl")),
        "cwd": cwd,
        "permission_mode": mode,
    }
    source = "resume" if "--resume" in opts else "startup"
    _run_hooks(
        hooks, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": source}, cwd
    )
    _run_hooks(
        hooks,
        "UserPromptSubmit",
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt},
        cwd,
    )
    denials: list[dict[str, Any]] = []
    failed = False
    for n, command in enumerate(_commands(prompt), 1):
        tool_use_id = f"toolu_standin_{n:02d}"
        tool_input = {"command": command, "description": "run the command the prompt names"}
        call = {**base, "tool_name": "Bash", "tool_input": tool_input, "tool_use_id": tool_use_id}
        blocked, _ = _run_hooks(
            hooks, "PreToolUse", {**call, "hook_event_name": "PreToolUse"}, cwd, "Bash"
        )
        if blocked:
            _record("claude", event="hook_denied", command=command)
            failed = True
            continue
        allowed = mode == "bypassPermissions" or (
            not any(_rule_matches(r, "Bash", command) for r in deny)
            and any(_rule_matches(r, "Bash", command) for r in allow)
        )
        if not allowed:
            # Print mode cannot ask: the call is refused, never run.
            _record("claude", event="refused", command=command, mode=mode, allow=allow)
            denials.append(
                {"tool_name": "Bash", "tool_use_id": tool_use_id, "tool_input": tool_input}
            )
            failed = True
            continue
        # As Claude Code's Bash tool runs it (seen with Claude Code 2.1.197): inside its own
        # `bash -c` that goes on after the command (it records the working directory), so
        # the command's parent is a shell that exits with it, not the host.
        wrapped = f"eval {shlex.quote(command)} && pwd -P >| /dev/null"
        done = subprocess.run(["bash", "-c", wrapped], capture_output=True, text=True, check=False)
        _record(
            "claude", event="ran", command=command, exit=done.returncode, stderr=done.stderr[-500:]
        )
        failed = failed or done.returncode != 0
        _run_hooks(
            hooks,
            "PostToolUse",
            {
                **call,
                "hook_event_name": "PostToolUse",
                "tool_response": {
                    "stdout": done.stdout,
                    "stderr": done.stderr,
                    "interrupted": False,
                    "isImage": False,
                },
            },
            cwd,
            "Bash",
        )
    if not failed:
        _linger()
    if opts.get("--output-format", "text") == "json":
        print(
            json.dumps(
                {
                    "type": "result",
                    "subtype": "success",
                    "is_error": False,
                    "session_id": session,
                    "num_turns": 1,
                    "result": "done",
                    "permission_denials": denials,
                }
            )
        )
    return 0


# -- codex ------------------------------------------------------------------------------------

_CODEX_FLAGS = {
    "--json",
    "--experimental-json",
    "--skip-git-repo-check",
    "--ephemeral",
    "--ignore-user-config",
    "--ignore-rules",
    "--full-auto",
    "--oss",
    "--dangerously-bypass-approvals-and-sandbox",
    "--yolo",
    "--not-so-yolo",
}
_CODEX_VALUES = {
    "-C": "cd",
    "--cd": "cd",
    "-m": "model",
    "--model": "model",
    "-s": "sandbox",
    "--sandbox": "sandbox",
    "-p": "profile",
    "--profile": "profile",
    "-o": "last_message",
    "--output-last-message": "last_message",
    "--output-schema": "output_schema",
    "--color": "color",
    "--local-provider": "local_provider",
}
_CODEX_REPEATED = {
    "-c": "config",
    "--config": "config",
    "--add-dir": "add_dir",
    "-i": "image",
    "--image": "image",
    "--enable": "enable",
    "--disable": "disable",
}
_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
_USAGE = "\n\nUsage: codex exec [OPTIONS] [PROMPT]\n\nFor more information, try '--help'."


def _parse_codex(argv: list[str]) -> dict[str, Any]:
    if not argv or argv[0] not in ("exec", "e"):
        raise UsageError("Error: stdin is not a terminal (the stand-in runs `codex exec` only)", 1)
    opts: dict[str, Any] = {
        "flags": set(),
        "config": [],
        "add_dir": [],
        "image": [],
        "enable": [],
        "disable": [],
        "prompt": None,
    }
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in _CODEX_FLAGS and not eq:
            opts["flags"].add(name)
        elif name in _CODEX_VALUES or name in _CODEX_REPEATED:
            if eq:
                value = inline
            else:
                i += 1
                if i >= len(args):
                    raise UsageError(
                        f"error: a value is required for '{name} <VALUE>' but none "
                        f"was supplied{_USAGE}",
                        2,
                    )
                value = args[i]
            if name in _CODEX_VALUES:
                opts[_CODEX_VALUES[name]] = value
            else:
                opts[_CODEX_REPEATED[name]].append(value)
        elif arg.startswith("-") and arg != "-":
            raise UsageError(f"error: unexpected argument '{arg}' found{_USAGE}", 2)
        elif opts["prompt"] is None:
            opts["prompt"] = arg
        else:
            raise UsageError(f"error: unexpected argument '{arg}' found{_USAGE}", 2)
        i += 1
    if "sandbox" in opts and opts["sandbox"] not in _SANDBOXES:
        raise UsageError(
            f"error: invalid value '{opts['sandbox']}' for '--sandbox "
            f"<SANDBOX_MODE>'\n  [possible values: {', '.join(_SANDBOXES)}]"
            f"{_USAGE}",
            2,
        )
    return opts


def _config(overrides: list[str]) -> dict[str, Any]:
    """``-c key=value`` overrides: the value parsed as TOML, else taken as a string."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq:
            raise UsageError(f"Error: Invalid override (missing '='): {item}", 1)
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out[key.strip()] = value
    return out


def _within(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip("/") + "/"):
            return True
    return False


def _sandbox_refusal(command: str, policy: dict[str, Any]) -> str | None:
    """Why the sandbox stops ``command`` from writing what it writes, or None."""
    if policy["mode"] == "danger-full-access":
        return None
    words = shlex.split(command)
    if not any(w.endswith("onstation") or w == "onstation.cli.entry" for w in words[:3]):
        return None
    ledger = _ledger_of(words)
    if ledger.lower().startswith(("postgresql://", "postgres://")):
        if policy["mode"] == "workspace-write" and policy["network"]:
            return None
        return f"network access is off in the {policy['mode']} sandbox ({ledger.split('@')[-1]})"
    path = ledger
    if path.lower().startswith("sqlite:"):  # as onstation.ledger.urls.parse_url reads it
        path = path[len("sqlite:") :]
        path = path[2:] if path.startswith("//") else path
    directory = os.path.dirname(os.path.abspath(path))
    if policy["mode"] == "workspace-write" and _within(directory, policy["roots"]):
        return None
    return f"{directory} is not writable in the {policy['mode']} sandbox (Read-only file system)"


def _codex_hooks(cwd: str) -> dict[str, list[Any]]:
    """The project's hooks Codex would run: trusted project, trusted handlers only."""
    from onstation.harness import codex_trust

    config, _problem = codex_trust.read_config()
    hooks_file = Path(cwd, ".codex", "hooks.json")
    if codex_trust.project_trusted(config, cwd) is not True or not hooks_file.is_file():
        return {}
    declared = json.loads(hooks_file.read_text("utf-8")).get("hooks") or {}
    trusted = {
        e["key"]
        for e in codex_trust.expected_trust(hooks_file, declared, "")
        if codex_trust.trust_status(e, codex_trust.hook_states(config)) == "trusted"
    }
    runnable: dict[str, list[Any]] = {}
    for event, groups in declared.items():
        for g, group in enumerate(groups):
            handlers = [
                h
                for n, h in enumerate(group.get("hooks", []))
                if codex_trust.hook_key(os.path.abspath(hooks_file), event, g, n) in trusted
            ]
            if handlers:
                runnable.setdefault(event, []).append({**group, "hooks": handlers})
    _record("codex", event="hooks", trusted=sorted(trusted))
    return runnable


def _codex_native_child(argv: list[str]) -> int:
    """Codex's npm wrapper: run the native program as a child, exit with its status."""
    env = {**os.environ, "STANDIN_CODEX_NPM": "", "CODEX_MANAGED_BY_NPM": "1"}
    child = subprocess.Popen([sys.executable, __file__, "codex", *argv], env=env)
    return child.wait()


def codex(argv: list[str]) -> int:
    if os.environ.get("STANDIN_CODEX_NPM") == "1":
        return _codex_native_child(argv)
    try:
        opts = _parse_codex(argv)
        config = _config(opts["config"])
        cwd = os.path.abspath(opts.get("cd") or os.getcwd())
        os.chdir(cwd)
        if "--skip-git-repo-check" not in opts["flags"]:
            inside = subprocess.run(
                ["git", "rev-parse", "--is-inside-work-tree"],
                cwd=cwd,
                capture_output=True,
                text=True,
                check=False,
            )
            if inside.stdout.strip() != "true":
                raise UsageError(
                    "Not inside a trusted directory and --skip-git-repo-check was not specified.", 1
                )
        prompt = opts["prompt"] if opts["prompt"] not in (None, "-") else sys.stdin.read()
        if not prompt.strip():
            raise UsageError("No prompt provided via stdin.", 1)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        _record("codex", event="usage_error", argv=argv, message=str(exc))
        return exc.code
    if "--full-auto" in opts["flags"]:
        print(
            "warning: `--full-auto` is deprecated; use `--sandbox workspace-write` instead.",
            file=sys.stderr,
        )
    mode = (
        opts.get("sandbox")
        or config.get("sandbox_mode")
        or ("workspace-write" if "--full-auto" in opts["flags"] else "read-only")
    )
    if {"--dangerously-bypass-approvals-and-sandbox", "--yolo"} & opts["flags"]:
        mode = "danger-full-access"
    roots = [
        cwd,
        *opts["add_dir"],
        *list(config.get("sandbox_workspace_write.writable_roots") or []),
    ]
    if not config.get("sandbox_workspace_write.exclude_slash_tmp"):
        roots.append("/tmp")
    if not config.get("sandbox_workspace_write.exclude_tmpdir_env_var") and os.environ.get(
        "TMPDIR"
    ):
        roots.append(os.environ["TMPDIR"])
    policy = {
        "mode": mode,
        "roots": roots,
        "network": bool(config.get("sandbox_workspace_write.network_access")),
    }
    thread = str(uuid.uuid4())
    as_json = "--json" in opts["flags"]
    hooks = _codex_hooks(cwd)
    shell_env = {**os.environ, "SHELL": os.environ.get("SHELL") or "/bin/sh"}
    base = {
        "session_id": thread,
        "transcript_path": None,
        "cwd": cwd,
        "model": opts.get("model") or "gpt-5.3-codex",
        "permission_mode": "default",
    }

    def hook(event: str, payload: dict[str, Any], tool: str | None = None) -> bool:
        """Run one event's trusted hooks; whether one blocked (PreToolUse deny)."""
        blocked = False
        for group in hooks.get(event, []):
            matcher = str(group.get("matcher") or "")
            if tool is not None and matcher not in ("", "*") and not re.fullmatch(matcher, tool):
                continue
            for handler in group.get("hooks", []):
                done = subprocess.run(
                    [shell_env["SHELL"], "-lc", handler["command"]],
                    input=json.dumps({**base, "hook_event_name": event, **payload}),
                    text=True,
                    capture_output=True,
                    cwd=cwd,
                    env=shell_env,
                    check=False,
                )
                out = json.loads(done.stdout) if done.stdout.lstrip().startswith("{") else {}
                _record("codex", event="hook", hook=event, exit=done.returncode, output=out)
                decision = (out.get("hookSpecificOutput") or {}).get("permissionDecision")
                blocked = blocked or done.returncode == 2 or decision == "deny"
        return blocked

    hook("SessionStart", {"source": "startup"})
    turn = str(uuid.uuid4())
    hook("UserPromptSubmit", {"prompt": prompt, "turn_id": turn})

    def emit(event: dict[str, Any]) -> None:
        if as_json:  # --json: one event per line on stdout
            print(json.dumps(event), flush=True)

    emit({"type": "thread.started", "thread_id": thread})
    emit({"type": "turn.started"})
    failed = False
    for n, command in enumerate(_commands(prompt), 1):
        item = {"id": f"item_{n}", "type": "command_execution", "command": f"bash -lc {command}"}
        emit({"type": "item.started", "item": {**item, "status": "in_progress"}})
        tool_use_id = f"call_standin_{n:02d}"
        if hook("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": command},
                               "tool_use_id": tool_use_id}, "Bash"):  # fmt: skip
            _record("codex", event="hook_denied", command=command)
            failed = True
            continue
        refusal = _sandbox_refusal(command, policy)
        if refusal is not None:
            _record("codex", event="refused", command=command, reason=refusal, policy=policy)
            emit(
                {
                    "type": "item.completed",
                    "item": {
                        **item,
                        "status": "failed",
                        "exit_code": 1,
                        "aggregated_output": refusal,
                    },
                }
            )
            failed = True
            continue
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
        _record(
            "codex", event="ran", command=command, exit=done.returncode, stderr=done.stderr[-500:]
        )
        failed = failed or done.returncode != 0
        hook(
            "PostToolUse",
            {
                "tool_name": "Bash",
                "tool_input": {"command": command},
                "tool_use_id": tool_use_id,
                "turn_id": turn,
                "tool_response": done.stdout[-2000:] + done.stderr[-2000:],
            },
            "Bash",
        )
        emit(
            {
                "type": "item.completed",
                "item": {
                    **item,
                    "status": "completed",
                    "exit_code": done.returncode,
                    "aggregated_output": done.stdout[-2000:],
                },
            }
        )
    if not failed:
        _linger()
    emit(
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1},
        }
    )
    return 0


def main(host: str, argv: list[str]) -> int:
    return claude(argv) if host == "claude" else codex(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
