"""``onstation fake-agent``: the fake Claude Code session (see :mod:`onstation.harness.fake_agent`).

The options are parsed by the harness module itself (``main(argv)``), so the program behaves
the same whether started as ``onstation fake-agent`` or ``python -m onstation.harness.fake_agent``.
"""

from __future__ import annotations

import click


@click.command(
    "fake-agent",
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def fake_agent_cmd(args: tuple[str, ...]) -> None:
    """A fake Claude Code session for demos and tests: real git, real hooks, no model.

    Run `onstation fake-agent --help` for its options.
    """
    from onstation.harness.fake_agent import main

    raise SystemExit(main(list(args)))


def register(cli: click.Group) -> None:
    """Add ``fake-agent`` to the ``onstation`` group."""
    cli.add_command(fake_agent_cmd)
