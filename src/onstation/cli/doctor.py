"""``onstation doctor``: is onstation working in this workspace, and if not, what to fix.

Each check gives ``ok``, ``warn`` (works, but not as well as it could) or ``fail`` (broken:
a hook that will not run, a ledger it cannot reach), one line each, with the command that
fixes it. The checks:

- ``install``: an install record for the workspace (or the user), every hook event the
  harness's adapter needs present in the settings file, each command's program present and
  executable, a ``timeout`` on each handler; for Claude Code the status line in effect (by
  its settings precedence) and ``disableAllHooks``.
- ``codex-trust``: for a Codex install, the project trusted in ``$CODEX_HOME/config.toml``
  and each installed handler's reviewed hash (:mod:`onstation.harness.codex_trust`).
- ``ledger``: the ledger the hooks use (the workspace configuration's ``db``, else
  ``--db``/``ONSTATION_DB``, else the default file) exists, is migrated, and binds the
  workspace to a node.
- ``window``: the node's last telemetry: percent, window and where it came from.
- ``witness``: this OS's process-table reader can witness a process (pid, start time, boot
  id).

Exit status: 0 when nothing failed (warnings allowed), 1 (``ERROR``) when a check failed;
``--json`` prints ``{"status": "ok"|"warn"|"broken", "checks": [...]}`` either way.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from onstation.cli.common import Options, command_options, emit
from onstation.core.errors import ExitCode

OK, WARN, FAIL = "ok", "warn", "fail"


class Report:
    """The checks made so far."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.checks: list[dict[str, Any]] = []

    def add(self, check: str, status: str, detail: str, fix: str | None = None) -> None:
        self.checks.append({"check": check, "status": status, "detail": detail, "fix": fix})

    @property
    def status(self) -> str:
        states = {c["status"] for c in self.checks}
        return "broken" if FAIL in states else WARN if WARN in states else OK

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "status": self.status, "checks": self.checks}

    def human(self) -> str:
        lines = []
        for c in self.checks:
            fix = f" -- fix: {c['fix']}" if c["fix"] and c["status"] != OK else ""
            lines.append(f"{c['status']:<4}  {c['check']:<11} {c['detail']}{fix}")
        lines.append(f"status: {self.status}")
        return "\n".join(lines)


# -- install --------------------------------------------------------------------------------


