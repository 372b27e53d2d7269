"""Whole-process time of one hook call on a 200 MB transcript.

A Claude Code hook runs after every tool call, as a new process. This measures the
installed ``onstation hook claude-code EVENT`` command end to end (interpreter start-up,
imports, the ledger, the incremental transcript read) against two baselines in the same
run: the interpreter's own start-up (``python -c pass`` with the same interpreter) and a
single ``tail -c 65536`` of the transcript. Target: the median PostToolUse call at most 3x
``python -c pass``.

Bytecode is compiled first (``compileall``), as a normal install has it; this machine sets
PYTHONDONTWRITEBYTECODE, which would otherwise make every run recompile the package.

Run: ``./dev bench hook``. ``ONSTATION_BENCH_HOOK_MB`` sets the transcript size (default 200).
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onstation

RUNS = 25
TARGET = 3.0


def _assistant(turn: int, tokens: int) -> str:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 400,
             "cache_read_input_tokens": tokens - 403, "output_tokens": 50}  # fmt: skip
    return json.dumps({
        "type": "assistant", "isSidechain": False, "uuid": f"u{turn}", "requestId": f"r{turn}",
        "message": {"id": f"m{turn}", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "ok"}], "usage": usage},
    }) + "\n"  # fmt: skip


def _make_transcript(path: Path, megabytes: int) -> None:
    filler = json.dumps({
        "type": "user", "isSidechain": False, "uuid": "f",
        "message": {"role": "user", "content": [{"type": "tool_result", "content": "x" * 900}]},
    }) + "\n"  # fmt: skip
    block = filler * 1024
    with path.open("w") as fh:
        written = 0
        while written < megabytes * 1024 * 1024:
            fh.write(block)
            written += len(block)
        fh.write(_assistant(0, 20_000))


def _time(argv: list[str], *, stdin: str = "", env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv[0]} failed: {done.stderr.strip()}")
    return elapsed


def main() -> None:
    megabytes = int(os.environ.get("ONSTATION_BENCH_HOOK_MB", "200"))
    compileall.compile_dir(str(Path(onstation.__file__).parent), quiet=1)
    onstation_bin = str(Path(sys.executable).with_name("onstation"))
    with tempfile.TemporaryDirectory(prefix="onstation-bench-hook-") as scratch:
        root = Path(scratch)
        project = root / "project"
        project.mkdir()
        env = {**os.environ, "ONSTATION_DB": str(root / "ledger.db")}
        subprocess.run(
            [onstation_bin, "install", "claude-code", "--project", str(project), "--node",
             "bench"], env=env, check=True, capture_output=True,
        )  # fmt: skip
        transcript = root / "session.jsonl"
        _make_transcript(transcript, megabytes)

        def payload(event: str, **extra: object) -> str:
            return json.dumps({"session_id": "bench-session", "cwd": str(project),
                               "transcript_path": str(transcript), "hook_event_name": event,
                               **extra})  # fmt: skip

        hook = [onstation_bin, "hook", "claude-code"]
        first = _time([*hook, "SessionStart"], stdin=payload("SessionStart", source="startup"),
                      env=env)  # fmt: skip
        cold = _time([*hook, "PostToolUse"], env=env,
                     stdin=payload("PostToolUse", tool_name="Read", tool_input={},
                                   tool_use_id="t0"))  # fmt: skip
        python_pass, tail, post, pre = [], [], [], []
        for turn in range(1, RUNS + 1):
            python_pass.append(_time([sys.executable, "-c", "pass"], env=env))
            tail.append(_time(["tail", "-c", "65536", str(transcript)], env=env))
            with transcript.open("a") as fh:
                fh.write(_assistant(turn, 20_000 + turn * 10))
            post.append(_time([*hook, "PostToolUse"], env=env,
                              stdin=payload("PostToolUse", tool_name="Read", tool_input={},
                                            tool_use_id=f"t{turn}")))  # fmt: skip
            pre.append(_time([*hook, "PreToolUse"], env=env,
                             stdin=payload("PreToolUse", tool_name="Edit", tool_input={},
                                           tool_use_id=f"p{turn}")))  # fmt: skip
    base = statistics.median(python_pass)
    rows = [
        ("python -c pass (baseline)", base),
        ("tail -c 65536 transcript", statistics.median(tail)),
        ("hook PostToolUse (steady)", statistics.median(post)),
        ("hook PreToolUse (Edit)", statistics.median(pre)),
    ]
    print(f"one hook call, whole process, {megabytes} MB transcript, median of {RUNS}")
    for label, value in rows:
        print(f"  {label:<28} {value * 1000:7.1f} ms   {value / base:5.2f}x python -c pass")
    print(f"  first SessionStart (admits the body)  {first * 1000:7.1f} ms")
    print(f"  first PostToolUse (tail read, tier recorded)  {cold * 1000:7.1f} ms")
    ratio = statistics.median(post) / base
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"  PostToolUse {ratio:.2f}x python -c pass: {verdict} target {TARGET:.0f}x")


if __name__ == "__main__":
    main()
