"""``onstation doctor``: is onstation working in this workspace, and if not, what to fix.

Each check gives ``ok``, ``warn`` (works, but not as well as it could) or ``fail`` (broken:
a hook that will not run, a ledger it cannot reach), one line each, with the command that
fixes it. The checks:

- ``install``: an install record for the workspace (or the user), every hook event the
  harness's adapter needs present in the settings file, each command's program present and
  executable, a ``timeout`` on each handler; for Claude Code the status line in effect (by
  its settings precedence) and ``disableAllHooks``. An onstation Claude Code plugin counts
  as an install: one enabled in a settings layer's ``enabledPlugins`` (``onstation@MARKET``,
  the highest layer naming it decides), found through Claude Code's plugin records
  (``installed_plugins.json``, ``known_marketplaces.json`` under ``$CLAUDE_CONFIG_DIR/plugins``)
  or a settings layer's ``extraKnownMarketplaces``; and one given with ``--plugin-dir``
  (``claude --plugin-dir`` loads a plugin for one session and leaves nothing on disk). Its
  ``hooks/hooks.json`` is checked as a settings file is, ``${CLAUDE_PLUGIN_ROOT}`` read as the
  plugin's folder, and the launcher's target too (Claude Code docs, "Plugin loading
  reference", code.claude.com/docs/en/plugins/loading; docs/hosts.md).
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
    """The program a command runs; for the installed ``PYTHON -S .../hook_launcher.py``
    form, the launcher script when it is missing (the interpreter is then fine, onstation is
    not), else the interpreter."""
    from onstation.harness.install import HOOK_LAUNCHER

    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words:
        return None
    if len(words) >= 3 and words[1] == "-S" and os.path.basename(words[2]) == HOOK_LAUNCHER:
        return words[0] if os.path.isfile(words[2]) else words[2]
    return words[0]


def _onstation_args(command: str) -> list[str] | None:
    """The arguments a command gives onstation, or None when it does not run onstation."""
    from onstation.harness.install import onstation_words

    try:
        return onstation_words(shlex.split(command))
    except ValueError:
        return None


#: Events install added after its first release: an install without them works as before,
#: with fewer signals (PostCompact: a compaction is then seen from the transcript instead).
_LATER_EVENTS = frozenset({"PostCompact"})


def _executable(program: str | None) -> bool:
    return program is not None and os.path.isfile(program) and os.access(program, os.X_OK)


def _handlers(hooks: dict[str, Any], harness: str, event: str) -> list[dict[str, Any]]:
    """The onstation handlers of ``event`` in a ``hooks`` object."""
    groups = hooks.get(event)
    found: list[dict[str, Any]] = []
    for group in groups if isinstance(groups, list) else ():
        handlers = group.get("hooks") if isinstance(group, dict) else None
        for h in handlers if isinstance(handlers, list) else ():
            if (isinstance(h, dict) and isinstance(h.get("command"), str)
                    and f" hook {harness} {event}" in f"{h['command']} "):  # fmt: skip
                found.append(h)
    return found


class _HookScan:
    """What one hooks object holds of onstation's handlers for one harness."""

    def __init__(self, hooks: dict[str, Any], harness: str, events: tuple[str, ...],
                 root: str | None = None) -> None:  # fmt: skip
        self.missing: list[str] = []
        self.bad_paths: set[str] = set()
        self.no_timeout: list[str] = []
        self.programs: set[str] = set()
        for event in events:
            handlers = _handlers(hooks, harness, event)
            if not handlers:
                self.missing.append(event)
            for h in handlers:
                command = h["command"]
                if root is not None:  # a plugin hook: Claude Code sets CLAUDE_PLUGIN_ROOT
                    command = command.replace("${CLAUDE_PLUGIN_ROOT}", root)
                program = _program(command)
                if _executable(program):
                    self.programs.add(str(program))
                else:
                    self.bad_paths.add(program or h["command"])
                if not isinstance(h.get("timeout"), int):
                    self.no_timeout.append(event)