def _program(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[0] if words else None


def _check_install(report: Report, project: str) -> list[tuple[str, dict[str, Any]]]:
    from onstation.core.errors import BadInput
    from onstation.harness.adapters import HOOK_HARNESSES, adapter
    from onstation.harness.install import RECORD, load_install

    found: list[tuple[str, dict[str, Any]]] = []
    for harness in HOOK_HARNESSES:
        for scope, kwargs in (("project", {"project": project, "user": False}),
                              ("user", {"project": None, "user": True})):  # fmt: skip
            try:
                record = load_install(harness, **kwargs)
            except BadInput as exc:
                report.add("install", FAIL, f"{harness} ({scope}): {exc.message}",
                           f"onstation uninstall {harness} --{scope} ...")  # fmt: skip
                continue
            if record is not None:
                found.append((scope, record))
    if not found:
        report.add("install", FAIL, f"onstation is not installed for {project}",
                   f"onstation install claude-code --project {shlex.quote(project)} "
                   "(or codex)")  # fmt: skip
        return found
    for scope, record in found:
        harness = record["harness"]
        host = adapter(harness)
        where = f"--project {shlex.quote(project)}" if scope == "project" else "--user"
        reinstall = f"onstation uninstall {harness} {where} && onstation install {harness} {where}"
        label = f"{harness} ({scope})"
        if record["record"].endswith(RECORD):
            report.add("install", WARN, f"{label}: installed by an earlier version into "
                       f"{record['settings']}", f"onstation install {harness} {where} "
                       "(moves it)")  # fmt: skip
        settings = Path(record["settings"])
        try:
            from onstation.harness.install import _load_json

            data = _load_json(settings, follow=True)[0]
        except BadInput as exc:
            report.add("install", FAIL, f"{label}: {exc.message}", reinstall)
            continue
        hooks: dict[str, Any] = data["hooks"] if isinstance(data.get("hooks"), dict) else {}
        missing, bad_paths, no_timeout = [], set(), []
        for event in host.hook_events:
            handlers = [
                h for g in hooks.get(event, []) if isinstance(g, dict)
                for h in g.get("hooks", []) if isinstance(h, dict)
                and isinstance(h.get("command"), str)
                and f" hook {harness} {event}" in f"{h['command']} "
            ]  # fmt: skip
            if not handlers:
                missing.append(event)
            for h in handlers:
                program = _program(h["command"])
                if program is None or not (os.path.isfile(program)
                                           and os.access(program, os.X_OK)):  # fmt: skip
                    bad_paths.add(program or h["command"])
                if not isinstance(h.get("timeout"), int):
                    no_timeout.append(event)
        if missing:
            report.add("install", FAIL, f"{label}: no onstation handler for "
                       f"{', '.join(missing)} in {settings}", reinstall)  # fmt: skip
        for program in sorted(bad_paths):
            report.add("install", FAIL, f"{label}: hook command {program} does not exist or is "
                       "not executable", reinstall)  # fmt: skip
        if no_timeout:
            report.add("install", WARN, f"{label}: no timeout on {', '.join(no_timeout)}",
                       reinstall)  # fmt: skip
        if not missing and not bad_paths:
            report.add("install", OK, f"{label}: {len(host.hook_events)} hook events in "
                       f"{settings}")  # fmt: skip
        if host.installs_statusline:
            _check_claude_settings(report, project if scope == "project" else None, label)
    return found


def _check_claude_settings(report: Report, project: str | None, label: str) -> None:
    from onstation.harness.install import _read_layer, claude_layers, statusline_in_effect

    for name, path in claude_layers(project):
        if _read_layer(path, {}).get("disableAllHooks") is True:
            report.add("install", FAIL, f"{label}: {name} ({path}) set disableAllHooks",
                       f"remove disableAllHooks from {path}")  # fmt: skip
    effect = statusline_in_effect(project)
    command = effect[2].get("command") if effect else None
    words = (_program(command) or "") if isinstance(command, str) else ""
    if (
        effect is None
        or not isinstance(command, str)
        or os.path.basename(words) != "onstation"
        or " statusline" not in command
    ):
        where = f"{effect[0]} ({effect[1]})" if effect else "no settings file"
        report.add("install", WARN, f"{label}: the status line in effect is not onstation's "
                   f"(from {where}); hooks cannot learn the window it declares",
                   "onstation install claude-code --project DIR wraps it")  # fmt: skip
    else:
        report.add("install", OK, f"{label}: status line from {effect[0]} ({effect[1]})")


# -- Codex trust ----------------------------------------------------------------------------


def _check_codex_trust(report: Report, scope: str, record: dict[str, Any], project: str) -> None:
    from onstation.core.errors import BadInput
    from onstation.harness import codex_trust
    from onstation.harness.install import _load_json

    config, problem = codex_trust.read_config()
    if problem:
        report.add("codex-trust", FAIL, problem, "fix the file (codex reads it too)")
        return
    proj = project if scope == "project" else None
    trusted_project = None if proj is None else codex_trust.project_trusted(config, proj)
    steps = codex_trust.what_to_do(proj, trusted_project)
    if proj is not None and trusted_project is not True:
        state = "untrusted" if trusted_project is False else "not trusted yet"
        report.add("codex-trust", FAIL, f"project {os.path.abspath(proj)} is {state}: Codex "
                   "loads no .codex/ hooks", steps[0])  # fmt: skip
    try:
        hooks = _load_json(Path(record["settings"]), follow=True)[0].get("hooks") or {}
    except BadInput:
        return  # reported by the install check
    expected = codex_trust.expected_trust(Path(record["settings"]), hooks, " hook codex ")
    states = codex_trust.hook_states(config)
    by_status: dict[str, list[str]] = {}
    for item in expected:
        by_status.setdefault(codex_trust.trust_status(item, states), []).append(item["event"])
    for status in ("untrusted", "disabled"):
        if status in by_status:
            report.add("codex-trust", FAIL, f"{len(by_status[status])} onstation hook(s) "
                       f"{status}: {', '.join(by_status[status])}", steps[-1])  # fmt: skip
    if "modified" in by_status:
        report.add("codex-trust", WARN, f"onstation hook(s) reviewed with another hash "
                   f"(changed since, or hashed by another Codex version): "
                   f"{', '.join(by_status['modified'])}", steps[-1])  # fmt: skip
    if expected and set(by_status) == {"trusted"}:
        report.add("codex-trust", OK, f"{len(expected)} onstation hooks trusted")


# -- ledger, window, witness ----------------------------------------------------------------


def _migrate(url: str | None) -> str:
    return "onstation db migrate" + (f" --db {shlex.quote(url)}" if url else "")


def _check_ledger(report: Report, project: str, opts: Options) -> str | None:
    """Check the ledger; return the workspace's node when the ledger knows it."""
    from onstation.core.errors import BadInput, OnstationError
    from onstation.harness.config import load_config
    from onstation.ledger import Ledger, latest_schema_version, open_backend
    from onstation.ledger.bodies import HarnessLedger

    try:
        config = load_config(project)
    except BadInput as exc:
        report.add("ledger", FAIL, exc.message, "fix .onstation/config.json")
        return None
    url = config.db or opts.db
    try:
        backend = open_backend(url, require_migrated=False, create=False)
    except OnstationError as exc:
        report.add("ledger", FAIL, f"cannot open the ledger: {exc.message}",
                   _migrate(url))  # fmt: skip
        return None
    try:
        version, latest = backend.schema_version(), latest_schema_version(backend.name)
        where = backend.url
    finally:
        backend.close()
    if version < latest:
        report.add("ledger", FAIL if backend.name != "sqlite" else WARN,
                   f"{where}: schema {version}, latest {latest}",
                   _migrate(url))  # fmt: skip
    else:
        report.add("ledger", OK, f"{where}: schema {version} (latest)")
    try:
        with Ledger.open(url, create=False) as ledger:
            bound = HarnessLedger(ledger).node_for_workspace(project)
            fill = HarnessLedger(ledger).latest_fill(bound[0]) if bound else None
    except OnstationError as exc:
        report.add("ledger", FAIL, f"cannot read the ledger: {exc.message}")
        return None
    if bound is None:
        report.add("ledger", FAIL, f"{os.path.realpath(project)} is not bound to a node",
                   f"onstation workspace bind {shlex.quote(project)} NODE")  # fmt: skip
        return None
    report.add("ledger", OK, f"{bound[1]} works for {bound[0]}")
    if fill is None:
        report.add("window", WARN, f"{bound[0]}: no telemetry yet (no session has reported)")
    else:
        report.add("window", OK, f"{bound[0]}: {fill['percent']}% of {fill['window_tokens']} "
                   f"tokens from {fill['source']} (model {fill['model']}, generation "
                   f"{fill['generation']}, {fill['reported_at']})")  # fmt: skip
    return bound[0]


def _check_witness(report: Report) -> None:
    from onstation.harness.process_table import DEFAULT_READER
    from onstation.harness.witness import observe

    now = "1970-01-01T00:00:00Z"  # the witness is not kept; no clock needed
    try:
        seen = observe(os.getpid(), nonce="doctor", observed_at=now)
    except ImportError as exc:
        report.add("witness", FAIL, f"reader {DEFAULT_READER}: {exc}", "pip install psutil")
        return
    except OSError as exc:
        report.add("witness", FAIL, f"reader {DEFAULT_READER} on {sys.platform}: {exc}",
                   "run where the process table is readable (Linux /proc, or psutil)")  # fmt: skip
        return
    if seen is None:
        report.add("witness", FAIL, f"reader {DEFAULT_READER} cannot see this process")
    else:
        report.add("witness", OK, f"reader {DEFAULT_READER} on {sys.platform}: pid, start time "
                   "and boot id readable")  # fmt: skip


# -- the command ----------------------------------------------------------------------------


def diagnose(project: str, opts: Options) -> Report:
    """Run every check for the workspace ``project``."""
    report = Report(os.path.abspath(project))
    for scope, record in _check_install(report, project):
        if record["harness"] == "codex":
            _check_codex_trust(report, scope, record, project)
    _check_ledger(report, project, opts)
    _check_witness(report)
    return report


@click.command("doctor")
@click.option("--project", "project", default=".", metavar="DIR", show_default=True,
              help="The workspace to check.")  # fmt: skip
@command_options
def doctor_cmd(project: str, opts: Options) -> None:
    """Check the install, hook trust, ledger, window and witness; print what to fix."""
    if not Path(project).is_dir():
        from onstation.core.errors import BadInput

        raise BadInput(f"--project: {project} is not a directory")
    report = diagnose(project, opts)
    emit(opts, report.to_json(), report.human)
    if report.status == "broken":
        sys.exit(int(ExitCode.ERROR))
