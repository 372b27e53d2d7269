"""One ``onstation demo`` run: wall and CPU seconds, and process starts, against issue 14's
target of 15 s wall on 2 cores.

Two runs of the same demo. The first is timed as it is (wall clock; CPU as user + system
time of the demo and every process it started and reaped, from ``RUSAGE_CHILDREN``). The
second runs under ``strace -f --seccomp-bpf -e trace=execve`` (when strace is there) and
counts the process starts: successful ``execve`` calls (a PATH search's failed tries are not
starts), grouped by program. strace slows the second run, so its time is not reported.

The baseline, measured in the same run: ``python -c pass`` (this virtualenv's interpreter)
started as many times as the demo starts processes, timed over 20 starts and scaled. It is
the floor of a design that starts that many Python interpreters; a git or shell start is
cheaper than that, an ``onstation`` one dearer.

The wall figure is this machine's under its current load: the load average and the cores are
printed beside it, and the MEETS/MISSES line says which. Run: ``./dev bench demo``.
"""

from __future__ import annotations

import collections
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 15.0
BASELINE_SAMPLE = 20
ONSTATION = str(Path(sys.executable).with_name("onstation"))
_EXECVE = re.compile(r'^\d+\s+execve\("([^"]*)".*\)\s+=\s+0\s*$')


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _demo(prefix: list[str], env: dict[str, str]) -> tuple[float, float, dict[str, object]]:
    """Run the demo once; (wall s, CPU s, its JSON summary)."""
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    done = subprocess.run([*prefix, ONSTATION, "demo", "--json"], capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip
    wall, cpu = time.perf_counter() - wall0, _children_cpu() - cpu0
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        summary = {"ok": False, "error": (done.stdout + done.stderr)[-500:]}
    return wall, cpu, summary


def _program(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "python" if name.startswith("python") else name


def count_starts(trace: str) -> collections.Counter[str]:
    """Successful execve calls in an ``strace -f -e trace=execve`` output, by program."""
    starts: collections.Counter[str] = collections.Counter()
    for line in trace.splitlines():
        matched = _EXECVE.match(line)
        if matched:
            starts[_program(matched.group(1))] += 1
    return starts


def _counted_run(env: dict[str, str]) -> tuple[collections.Counter[str] | None, bool]:
    strace = shutil.which("strace")
    if strace is None:
        return None, True
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        out = Path(tmp) / "execve.trace"
        # --seccomp-bpf: only execve stops the traced processes, not every system call.
        prefix = [strace, "-f", "--seccomp-bpf", "-qq", "-e", "trace=execve", "-e", "signal=none",
                  "-o", str(out)]  # fmt: skip
        _wall, _cpu, summary = _demo(prefix, env)
        return count_starts(out.read_text(errors="replace")), bool(summary.get("ok"))


def _baseline(starts: int) -> tuple[float, float]:
    """(wall s, CPU s) of ``python -c pass`` started ``starts`` times (sampled, scaled)."""
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    for _ in range(BASELINE_SAMPLE):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    wall, cpu = time.perf_counter() - wall0, _children_cpu() - cpu0
    return wall * starts / BASELINE_SAMPLE, cpu * starts / BASELINE_SAMPLE


def main() -> None:
    """Print one demo run's wall, CPU and process starts, and the baseline beside them."""
    env = {**os.environ}
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    wall, cpu, summary = _demo([], env)
    ok = bool(summary.get("ok"))
    starts, counted_ok = _counted_run(env)
    print(f"machine   {cores} cores, load average {load:.2f} at the start")
    failed = "" if ok else f"  DEMO FAILED: {summary.get('failed_checks') or summary}"
    print(f"demo      {wall:.1f} s wall, {cpu:.1f} s CPU (user + system, every process){failed}")
    if starts is None:
        print("starts    not counted: strace is not installed")
        total = 0
    else:
        total = sum(starts.values())
        parts = ", ".join(f"{n} {name}" for name, n in starts.most_common())
        print(f"starts    {total} process starts (successful execve): {parts}"
              + ("" if counted_ok else "  (the counted run FAILED)"))  # fmt: skip
    if total:
        base_wall, base_cpu = _baseline(total)
        print(f"baseline  python -c pass x {total}: {base_wall:.1f} s wall, {base_cpu:.1f} s CPU "
              f"(timed over {BASELINE_SAMPLE} starts, scaled)")  # fmt: skip
    verdict = "MEETS" if ok and wall < TARGET_SECONDS else "MISSES"
    print(f"target    under {TARGET_SECONDS:g} s wall on 2 cores: {verdict} ({wall:.1f} s on "
          f"{cores} cores at load {load:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
