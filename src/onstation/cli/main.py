"""``onstation``: the operator's and the scripts' command line.

This module holds only the root group; its subcommands are named in
:data:`onstation.cli.fast_help.COMMAND_TABLE` and each is imported from its own module the
first time it is used (see :mod:`onstation.cli.lazy`), so any one command imports only what
it needs. ``onstation --help``, ``-h`` and ``--version`` alone never come here: the entry
point answers them from the same table without click. The exit codes of every command are
:class:`onstation.core.errors.ExitCode`, listed by ``onstation --help``.
"""

from __future__ import annotations

import sys

import click

from onstation import __version__
from onstation.cli.fast_help import COMMAND_TABLE, MAX_CONTENT_WIDTH, PROG, epilog
from onstation.cli.lazy import LazyCommand, LazyGroup
from onstation.core.errors import BadInput

__all__ = ["COMMANDS", "cli", "main"]

#: Every subcommand of ``onstation``, loaded on first use: :data:`fast_help.COMMAND_TABLE`
#: (kept without click, for ``--help``) names where each lives and its short help.
COMMANDS: dict[str, LazyCommand] = {
    name: LazyCommand(import_path, short_help)
    for name, (import_path, short_help) in COMMAND_TABLE.items()
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": MAX_CONTENT_WIDTH,
    },
    epilog=epilog(),
)
@click.version_option(__version__, prog_name=PROG)
def cli() -> None:
    """Keep an agent's work alive while its bodies come and go."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    try:
        cli.main(args=argv, prog_name=PROG, standalone_mode=True)
    except BadInput as exc:  # pragma: no cover - commands handle their own
        click.echo(f"onstation: bad input: {exc.message}", err=True)
        sys.exit(2)
