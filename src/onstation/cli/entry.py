"""The ``onstation`` console entry point.

Hook and status-line calls run after every tool call and every assistant message, and a
running body's heartbeat (``lease renew``) every few seconds, so they take a fast path that
imports neither click nor the operator commands; ``onstation --help``, ``-h`` and
``--version`` are answered without click too (:mod:`onstation.cli.fast_help`); everything
else goes to the full command line in :mod:`onstation.cli.main`.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Hand the command to this user's daemon when one runs and serves it
    (:mod:`onstation.cli.daemon_client`; this process then ends with its outcome), else
    :func:`dispatch` it here."""
    argv = sys.argv[1:]
    from onstation.cli.daemon_client import forward

    forward(argv)
    dispatch(argv)


def main_without_site() -> None:
    """:func:`main` for a process started without the ``site`` module (``python -S``, as the
    installed hook commands start it: :mod:`onstation.cli.hook_launcher`): the daemon is
    asked first, and only a command it does not take sets up ``site`` and runs here."""
    argv = sys.argv[1:]
    from onstation.cli.daemon_client import forward

    forward(argv)
    import site

    site.main()
    dispatch(argv)


def dispatch(argv: list[str]) -> None:
    """Dispatch ``hook``, ``statusline``, the heartbeat and the top-level help cheaply; the
    rest to the full CLI."""
    # whole_process=True: these calls are the whole process, so an answered fast path ends
    # it at once with its SQLite connection left open (no WAL checkpoint and delete per
    # call; see cli/hooks.py _exit_now). The default infers the same from sys.argv.
    if argv[:1] == ["hook"] and "--help" not in argv and "-h" not in argv:
        from onstation.cli.hooks import hook_main

        sys.exit(hook_main(argv[1:], whole_process=True))
    if argv[:1] == ["statusline"] and "--help" not in argv and "-h" not in argv:
        from onstation.cli.hooks import statusline_main

        sys.exit(statusline_main(argv[1:], whole_process=True))
    if argv[:2] == ["lease", "renew"]:
        # The heartbeat: a live body's renewal without click; anything else falls through.
        from onstation.cli.fast_renew import try_renew

        if try_renew(argv[2:], whole_process=True):
            sys.exit(0)
    if argv in (["--help"], ["-h"], ["--version"]):
        # The top-level help and the version, rendered without click (as click would).
        from onstation.cli.fast_help import try_fast_help

        code = try_fast_help(argv)
        if code is not None:
            sys.exit(code)
    from onstation.cli.main import main as full_main

    full_main()


if __name__ == "__main__":
    main()
