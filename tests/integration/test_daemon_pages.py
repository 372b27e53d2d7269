"""The pages a daemon's call dirties, and a spare's copying of them before its call comes
(onstation.cli.daemon_pages): against this process's real /proc and the real kernel."""

from __future__ import annotations

import array
import ast
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onstation.cli import daemon_pages

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/pagemap"), reason="needs Linux /proc/self/pagemap"
)


def test_private_writable_reads_only_rw_p_lines() -> None:
    maps = (
        "55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0          [heap]\n"
        "7f0000000000-7f0000001000 r--p 00000000 fd:01 12         /usr/lib/libc.so.6\n"
        "7f0000002000-7f0000004000 rw-s 00000000 fd:01 13         /tmp/ledger.db-shm\n"
        "7f0000005000-7f0000007000 rw-p 00000000 00:00 0\n"
        "garbage\n"
    )
    assert daemon_pages.private_writable(maps) == [
        (0x55D0C0000000, 0x55D0C0021000), (0x7F0000005000, 0x7F0000007000)
    ]  # fmt: skip


def test_decode_keeps_whole_runs_and_drops_a_torn_tail() -> None:
    runs = array.array("Q", [10, 3, 40, 1]).tobytes()
    assert daemon_pages.decode(runs) == [(10, 3), (40, 1)]
    assert daemon_pages.decode(runs + b"\x01\x02\x03") == [(10, 3), (40, 1)]
    assert daemon_pages.decode(b"") == []


def _forked(body: str) -> str:
    """Run ``body`` (Python) in a child forked from a fresh interpreter; its printed answer."""
    code = (
        "import os, sys, mmap, array\n"
        "from onstation.cli import daemon_pages\n"
        "PAGE = daemon_pages.PAGE\n"
        "region = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
        "region[:] = bytes(range(256)) * (64 * PAGE // 256)\n"  # present in the parent
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.close(r)\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "    os._exit(0)\n"
        "os.close(w)\n"
        "out = b''\n"
        "while chunk := os.read(r, 65536):\n"
        "    out += chunk\n"
        "os.waitpid(pid, 0)\n"
        "print(out.decode())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    return done.stdout.strip()


# The child finds the region's first page number from its address (ctypes).
_ADDRESS = (
    "import ctypes\n"
    "base = ctypes.addressof(ctypes.c_char.from_buffer(region)) // PAGE\n"
    "def own(first, count):\n"
    "    runs = daemon_pages.decode(daemon_pages.dirtied())\n"
    "    pages = {p for start, n in runs for p in range(start, start + n)}\n"
    "    return [first + i in pages for i in range(count)]\n"
)


def test_a_child_names_the_shared_pages_it_wrote_and_not_the_others() -> None:
    answer = _forked(
        _ADDRESS + "before = own(base, 64)\n"
        "region[5 * PAGE] = 1\n"
        "region[6 * PAGE + 100] = 2\n"
        "after = own(base, 64)\n"
        "os.write(w, repr((before[5:7], after[4:8], sum(after))).encode())\n"
    )
    before, after, count = ast.literal_eval(answer)
    assert before == [False, False]  # shared with the parent until written
    assert after == [False, True, True, False]
    assert count == 2


def test_a_spare_copies_the_named_pages_and_changes_nothing_in_them() -> None:
    answer = _forked(
        _ADDRESS + "prefault = daemon_pages.Prefault([(base + 8, 3), (base + 20, 1)])\n"
        "steps = 0\n"
        "while not prefault.done:\n"
        "    prefault.step()\n"
        "    steps += 1\n"
        "after = own(base, 64)\n"
        "same = region[:] == bytes(range(256)) * (64 * PAGE // 256)\n"
        "os.write(w, repr((after[7:12], after[20], sum(after), same, steps)).encode())\n"
    )
    pages, single, count, same, steps = ast.literal_eval(answer)
    assert same  # contents never change
    assert steps == 2  # one chunk per run
    if count == 0:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14+): nothing is copied")
    assert pages == [False, True, True, True, False] and single is True and count == 4


def test_a_spare_touches_only_its_own_private_writable_memory() -> None:
    # A shared mapping (as SQLite's -shm is) is never faulted in, named or not.
    shared = mmap.mmap(-1, 4 * daemon_pages.PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    import ctypes

    first = ctypes.addressof(ctypes.c_char.from_buffer(shared)) // daemon_pages.PAGE
    prefault = daemon_pages.Prefault([(first, 4), (1, 2)])  # page 1: never mapped
    assert prefault.done
    del shared


def test_the_daemon_learns_the_pages_of_a_call(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_daemon import ONSTATION, Daemon, _living_node, _note

    daemon = Daemon().start()
    try:
        assert daemon.status()["hot_pages"] == 0  # no call yet
        db = tmp_path / "ledger.db"
        _living_node(db)
        done = daemon.cli(*_note(db, "first"))
        assert done.returncode == 0, done.stderr
        # The call's child wrote to shared pages and said which, once it had answered.
        deadline = time.monotonic() + 30
        while daemon.status()["hot_pages"] == 0:
            assert time.monotonic() < deadline, "the daemon never learnt a call's pages"
            time.sleep(0.02)
        # The next calls (whose spares copied those pages first) answer as before.
        for text in ("second", "third"):
            again = subprocess.run(
                [ONSTATION, *_note(db, text)], env=daemon.env, capture_output=True, text=True,
                timeout=60, check=False,
            )  # fmt: skip
            assert again.returncode == 0, again.stderr
        assert daemon.served() == 3
    finally:
        daemon.stop()
