"""Conventions every command shares: ``--db``/``--json``, one-line errors, exit codes.

Every leaf command is decorated with :func:`command_options`, so ``--db URL`` (env
``ONSTATION_DB``) and ``--json`` are accepted after the command name, where people type
them. Errors are one line on stderr (``onstation: error: ...``) or, with ``--json``, one
JSON object on stdout; the exit code comes from the error's kind (see
:class:`onstation.core.errors.ExitCode`). The top-level group (:class:`OnstationGroup`)
holds click's own usage errors to the same rule.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from onstation.cli.fast_help import exit_codes_help
from onstation.core.errors import BadInput, ExitCode, OnstationError

if TYPE_CHECKING:
    from onstation.ledger import Ledger

F = TypeVar("F", bound=Callable[..., Any])


class Options:
    """The shared options of the command being run (a plain class: a dataclass costs import
    time on every command)."""

    __slots__ = ("db", "json")

    def __init__(self, db: str | None = None, json: bool = False) -> None:
        self.db = db
        self.json = json

    def __repr__(self) -> str:
        return f"Options(db={self.db!r}, json={self.json!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Options):
            return NotImplemented
        return (self.db, self.json) == (other.db, other.json)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was


def command_options(func: F) -> F:
    """Add ``--db`` and ``--json`` to a leaf command and turn errors into exit codes."""

    @click.option(
        "--db",
        "db_url",
        envvar="ONSTATION_DB",
        default=None,
        metavar="URL",
        help="Ledger: a SQLite path or postgresql:// URL (env ONSTATION_DB).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
    @functools.wraps(func)
    def wrapper(*args: Any, db_url: str | None, as_json: bool, **kwargs: Any) -> Any:
        opts = Options(db=db_url, json=as_json)
        with handle_errors(opts):
            return func(*args, opts=opts, **kwargs)

    return wrapper  # type: ignore[return-value]  # the options wrapper changes the signature


@contextmanager
def handle_errors(opts: Options) -> Iterator[None]:
    """Map onstation errors to one line and their exit code; leave click's own errors alone."""
    try:
        yield
    except OnstationError as exc:
        fail(opts, exc)
    except click.exceptions.Exit:
        raise
    except click.ClickException:
        raise
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:  # the last resort: still one line, still a documented code
        fail(opts, OnstationError(f"{type(exc).__name__}: {exc}"))


def fail(opts: Options, exc: OnstationError) -> None:
    """Report ``exc`` and exit with its code."""
    message = exc.message.replace("\n", " ")
    if opts.json:
        click.echo(json.dumps(exc.to_json(), sort_keys=True, default=str))
    else:
        click.echo(f"onstation: {exc.kind.replace('_', ' ')}: {message}", err=True)
    sys.exit(int(exc.exit_code))


def emit(opts: Options, data: dict[str, Any], human: str | Callable[[], str]) -> None:
    """Print ``data`` as JSON with ``--json``, else the human form."""
    if opts.json:
        click.echo(json.dumps(data, sort_keys=True, default=str))
    else:
        click.echo(human() if callable(human) else human)