def _check_install(
    report: Report, project: str, plugin_dirs: tuple[str, ...] = ()
) -> list[tuple[str, dict[str, Any]]]:
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
    plugins = _check_plugins(report, project, plugin_dirs)
    if not found and not plugins:
        report.add("install", FAIL, f"onstation is not installed for {project}",
                   f"onstation install claude-code --project {shlex.quote(project)} "
                   "(or codex; or the plugin: install claude-code --plugin DIR, then "
                   "enable it in Claude Code)")  # fmt: skip
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
        scan = _HookScan(hooks, harness, host.hook_events)
        # An event this version adds that the record never had: an earlier version's install,
        # which installing again upgrades.
        later = [e for e in scan.missing
                 if e in _LATER_EVENTS and e not in record.get("added_hooks", {})]  # fmt: skip
        missing = [e for e in scan.missing if e not in later]
        if later:
            report.add("install", WARN, f"{label}: installed by an earlier version: no "
                       f"onstation handler for {', '.join(later)} in {settings}",
                       f"onstation install {harness} {where} (upgrades it)")  # fmt: skip
        if missing:
            report.add("install", FAIL, f"{label}: no onstation handler for "
                       f"{', '.join(missing)} in {settings}", reinstall)  # fmt: skip
        for program in sorted(scan.bad_paths):
            report.add("install", FAIL, f"{label}: hook command {program} does not exist or is "
                       "not executable", reinstall)  # fmt: skip
        if scan.no_timeout:
            report.add("install", WARN, f"{label}: no timeout on {', '.join(scan.no_timeout)}",
                       reinstall)  # fmt: skip
        if not missing and not scan.bad_paths:
            present = len(host.hook_events) - len(later)
            report.add("install", OK, f"{label}: {present} hook events in {settings}")
        if host.installs_statusline:
            _check_claude_settings(report, project if scope == "project" else None, label)
    if plugins and not any(r["harness"] == "claude-code" for _, r in found):
        _check_claude_settings(report, project, "claude-code (plugin)")
    return found


# -- the Claude Code plugin -----------------------------------------------------------------


def _plugins_home() -> Path:
    """Claude Code's plugin records: ``$CLAUDE_CONFIG_DIR/plugins`` (``~/.claude/plugins``)."""
    from onstation.harness.adapters import CLAUDE_CODE
    from onstation.harness.install import _user_base

    return _user_base(CLAUDE_CODE) / "plugins"


def _read_json(path: Path) -> Any:
    from onstation.core.errors import BadInput
    from onstation.harness.install import _load_json

    try:
        return _load_json(path, follow=True)[0] if path.is_file() else None
    except BadInput:
        return None


def _enabled_plugins(project: str) -> list[tuple[str, str, Path]]:
    """(plugin id, layer, settings file) of each onstation plugin enabled in effect: the
    highest-precedence layer that names an id in ``enabledPlugins`` decides it."""
    from onstation.harness.install import _read_layer, claude_layers
    from onstation.harness.install_plugin import PLUGIN

    decided: dict[str, tuple[object, str, Path]] = {}
    for layer, path in claude_layers(project):
        enabled = _read_layer(path, {}).get("enabledPlugins")
        for key, value in enabled.items() if isinstance(enabled, dict) else ():
            if isinstance(key, str) and key.split("@", 1)[0] == PLUGIN and key not in decided:
                decided[key] = (value, layer, path)
    # A value is true, false, or a list of versions (enabled at those).
    return [(key, layer, path) for key, (value, layer, path) in decided.items()
            if value is True or (isinstance(value, list) and value)]  # fmt: skip


def _marketplace_dirs(project: str, marketplace: str) -> list[Path]:
    """Where the marketplace ``marketplace`` lives on disk, by what Claude Code recorded."""
    from onstation.harness.install import _read_layer, claude_layers

    sources: list[Any] = []
    known = _read_json(_plugins_home() / "known_marketplaces.json")
    entry = known.get(marketplace) if isinstance(known, dict) else None
    if isinstance(entry, dict):
        sources += [entry.get("installLocation"), entry.get("source")]
    for _layer, path in claude_layers(project):
        extra = _read_layer(path, {}).get("extraKnownMarketplaces")
        entry = extra.get(marketplace) if isinstance(extra, dict) else None
        if isinstance(entry, dict):
            sources.append(entry.get("source"))
    dirs: list[Path] = []
    for source in sources:
        # A marketplace source is a path, or an object such as {"source": "directory",
        # "path": DIR}; a git or URL source has no folder of its own to read here.
        where = source.get("path") if isinstance(source, dict) else source
        if isinstance(where, str) and where:
            dirs.append(Path(os.path.expanduser(where)))
    return dirs


