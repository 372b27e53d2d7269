"""Conventions every command shares: ``--db``/``--json``, one-line errors, exit codes.

Every leaf command is decorated with :func:`command_options`, so ``--db URL`` (env
``ONSTATION_DB``) and ``--json`` are accepted after the command name, where people type
them. Errors are one line on stderr (``onstation: error: ...``) or, with ``--json``, one
JSON object on stdout; the exit code comes from the error's kind (see
:class:`onstation.core.errors.ExitCode`).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from onstation.core.errors import BadInput, ExitCode, OnstationError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Options:
    """The shared options of the command being run."""

    db: str | None = None
    json: bool = False


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

    return wrapper  # type: ignore[return-value]


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


def parse_json_option(text: str, field: str) -> Any:
    """A JSON value given on the command line, parsed strictly (no duplicate keys, no NaN)."""
    from onstation.core.canonical import loads_strict

    return loads_strict(text, field)


def positive_int(value: int, field: str) -> int:
    """Refuse zero and negative numbers with a one-line error naming the option."""
    if value < 1:
        raise BadInput(f"{field}: must be at least 1 (got {value})", field=field)
    return value


EXIT_CODES_HELP = "\n".join(
    f"  {int(code)}  {meaning}"
    for code, meaning in [
        (ExitCode.OK, "ok"),
        (ExitCode.ERROR, "anything else"),
        (ExitCode.BAD_INPUT, "bad input or usage"),
        (ExitCode.DENIED, "denied: the generation is stale or fenced"),
        (ExitCode.BLOCKED, "blocked by policy: respawn limit, breaker or halt"),
        (ExitCode.CONFLICT, "conflict: a compare-and-swap lost, a live lease exists, "
         "or the transition is invalid"),
    ]
)  # fmt: skip


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
