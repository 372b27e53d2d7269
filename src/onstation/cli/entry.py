"""The ``onstation`` console entry point.

Hook and status-line calls run after every tool call and every assistant message, and a
running body's heartbeat (``lease renew``) every few seconds, so they take a fast path that
imports neither click nor the operator commands; ``onstation --help``, ``-h`` and
``--version`` are answered without click too (:mod:`onstation.cli.fast_help`); everything
else goes to the full command line in :mod:`onstation.cli.main`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs import time on every hook call
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType


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
    asked first, and only a command it does not take runs here.

    A hook, status-line or heartbeat call runs its fast path before ``site`` is set up: that
    path imports only the standard library and onstation, which the launcher already made
    importable, and ``site`` (the virtual environment, every distribution's ``.pth`` file)
    costs every such process about a millisecond and a half. It is set up just before the
    first import of anything else (the full path's third-party libraries,
    :class:`SiteOnDemand`), as a normal start would have had it. Every other command sets it
    up first."""
    argv = sys.argv[1:]
    from onstation.cli.daemon_client import forward

    # An installed command starts this user's daemon when none runs (``ONSTATION_DAEMON``
    # unset means ``auto`` here; the console script's default is ``on``): docs/daemon.md.
    forward(argv, default_switch="auto")
    if argv[:1] in (["hook"], ["statusline"]) or argv[:2] == ["lease", "renew"]:
        SITE_ON_DEMAND.install()
        load_sqlite_without_functools()
    else:
        import site

        site.main()
    dispatch(argv)


class SiteOnDemand:
    """A finder consulted first that sets up ``site`` just before the first import of a
    top-level module outside the standard library and onstation (click, cryptography,
    jsonschema-rs: what only the full path needs), then leaves ``sys.meta_path`` and lets
    the import go on, now over the search path and finders (``.pth`` files may add some)
    that ``site.main()`` set up. Every third-party module is thus found as after a normal
    start, and a process that imports none never pays for ``site``."""

    def install(self) -> None:
        """Put this finder first on ``sys.meta_path`` (once)."""
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """Set up ``site`` before the first import that may need it; always None (the
        import goes on to the other finders)."""
        if path is not None or fullname in sys.stdlib_module_names or fullname == "onstation":
            return None  # a submodule (its package came first), or found without site
        if self in sys.meta_path:
            sys.meta_path.remove(self)
            import site

            site.main()
        return None


SITE_ON_DEMAND = SiteOnDemand()


def load_sqlite_without_functools() -> None:
    """Load ``_sqlite3`` (the C module the fast paths use) without importing ``functools``.

    The module reads one thing from ``functools`` when it loads, ``lru_cache``, to build
    each connection's statement cache; ``functools`` imports ``collections`` and more, about
    3 ms of every hook process that needs neither. Here ``lru_cache`` is handed over from
    ``_functools._lru_cache_wrapper``, the C cache ``functools.lru_cache`` itself wraps a
    function in (identical caching; only its unused ``cache_info()`` answers a plain tuple),
    through a stand-in ``functools`` that exists only while ``_sqlite3`` loads. Where
    ``functools`` or ``_sqlite3`` is loaded already, or the C cache is missing, or the
    module will not load so, it is left to a normal import.
    """
    if "_sqlite3" in sys.modules or "functools" in sys.modules:
        return
    try:
        import _functools  # type: ignore[import-not-found]  # typeshed has no stub for it

        c_cache = _functools._lru_cache_wrapper
    except (ImportError, AttributeError):  # pragma: no cover - an interpreter without it
        return

    def lru_cache(maxsize: int | None = 128, typed: bool = False) -> object:
        def decorating(function: object) -> object:
            return c_cache(function, maxsize, typed, tuple)

        return decorating

    stand_in = type(sys)("functools")
    stand_in.lru_cache = lru_cache  # type: ignore[attr-defined]
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3  # noqa: F401
    except Exception:  # noqa: S110  # pragma: no cover - its first user loads it normally
        pass
    finally:
        del sys.modules["functools"]


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
