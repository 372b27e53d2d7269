"""``onstation --help``, ``-h`` and ``--version`` are answered without click, and say exactly
what click says for the whole command line, at every width click's formatter can take."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest
from click.utils import _make_default_short_help

from onstation.cli import fast_help
from onstation.cli.fast_help import COMMAND_TABLE, render_help, shorten, try_fast_help
from onstation.cli.main import COMMANDS, cli

#: Runs ``onstation ARGS`` through the console entry point and reports its modules on stderr.
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
sys.stderr.write("@@modules@@" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
#: The same arguments given to click's group directly (no fast path).
_RUN_CLICK = "import sys; from onstation.cli.main import main; main()"


def _click_help(width: int, *, eager: bool = False) -> str:
    """What click prints for ``onstation --help`` at ``width`` columns; ``eager``: with every
    command imported and listed by click's own ``Group.format_commands``."""
    ctx = click.Context(cli, info_name="onstation", terminal_width=width, **cli.context_settings)
    if not eager:
        return cli.get_help(ctx)
    formatter = ctx.make_formatter()
    cli.format_usage(ctx, formatter)
    cli.format_help_text(ctx, formatter)
    click.Command.format_options(cli, ctx, formatter)
    click.Group.format_commands(cli, ctx, formatter)
    cli.format_epilog(ctx, formatter)
    return formatter.getvalue().rstrip("\n")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "_ONSTATION_COMPLETE")}
    return {**env, **extra}


def _fast(args: list[str], env: dict[str, str]) -> tuple[int, str, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST_MODULES, *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    stderr, _, report = done.stderr.rpartition("@@modules@@")
    parsed = json.loads(report)
    return parsed["code"], done.stdout, stderr, set(parsed["modules"])


def _click(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN_CLICK, *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


# Every width click's formatter can take (50..98), and more on either side.
@pytest.mark.parametrize("width", range(37, 110))
def test_the_help_is_clicks_at_every_width(width: int) -> None:
    assert render_help(width) == _click_help(width)


@pytest.mark.parametrize("width", [50, 61, 80, 98])
def test_the_help_is_what_clicks_eager_group_prints(width: int) -> None:
    """Not only the lazy group's listing: click's own, with every command imported."""
    assert render_help(width) == _click_help(width, eager=True)


@pytest.mark.parametrize(
    ("args", "columns"),
    [
        (["--help"], None), (["-h"], None), (["--version"], None),
        (["--help"], "50"), (["--help"], "60"), (["--help"], "100"), (["--help"], "250"),
        (["-h"], "0"), (["-h"], "-3"), (["--help"], "wide"),
    ],
)  # fmt: skip
def test_whole_process_output_and_exit_code_are_clicks_and_click_is_not_imported(
    args: list[str], columns: str | None
) -> None:
    env = _env() if columns is None else _env(COLUMNS=columns)
    code, out, err, modules = _fast(args, env)
    assert (code, out, err) == _click(args, env)
    assert code == 0 and out
    assert "click" not in modules
    allowed = {"onstation.cli.entry", "onstation.cli.fast_help", "onstation.cli.daemon_client"}
    assert not [m for m in modules if m.startswith("onstation.cli.") and m not in allowed]
    assert "onstation.ledger" not in modules


@pytest.mark.parametrize("args", [["--help", "--version"], ["--version", "-h"], ["node"]])
def test_anything_else_is_left_to_click(args: list[str]) -> None:
    assert try_fast_help(args) is None
    code, out, err, modules = _fast(args, _env())
    assert "click" in modules
    assert (code, out, err) == _click(args, _env())


def test_shell_completion_is_left_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fast_help.COMPLETE_VAR, "bash_complete")
    assert try_fast_help(["--help"]) is None


def test_a_reader_that_has_gone_gets_clicks_exit_code() -> None:
    codes = []
    for argv in ([sys.executable, "-m", "onstation.cli.entry", "--help"],
                 [sys.executable, "-c", _RUN_CLICK, "--help"]):  # fmt: skip
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run(
                argv, stdout=write_end, stderr=subprocess.PIPE, timeout=60, check=False
            )
        finally:
            os.close(write_end)
        codes.append((done.returncode, done.stderr))
    assert codes[0] == codes[1] == (1, b"")


def test_the_table_is_the_groups() -> None:
    assert cli.help == fast_help.GROUP_HELP
    assert cli.epilog == fast_help.epilog()
    assert cli.context_settings["max_content_width"] == fast_help.MAX_CONTENT_WIDTH
    assert sorted(COMMANDS) == sorted(COMMAND_TABLE)
    ctx = click.Context(cli, info_name="onstation", **cli.context_settings)
    records = [p.get_help_record(ctx) for p in cli.get_params(ctx)]
    assert tuple(r for r in records if r is not None) == fast_help.OPTIONS


_HARD_TEXTS = [
    "A short one.",
    "No full stop at all and rather long with per-identity hyphen-ated words in it",
    "Abbreviations vs. sentences. Second sentence.",
    "Supercalifragilisticexpialidocious-and-then-some-more-words-without-spaces here.",
    "\b\nA no-rewrap first paragraph.\n\nSecond paragraph.",
    "",
]


@pytest.mark.parametrize("text", [entry[1] for entry in COMMAND_TABLE.values()] + _HARD_TEXTS)
def test_shorten_is_clicks(text: str) -> None:
    for limit in range(0, 140):
        assert shorten(text, limit) == _make_default_short_help(text, limit).strip(), limit
