"""Subcommands imported on first use (click's "Lazily Loading Subcommands" pattern).

``onstation --help`` and any single command import only what they need: the root group
knows each subcommand by name, by the ``module:attribute`` path it lives at and by its short
help (so that ``--help`` can list it without importing it). A test holds the short help kept
here equal to the command's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from gettext import gettext as _
from typing import Any

import click

from onstation.cli.common import OnstationGroup, bound_numbers

try:
    from click.exceptions import NoSuchCommand as _NoSuchCommand
except ImportError:  # pragma: no cover - click < 8.4 suggests no close matches
    _NoSuchCommand = None  # type: ignore[assignment, misc]  # absent from older click


class LazyCommand:
    """Where a subcommand lives and what ``--help`` says of it before it is imported.

    A plain class, not a dataclass: every command builds the whole table, and making a
    dataclass costs as much as a small module's import."""

    __slots__ = ("import_path", "short_help")

    def __init__(self, import_path: str, short_help: str) -> None:
        #: ``"package.module:attribute"``, the attribute being the click command or group.
        self.import_path = import_path
        #: The command's short help, untruncated: ``command.get_short_help_str(limit)`` for
        #: an unbounded limit (its first sentence).
        self.short_help = short_help

    def __repr__(self) -> str:
        return f"LazyCommand({self.import_path!r}, {self.short_help!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyCommand):
            return NotImplemented
        return (self.import_path, self.short_help) == (other.import_path, other.short_help)

    def __hash__(self) -> int:
        return hash((self.import_path, self.short_help))

    def load(self) -> click.Command:
        """Import the command."""
        module_name, _, attribute = self.import_path.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.import_path} is not a click command")
        return command

    def short_help_str(self, limit: int) -> str:
        """The short help as ``--help`` shows it in ``limit`` columns: shortened exactly as
        click shortens a command's own help."""
        return click.Command(None, help=self.short_help).get_short_help_str(limit)


class LazyGroup(OnstationGroup):
    """An :class:`OnstationGroup` whose subcommands, named in ``lazy_commands``, are imported
    the first time they are asked for; ``--help`` lists them from their :class:`LazyCommand`.

    A loaded command gets the group's bounded number types (:func:`bound_numbers`), as an
    eagerly added one would."""

    def __init__(
        self, *args: Any, lazy_commands: Mapping[str, LazyCommand] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, LazyCommand] = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            command = self.lazy_commands[cmd_name].load()
            bound_numbers(command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            if _NoSuchCommand is None or not isinstance(exc, _NoSuchCommand):
                raise
            # click suggests close matches among ``self.commands``, which holds only the
            # commands loaded so far: suggest among every command, as an eager group does.
            raise _NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with the short help of a lazy command taken from its entry
        instead of importing it."""
        rows: list[tuple[str, click.Command | LazyCommand]] = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands:
                rows.append((name, self.lazy_commands[name]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        listing = [
            (
                name,
                entry.short_help_str(limit)
                if isinstance(entry, LazyCommand)
                else entry.get_short_help_str(limit),
            )
            for name, entry in rows
        ]
        with formatter.section(_("Commands")):
            formatter.write_dl(listing)
