"""Command groups load lazily: ``onstation --help`` and one command import only what they need,
while ``--help`` still lists every command with its own short help."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from onstation.cli.lazy import LazyCommand
from onstation.cli.main import COMMANDS, cli

#: Every command ``onstation --help`` listed before the command line was split into modules.
COMMANDS_BEFORE_THE_SPLIT = [
    "actor", "breaker", "brief", "capsule", "challenge", "db", "demo", "denials", "doctor",
    "effect",
    "episode", "fake-agent", "grant", "guard", "halt", "halts", "history", "hook", "install",
    "keys", "lease", "manifest", "message", "node", "note", "plan", "relieve", "report",
    "respawn", "resurrect", "simulate", "statusline", "supervise", "task", "team", "tour",
    "unhalt", "uninstall", "workspace",
]  # fmt: skip

#: What no ``--help`` and no ledger command may pull in: the simulator, the mocking library
#: (the simulator's fault injection uses it) and the relief's orchestration.
HEAVY = ["onstation.sim", "unittest.mock", "onstation.relief.relieve"]

_RUN_AND_LIST_MODULES = """
import json, sys
sys.argv = ["onstation", *sys.argv[1:]]
from onstation.cli.entry import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
sys.stderr.write("\\n@@modules@@" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _onstation(*args: str) -> tuple[int, str, set[str]]:
    """Run ``onstation ARGS`` in a fresh interpreter: exit code, stdout, modules imported."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST_MODULES, *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    report = json.loads(done.stderr.rsplit("@@modules@@", 1)[1])
    return report["code"], done.stdout, set(report["modules"])


def _listed(help_text: str) -> list[str]:
    """The command names of a ``--help`` page's Commands section."""
    section = help_text.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ")]


def test_help_imports_neither_the_simulator_nor_mock_nor_the_relief() -> None:
    code, out, modules = _onstation("--help")
    assert code == 0
    assert not [m for m in HEAVY if m in modules]
    # No command module, not even click: --help lists the commands from the table.
    assert {m for m in modules if m.startswith("onstation.cli")} == {
        "onstation.cli", "onstation.cli.entry", "onstation.cli.fast_help",
        "onstation.cli.daemon_client",  # the entry point asks it first (the daemon is off here)
    }  # fmt: skip
    assert "click" not in modules
    assert "onstation.ledger" not in modules
    assert _listed(out) == sorted(COMMANDS)
    assert set(COMMANDS_BEFORE_THE_SPLIT) <= set(_listed(out))


def test_help_under_importtime_names_none_of_them() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "onstation.cli.entry", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "onstation.cli.fast_help" in imported
    assert "click" not in imported
    assert not [m for m in HEAVY if m in imported]
    assert _listed(done.stdout) == sorted(COMMANDS)


@pytest.mark.parametrize(
    ("args", "loaded", "not_loaded"),
    [
        (["node", "--help"], "onstation.cli.ledger_commands", "onstation.cli.relief_commands"),
        (["halts", "--help"], "onstation.cli.governor_commands", "onstation.cli.ledger_commands"),
        (["relieve", "--help"], "onstation.cli.relief_commands", "onstation.cli.ledger_commands"),
    ],
)
def test_one_command_imports_its_own_module_only(
    args: list[str], loaded: str, not_loaded: str
) -> None:
    code, out, modules = _onstation(*args)
    assert code == 0, out
    assert loaded in modules
    assert not_loaded not in modules
    assert not [m for m in HEAVY if m in modules]


def test_an_unknown_command_is_matched_against_every_command() -> None:
    code, _, _ = _onstation("nod")
    assert code == 2
    done = subprocess.run(
        [sys.executable, "-m", "onstation.cli.entry", "halt-x"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "'halt', 'halts', 'unhalt'" in done.stderr


def test_every_command_before_the_split_is_in_the_lazy_map() -> None:
    assert set(COMMANDS_BEFORE_THE_SPLIT) <= set(COMMANDS)
    listed = _listed(CliRunner().invoke(cli, ["--help"]).output)
    assert listed == sorted(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_lazy_short_help_is_the_commands_own(name: str) -> None:
    entry = COMMANDS[name]
    command = entry.load()
    assert command.name == name
    assert not command.hidden
    assert entry.short_help == command.get_short_help_str(limit=1_000_000)
    for limit in range(10, 130):
        assert entry.short_help_str(limit) == command.get_short_help_str(limit), limit


def test_help_lists_what_an_eager_group_would() -> None:
    """click's own listing, which imports every command, prints the same rows."""
    ctx = click.Context(cli, info_name="onstation", max_content_width=100)
    lazy, eager = ctx.make_formatter(), ctx.make_formatter()
    cli.format_commands(ctx, lazy)
    click.Group.format_commands(cli, ctx, eager)
    assert lazy.getvalue() == eager.getvalue()
    assert lazy.getvalue().count("\n") > len(COMMANDS)


def test_a_loaded_command_gets_the_bounded_number_types() -> None:
    ctx = click.Context(cli, info_name="onstation")
    for name in COMMANDS:
        pending = [cli.get_command(ctx, name)]
        while pending:
            command = pending.pop()
            assert command is not None
            for param in command.params:
                assert param.type is not click.INT and param.type is not click.FLOAT, (
                    name,
                    param.name,
                )
            if isinstance(command, click.Group):
                pending.extend(command.commands.values())


def test_a_lazy_entry_names_a_click_command() -> None:
    with pytest.raises(TypeError, match="not a click command"):
        LazyCommand("onstation.cli.main:COMMANDS", "x").load()
