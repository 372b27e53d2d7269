"""The script the installed hook and status-line commands run: ``PYTHON -S THIS_FILE ARGS``.

Claude Code and Codex start a new process for every hook call. Started as the ``onstation``
console script, Python first runs its ``site`` module (the virtual environment, the
``.pth`` files of every installed distribution, ``os``): about a quarter of a bare
interpreter's start-up, spent before onstation's first line. With ``-S`` it is skipped, and
this script makes the package importable itself (its directory's grandparent holds
``onstation``), then asks this user's daemon to run the command
(:mod:`onstation.cli.daemon_client`). Only when no daemon takes it does the command run
here, after ``site.main()`` has set up the module search path exactly as a normal start
would (the standard library documents ``site.main`` for a ``-S`` start). ``onstation
install`` writes the commands (docs/hooks.md).
"""

import sys

if __name__ == "__main__":  # imported (the daemon imports every module), it does nothing
    # A script's own directory is sys.path[0]: dropped, so no module beside this file can
    # shadow one of the standard library's. The directory that holds the package goes last,
    # where site would put it: an installed distribution's top-level module (a backport
    # named like a standard module, say) must not shadow the standard library either.
    del sys.path[0]
    sys.path.append(__file__.rsplit("/", 3)[0])

    from onstation.cli.entry import main_without_site

    main_without_site()