def _locate_plugin(project: str, plugin_id: str) -> Path | None:
    """The folder Claude Code loads ``plugin_id`` from: its installed copy (the cache that
    ``installed_plugins.json`` names, for this project or the user), else the plugin's folder
    in its marketplace."""
    from onstation.harness.install_plugin import PLUGIN

    installed = _read_json(_plugins_home() / "installed_plugins.json")
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    entries = plugins.get(plugin_id) if isinstance(plugins, dict) else None
    here = os.path.realpath(project)
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("installPath"), str):
            continue
        scoped = entry.get("projectPath")
        if scoped is None or (isinstance(scoped, str) and os.path.realpath(scoped) == here):
            return Path(os.path.expanduser(entry["installPath"]))
    marketplace = plugin_id.split("@", 1)[1] if "@" in plugin_id else ""
    for root in _marketplace_dirs(project, marketplace):
        listing = _read_json(root / ".claude-plugin" / "marketplace.json")
        for item in listing.get("plugins", []) if isinstance(listing, dict) else ():
            if isinstance(item, dict) and item.get("name") == PLUGIN:
                source = item.get("source")
                if isinstance(source, str):
                    return (root / source).resolve()
    return None


def _check_plugins(report: Report, project: str, plugin_dirs: tuple[str, ...]) -> int:
    """Check every onstation plugin in effect for ``project``; how many were found."""
    count = 0
    for directory in plugin_dirs:
        count += 1
        _check_plugin_dir(report, "claude-code (--plugin-dir)", Path(directory).resolve())
    for plugin_id, layer, settings in _enabled_plugins(project):
        count += 1
        label = f"claude-code (plugin {plugin_id}, enabled in {layer})"
        folder = _locate_plugin(project, plugin_id)
        if folder is None:
            report.add("install", FAIL, f"{label}: enabled in {settings}, but Claude Code has "
                       "no copy of it on this machine (no installed_plugins.json entry, no "
                       "known marketplace)", f"in claude: /plugin marketplace add DIR, then "
                       f"/plugin install {plugin_id} (DIR from onstation install claude-code "
                       "--plugin DIR)")  # fmt: skip
            continue
        _check_plugin_dir(report, label, folder)
    return count


def _launcher_target(launcher: Path) -> str | None:
    """The program the plugin's ``bin/onstation`` execs (install_plugin.py writes
    ``exec '/path/to/onstation' "$@"``), or None when it is not that launcher."""
    try:
        lines = launcher.read_text(encoding="utf-8", errors="replace").splitlines()[:5]
    except OSError:
        return None
    for line in lines:
        if line.startswith("exec "):
            return _program(line[len("exec ") :])
    return None


def _check_plugin_dir(report: Report, label: str, folder: Path) -> None:
    """A plugin folder's hooks: ``hooks/hooks.json`` as Claude Code reads it."""
    from onstation.core.errors import BadInput
    from onstation.harness.adapters import CLAUDE_CODE
    from onstation.harness.install import _load_json

    rewrite = ("onstation install claude-code --plugin NEW_DIR, then load that plugin "
               "(claude --plugin-dir, or /plugin marketplace add and /plugin install)")  # fmt: skip
    hooks_file = folder / "hooks" / "hooks.json"
    if not hooks_file.is_file():
        report.add("install", FAIL, f"{label}: no hooks/hooks.json in the plugin at {folder}",
                   rewrite)  # fmt: skip
        return
    try:
        data = _load_json(hooks_file, follow=True)[0]
    except BadInput as exc:
        report.add("install", FAIL, f"{label}: {exc.message}", rewrite)
        return
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        report.add("install", FAIL, f"{label}: {hooks_file} has no 'hooks' object", rewrite)
        return
    scan = _HookScan(hooks, CLAUDE_CODE.name, CLAUDE_CODE.hook_events, root=str(folder))
    later = [e for e in scan.missing if e in _LATER_EVENTS]
    missing = [e for e in scan.missing if e not in later]
    if later:
        report.add("install", WARN, f"{label}: written by an earlier version: no onstation "
                   f"handler for {', '.join(later)} in {hooks_file}", rewrite)  # fmt: skip
    if missing:
        report.add("install", FAIL, f"{label}: no onstation handler for {', '.join(missing)} "
                   f"in {hooks_file}", rewrite)  # fmt: skip
    for program in sorted(scan.bad_paths):
        report.add("install", FAIL, f"{label}: hook command {program} does not exist or is not "
                   "executable", rewrite)  # fmt: skip
    broken_target = False
    for program in sorted(scan.programs):
        target = _launcher_target(Path(program))
        if target is not None and not _executable(target):
            broken_target = True
            report.add("install", FAIL, f"{label}: {program} runs {target}, which does not "
                       "exist or is not executable (onstation moved?)", rewrite)  # fmt: skip
    if scan.no_timeout:
        report.add("install", WARN, f"{label}: no timeout on {', '.join(scan.no_timeout)}",
                   rewrite)  # fmt: skip
    if not missing and not scan.bad_paths and not broken_target:
        present = len(CLAUDE_CODE.hook_events) - len(later)
        report.add("install", OK, f"{label}: {present} hook events from the plugin at {folder}")