def plain_output(stream: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``stream`` gets plain lines only: no ANSI escapes, no carriage-return redraws.

    Plain when ``NO_COLOR`` is set to anything non-empty (https://no-color.org), when
    ``TERM`` is ``dumb``, or when the stream is not a terminal (a pipe, a file, a closed
    stream). Every place the CLI styles text or redraws a line asks this first."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", "") != "" or env.get("TERM", "") == "dumb":
        return True
    try:
        return not bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return True


def parse_json_option(text: str, field: str) -> Any:
    """A JSON value given on the command line, parsed strictly (no duplicate keys, no NaN)."""
    from onstation.core.canonical import loads_strict

    return loads_strict(text, field)


INT64_MAX = 2**63 - 1


def positive_int(value: int, field: str, maximum: int = INT64_MAX) -> int:
    """Refuse zero, negative and too large numbers with a one-line error naming the option."""
    if value < 1:
        raise BadInput(f"{field}: must be at least 1 (got {value})", field=field)
    if value > maximum:
        raise BadInput(f"{field}: must be at most {maximum} (got {value})", field=field)
    return value


def operator_name() -> str:
    """Who is at the keyboard (recorded as ``by``), or ``operator`` when that is unknown."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "operator"


@contextmanager
def open_ledger(opts: Options, *, create: bool = True) -> Iterator[Ledger]:
    """The ledger named by ``--db``/``ONSTATION_DB`` (default: the user's SQLite file).

    Read-only commands pass ``create=False``: a mistyped ``--db`` is then refused instead of
    leaving an empty ledger (and its directories) behind.
    """
    from onstation.ledger import Ledger

    ledger = Ledger.open(opts.db, create=create)
    try:
        yield ledger
    finally:
        ledger.close()


# --------------------------------------------------------------------------------------------
# click's own errors and parameter types


class _Int64(click.types.IntParamType):
    """An integer the ledger can store: every integer column is a signed 64-bit integer."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not -INT64_MAX - 1 <= number <= INT64_MAX:
            self.fail(f"{value!r} is outside the 64-bit integer range", param, ctx)
        return number


class _FiniteFloat(click.types.FloatParamType):
    """A number of seconds or hours: NaN compares false with every bound, so it is refused."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def bound_numbers(command: click.Command) -> None:
    """Give every plain ``int``/``float`` parameter of ``command`` and every command under it
    a bounded type, so an out-of-range number is a usage error (exit 2) wherever it appears."""
    int64, finite = _Int64(), _FiniteFloat()
    pending: list[click.Command] = [command]
    while pending:
        command = pending.pop()
        for param in command.params:
            if param.type is click.INT:
                param.type = int64
            elif param.type is click.FLOAT:
                param.type = finite
        if isinstance(command, click.Group):
            pending.extend(command.commands.values())


_JSON_META = "onstation.json"


class UsageFailure(click.ClickException):
    """A click error reported by onstation's rules: one line, or one JSON object, exit 2.

    Every error click raises is about the arguments given (a bad or missing value, an
    unknown option or command), so it is bad input whatever click's own exit code."""

    exit_code = int(ExitCode.BAD_INPUT)

    def __init__(self, message: str, *, as_json: bool, command_path: str | None) -> None:
        super().__init__(message)
        self.as_json = as_json
        self.command_path = command_path

    def show(self, file: Any = None) -> None:
        message = " ".join(self.format_message().split())
        if self.as_json:
            click.echo(json.dumps(BadInput(message).to_json(), sort_keys=True))
            return
        hint = f" (see '{self.command_path} --help')" if self.command_path else ""
        click.echo(f"onstation: bad input: {message}{hint}", err=True)


@contextmanager
def _usage_errors(as_json: bool) -> Iterator[None]:
    try:
        yield
    except (click.exceptions.NoArgsIsHelpError, UsageFailure):
        raise  # the help text is what was asked for; a UsageFailure is already reported so
    except click.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        path = ctx.command_path if isinstance(ctx, click.Context) else None
        raise UsageFailure(exc.format_message(), as_json=as_json, command_path=path) from exc


def _refuse_undecodable(args: list[str]) -> None:
    """Refuse an argument holding bytes that are not UTF-8, naming the option it belongs to.

    Python hands such bytes over as lone surrogates (surrogateescape); they cannot be
    stored, hashed or printed, so they are refused before any command runs."""
    for index, arg in enumerate(args):
        if arg.isascii():
            continue
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            if arg.startswith("--") and "=" in arg:
                where = arg.split("=", 1)[0]
            elif index > 0 and args[index - 1].startswith("-"):
                where = args[index - 1]
            else:
                where = f"argument {index + 1}"
            where = where.encode("utf-8", "backslashreplace").decode("utf-8")
            raise click.UsageError(f"{where}: not valid UTF-8") from None


class OnstationGroup(click.Group):
    """The ``onstation`` group: usage errors (bad or missing option values, unknown options
    or commands) exit 2 with one line, or one JSON object on stdout when ``--json`` is
    anywhere in the arguments; arguments that are not UTF-8 are refused the same way."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:  # fmt: skip
        as_json = "--json" in args
        with _usage_errors(as_json):
            _refuse_undecodable(args)
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        ctx.meta[_JSON_META] = as_json
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        with _usage_errors(bool(ctx.meta.get(_JSON_META))):
            return super().invoke(ctx)


#: The exit-code table of ``onstation --help``, made from :class:`ExitCode` (the README's table
#: is checked against the same enum).
EXIT_CODES_HELP = exit_codes_help()


def body_generation(flag: int | None, node: str, *, required: bool, what: str) -> int | None:
    """The generation a body writes under: ``--generation``, else ``ONSTATION_GENERATION``
    when the environment is that of a body of ``node`` (onstation sets both when it launches
    a successor).

    Writes made on behalf of a body carry its generation so that a fenced body is denied; a
    command that only a body runs (``required``) refuses to guess one.
    """
    import os

    if flag is not None:
        if not 1 <= flag <= 2**63 - 1:
            raise BadInput(f"--generation: must be a positive integer (got {flag})")
        return flag
    env = os.environ.get("ONSTATION_GENERATION")
    env_node = os.environ.get("ONSTATION_NODE")
    if env and (env_node is None or env_node == node):
        try:
            value = int(env)
        except ValueError:
            raise BadInput(f"ONSTATION_GENERATION: not an integer ({env[:40]!r})") from None
        if not 1 <= value <= 2**63 - 1:
            raise BadInput("ONSTATION_GENERATION: must be a positive integer")
        return value
    if required:
        raise BadInput(
            f"{what}: give --generation G, the generation of the body writing for {node} "
            "(a launched body has it in ONSTATION_GENERATION; the hooks name it)",
            field="--generation",
        )
    return None