def _check_claude_settings(report: Report, project: str | None, label: str) -> None:
    from onstation.harness.install import _read_layer, claude_layers, statusline_in_effect

    for name, path in claude_layers(project):
        if _read_layer(path, {}).get("disableAllHooks") is True:
            report.add("install", FAIL, f"{label}: {name} ({path}) set disableAllHooks",
                       f"remove disableAllHooks from {path}")  # fmt: skip
    effect = statusline_in_effect(project)
    command = effect[2].get("command") if effect else None
    if (
        effect is None
        or not isinstance(command, str)
        or (_onstation_args(command) or [""])[0] != "statusline"
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


def _check_daemon(report: Report) -> None:
    """The optional per-user daemon (docs/daemon.md): said, never a warning."""
    from onstation.cli.daemon import described, status
    from onstation.cli.daemon_client import SWITCH_ENV, socket_path, switch

    path = socket_path()
    if path is None:
        report.add("daemon", OK, f"switched off ({SWITCH_ENV}=off): every call runs in its "
                   "own process")  # fmt: skip
        return
    found = status(path)
    if found is None:
        if switch("auto") == "auto":
            why = "the installed hooks start one at their next call"
        else:
            why = f"{SWITCH_ENV}={switch()}: calls use one that runs and never start one"
        report.add("daemon", OK, f"not running on {path} ({why}; `onstation daemon start` "
                   "starts one now)")  # fmt: skip
        return
    report.add("daemon", OK, described(found))


# -- the command ----------------------------------------------------------------------------


def diagnose(project: str, opts: Options, plugin_dirs: tuple[str, ...] = ()) -> Report:
    """Run every check for the workspace ``project`` (``plugin_dirs``: plugin folders a
    session loads with ``claude --plugin-dir``)."""
    report = Report(os.path.abspath(project))
    for scope, record in _check_install(report, project, plugin_dirs):
        if record["harness"] == "codex":
            _check_codex_trust(report, scope, record, project)
    _check_ledger(report, project, opts)
    _check_witness(report)
    _check_daemon(report)
    return report


@click.command("doctor")
@click.option("--project", "project", default=".", metavar="DIR", show_default=True,
              help="The workspace to check.")  # fmt: skip
@click.option("--plugin-dir", "plugin_dirs", multiple=True, metavar="DIR",
              help="Also check this plugin folder, loaded with claude --plugin-dir "
                   "(repeatable).")  # fmt: skip
@command_options
def doctor_cmd(project: str, plugin_dirs: tuple[str, ...], opts: Options) -> None:
    """Check the install, hook trust, ledger, window and witness; print what to fix."""
    from onstation.core.errors import BadInput

    if not Path(project).is_dir():
        raise BadInput(f"--project: {project} is not a directory")
    for directory in plugin_dirs:
        if not Path(directory).is_dir():
            raise BadInput(f"--plugin-dir: {directory} is not a directory")
    report = diagnose(project, opts, plugin_dirs)
    emit(opts, report.to_json(), report.human)
    if report.status == "broken":
        sys.exit(int(ExitCode.ERROR))
