"""``onstation hook HARNESS EVENT`` and ``onstation statusline``: the hot-path entry points.

A hook never breaks the agent: malformed input, an unknown event, an unreachable ledger or
any other failure ends with exit 0, no decision on stdout, a one-line note on stderr and the
same notice for the user as ``systemMessage`` where the host shows it. Only with the failure
mode ``closed`` (``ONSTATION_HOOK_FAIL``, ``hook_fail``) is an effect-capable PreToolUse that
could not be checked denied instead. Each ledger write is its own transaction, so a failure
records nothing half-done.

A hook cannot be dodged or stalled either: a PreToolUse from a session that is not the live
body (fenced or refused) is denied even when its payload cannot be read (its session id is
found without parsing the payload whole), and every call is answered within a fixed time
budget, past which an unchecked PreToolUse is denied.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

from onstation.core.fastjson import dumps, loads

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any

    from onstation.harness.adapters import HarnessAdapter

#: ``{harnesses}``: the hook harnesses of :mod:`onstation.harness.adapters`, ``|``-joined.
USAGE_HOOK = "usage: onstation hook {harnesses} EVENT [--db URL]  (JSON payload on stdin)"
USAGE_STATUS = "usage: onstation statusline [--wrap COMMAND] [--db URL]  (JSON on stdin)"
#: A payload larger than this is not parsed (bounded time and memory); the rest of a larger
#: one is read and dropped (up to MAX_DRAIN) so that the host's write completes.
MAX_PAYLOAD = 1024 * 1024
MAX_DRAIN = 64 * 1024 * 1024
#: JSON nested deeper than this is not parsed: no recursion limit is reached later.
MAX_DEPTH = 100
#: Tokens read at most while looking for the top-level session id of an unreadable payload.
MAX_SCAN_TOKENS = 1_000_000
#: Wall-clock seconds one hook call may take (``ONSTATION_HOOK_BUDGET`` changes it). Effect
#: classification gets the first half; past the whole, the call is answered at once.
HOOK_BUDGET = 10.0
#: What a PreToolUse that cannot be checked (the ledger unreachable, the payload unreadable)
#: gets: "open" (no decision, a notice for the user) or "closed" (an effect-capable call is
#: denied). ``ONSTATION_HOOK_FAIL`` and the workspace configuration's ``hook_fail`` set it;
#: either saying "closed" makes it closed. See docs/hooks.md for why open is the default.
HOOK_FAIL_DEFAULT = "open"


def _note(text: str) -> None:
    sys.stderr.write("onstation: " + text.replace("\n", " ")[:500] + "\n")


def _split_db(args: list[str]) -> tuple[list[str], str | None]:
    rest: list[str] = []
    db: str | None = None
    it = iter(args)
    for arg in it:
        if arg == "--db":
            db = next(it, None)
        elif arg.startswith("--db="):
            db = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return rest, db


def _read_stdin() -> tuple[bytes, bool]:
    """The payload's first MAX_PAYLOAD + 1 bytes, and whether there was more."""
    stream = sys.stdin.buffer
    raw = stream.read(MAX_PAYLOAD + 1)
    if len(raw) <= MAX_PAYLOAD:
        return raw, False
    drained = 0
    while drained < MAX_DRAIN:
        chunk = stream.read(1 << 20)
        if not chunk:
            break
        drained += len(chunk)
    return raw, True


# A JSON string (escapes included) is one token, so nothing inside a string is structure.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'


def _pattern(rest: bytes) -> Any:
    """A JSON string or one of ``rest``'s structural characters; ``re`` is imported only
    here, off the common path (a payload nested within the limit, read whole)."""
    import re

    return re.compile(_STRING + rest, re.DOTALL)


def _too_deep(raw: bytes, limit: int) -> bool:
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # the common case, answered at C speed
    depth = 0
    for match in _pattern(rb"|[][{}]").finditer(raw):
        char = raw[match.start()]
        if char in b"[{":
            depth += 1
            if depth > limit:
                return True
        elif char in b"]}":
            depth -= 1
    return False


def _parse(raw: bytes, oversized: bool) -> tuple[dict[str, Any] | None, str]:
    """The payload, or None and why not. Never raises, and takes time linear in its size."""
    if oversized:
        return None, f"payload larger than {MAX_PAYLOAD // 1024} KiB"
    if _too_deep(raw, MAX_DEPTH):
        return None, f"payload nested deeper than {MAX_DEPTH} levels"
    try:
        payload = loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # ValueError: also a 5,000-digit integer
        return None, f"payload is not JSON ({exc.__class__.__name__})"
    if not isinstance(payload, dict):
        return None, "payload is not a JSON object"
    return payload, ""


def _json_string(token: bytes) -> str | None:
    if len(token) > 8192:
        return None
    try:
        value = loads(token.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _top_level(raw: bytes, keys: tuple[str, ...]) -> dict[str, str]:
    """String values of top-level keys of a JSON object that may not parse as a whole.

    Hosts write ``session_id`` first, so this stops within the first few tokens of a real
    payload whatever follows it (a 100,000-deep array, a 5,000-digit number, a truncation).
    """
    found: dict[str, str] = {}
    depth = 0
    want_key = False
    key: bytes | None = None
    value_of: str | None = None
    for count, match in enumerate(_pattern(rb"|[][{}:,]").finditer(raw)):
        if count >= MAX_SCAN_TOKENS:
            break
        token = match.group()
        if token[:1] == b'"':
            if depth == 1 and want_key:
                key, want_key = token, False
            elif depth == 1 and value_of is not None:
                text = _json_string(token)
                if text is not None:
                    found.setdefault(value_of, text)
                    if len(found) == len(keys):
                        break
            value_of = None
            continue
        if token == b":":
            name = _json_string(key) if depth == 1 and key is not None else None
            value_of = name if name in keys else None
            key = None
            continue
        value_of = None
        if token in (b"{", b"["):
            depth += 1
            if depth == 1 and token == b"[":
                break  # not an object
            want_key = depth == 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                break
        elif depth == 1:  # ","
            want_key, key = True, None
    return found


def _open(
    payload: dict[str, Any], db: str | None, handed: Any = None, *, check_ahead: bool = True
) -> tuple[Any, Any]:
    """The ledger and the workspace configuration; ``handed``: the declined fast path's
    open connection (SQLite), which the ledger is opened on when it is to the same file, or
    its PostgreSQL backend, taken when it is connected to the same URL. ``check_ahead``:
    whether a PostgreSQL connection a daemon made ahead is checked before it is taken (one
    round trip), else the caller runs its work again when that one turns out dead."""
    from onstation.harness.config import load_config
    from onstation.ledger import Ledger

    given = payload.get("cwd")
    cwd = given if isinstance(given, str) and os.path.isdir(given) else os.getcwd()
    config = load_config(cwd)
    url = db or config.db or os.environ.get("ONSTATION_DB") or None
    if getattr(handed, "name", None) == "postgres":
        if handed.url == url:
            return Ledger(handed), config
        handed.close()  # another ledger's: not this call's to use
        handed = None
    if handed is None:  # a daemon's spare may have opened this very ledger ahead
        from onstation.relief.hotpath import _sqlite_path

        path = _sqlite_path(url)
        if path is not None:
            from onstation.ledger.fastpath import take_ahead

            handed = take_ahead(path)
    if handed is not None:
        from onstation.ledger.fastpath import handed_ledger

        ledger = handed_ledger(handed, url)
        if ledger is not None:
            return ledger, config
    return Ledger.open(url, check_ahead=check_ahead), config


def _budget() -> float:
    try:
        seconds = float(os.environ.get("ONSTATION_HOOK_BUDGET") or HOOK_BUDGET)
    except ValueError:
        return HOOK_BUDGET
    if not seconds > 0:  # also NaN
        return HOOK_BUDGET
    return min(max(seconds, 0.05), 600.0)


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


class _Answer:
    """Gives the call's one answer: the hook's own, or, past the budget, the watchdog's.

    The watchdog is a thread, not a signal: a signal handler runs only between bytecodes, so
    it cannot cut short a wait inside SQLite or a child process; the thread can answer and end
    the process whatever the main thread is blocked in. It is a bare ``_thread`` thread (the
    ``threading`` module costs the hot path its import): like a daemon thread, nothing waits
    for it at exit.
    """

    def __init__(
        self, harness: HarnessAdapter, event: str, budget: float, progress: dict[str, Any]
    ) -> None:
        self.harness = harness
        self.event = event
        self.budget = budget
        self.progress = progress
        self._given = _thread.allocate_lock()
        self._done = _thread.allocate_lock()  # held until the answer is given
        self._done.acquire()
        _thread.start_new_thread(self._watch, ())

    def give(self, output: dict[str, Any] | None, notes: list[str], code: int) -> int:
        self._given.acquire()  # never released: one answer per call
        for note in notes:
            _note(note)
        if output is not None:
            sys.stdout.write(dumps(output) + "\n")
        sys.stdout.flush()
        self._done.release()
        return code

    def cancel(self) -> None:
        """No answer after all (the call is ending by an exception): stop the watchdog."""
        if self._given.acquire(blocking=False):
            self._done.release()

    def _watch(self) -> None:
        if self._done.acquire(timeout=self.budget) or not self._given.acquire(blocking=False):
            return
        output, note = self._late_answer()
        try:
            _note(note)
            if output is not None:
                sys.stdout.write(dumps(output) + "\n")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(0)

    def _late_answer(self) -> tuple[dict[str, Any] | None, str]:
        spent = f"hook {self.event} ran out of its {self.budget:g} s budget"
        from onstation.relief import hook_texts as texts

        notice = texts.failed_open(self.event, f"over the {self.budget:g} s time budget")
        if self.event != "PreToolUse":
            output = self.harness.with_notice(
                self.event, self.harness.no_decision(self.event), notice
            )
            return output, f"{spent}; no decision"
        got = self.progress
        if got.get("dispatched") or (
            got.get("standing") == "admitted" and got.get("effect_capable") is False
        ):
            # A live body's inert call, or one whose every effect is journaled: let it run.
            return None, f"{spent}; no decision (the call was checked)"
        reason = texts.late(self.budget)
        return self.harness.with_notice(self.event, _deny(reason), reason), (
            f"{spent}; the call is denied"
        )


def _whole_process(given: bool | None, command: str) -> bool:
    """Whether this call is the whole process (``onstation hook ...``, ``onstation
    statusline``), not a call made in-process by a caller that goes on afterwards (a test, a
    driver)."""
    if given is not None:
        return given
    return sys.argv[1:2] == [command]


def _exit_now(code: int) -> None:
    """End the process at once, the answer flushed: the fast path's SQLite connection is left
    open, so SQLite's close never checkpoints and deletes the WAL (five fsyncs on every call;
    the next process reads the WAL instead, and ``relief.hotpath.settle_wal`` keeps it
    small), and the interpreter's teardown is skipped. Nothing else is pending: the call's
    one write was committed, and its answer is out."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def hook_main(args: list[str], *, whole_process: bool | None = None) -> int:
    """Run one hook call; always fail open, except that a body which may not act is denied.

    ``whole_process`` (default: whether the process was started as ``onstation hook``): end
    the process here, without closing the fast path's connection (:func:`_exit_now`), once
    the fast path has answered.
    """
    from onstation.harness.adapters import HOOK_HARNESSES, adapter

    args, db = _split_db(args)
    if len(args) != 2 or args[0] not in HOOK_HARNESSES:
        _note(USAGE_HOOK.format(harnesses="|".join(HOOK_HARNESSES)))
        return 1  # non-blocking in every harness: a broken install must not block the agent
    harness, event = args
    budget = _budget()
    deadline = time.monotonic() + budget / 2
    progress: dict[str, Any] = {}
    kept: list[Any] = []  # the answering path's open connection or ledger
    answer = _Answer(adapter(harness), event, budget, progress)
    try:
        output, notes, code = _run(harness, event, db, deadline, progress, kept)
    except Exception as exc:
        output, notes, code = None, [f"hook {event} failed open: {exc!r}"], 0
    except BaseException:
        answer.cancel()
        for conn in kept:
            conn.close()
        raise
    code = answer.give(output, notes, code)
    if kept and _whole_process(whole_process, "hook"):
        _exit_now(code)
    for conn in kept:
        conn.close()
    return code


def _run(
    harness: str,
    event: str,
    db: str | None,
    deadline: float,
    progress: dict[str, Any],
    kept: list[Any] | None = None,
) -> tuple[dict[str, Any] | None, list[str], int]:
    """(JSON to print, notes for stderr, exit code) of one call; the connection (fast path) or
    ledger (full path) that answered it is left open in ``kept``."""
    from onstation.harness.adapters import HookCall

    raw, oversized = _read_stdin()
    payload, problem = _parse(raw, oversized)
    if payload is None:
        fields = _top_level(raw, ("session_id", "cwd", "tool_name"))
        return _unjudged(harness, event, fields, db, problem)
    call = HookCall.from_payload(harness, event, payload)  # the payload's one parse
    notes: list[str] = []
    # ONSTATION_HOOK_FAST_PATH=off sends every call down the full path: an escape hatch, and
    # how the differential test compares the two.
    if os.environ.get("ONSTATION_HOOK_FAST_PATH", "on") != "off":
        try:
            from onstation.relief.hotpath import NOT_HANDLED, try_fast

            answered = try_fast(call, db, deadline, keep=kept)
            if answered is not NOT_HANDLED:
                return answered if isinstance(answered, dict) else None, [], 0
        except Exception as exc:
            notes.append(f"hook fast path skipped: {getattr(exc, 'message', None) or exc}")
    try:
        from onstation.relief.hooks import HookRunner

        # A connection a daemon made ahead is taken unchecked: a dead one is found by the
        # call's first statement, and the call then runs again on a new one.
        ledger, config = _open(payload, db, kept[0] if kept else None, check_ahead=False)
        try:
            try:
                answer = _handle(HookRunner(ledger, harness, config), deadline, progress, call)
            except Exception:
                # A daemon's connection, taken without a round trip to check it, that the
                # server had ended: nothing was committed on it, so the call runs again on
                # a new connection.
                if not ledger.backend.dead_before_commit():
                    raise
                ledger.close()
                ledger = type(ledger).open(ledger.backend.url)
                answer = _handle(HookRunner(ledger, harness, config), deadline, progress, call)
        except BaseException:
            ledger.close()
            raise
        # Answered: left open for the caller, like the fast path's connection, so that a
        # whole-process call ends without the close's WAL checkpoint (see _exit_now).
        if kept is None:
            ledger.close()
        else:
            ledger.leave_open()
            kept.append(ledger)
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        output, late, code = _unjudged(harness, event, payload, db, message)
        return output, notes + late, code
    return answer.output, notes + answer.notes, answer.exit_code


def _handle(runner: Any, deadline: float, progress: dict[str, Any], call: Any) -> Any:
    """``runner``'s answer to ``call`` (a ``HookRunner``), within the call's budget."""
    runner.deadline = deadline
    runner.progress = progress
    return runner.handle(call)


def _unjudged(
    harness: str, event: str, fields: dict[str, Any], db: str | None, problem: str
) -> tuple[dict[str, Any] | None, list[str], int]:
    """A call that could not be read or answered: fail open, unless it is a PreToolUse from a
    known session that is not the live body: that is denied all the same."""
    session_id = fields.get("session_id")
    if event == "PreToolUse" and isinstance(session_id, str) and session_id:
        try:
            answer = _judge_session(harness, session_id, fields, db, problem)
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            problem = f"{problem}; its session could not be judged ({message})"
        else:
            if answer is not None:
                denied = "; ".join([f"hook PreToolUse denied: {problem}", *answer.notes])
                return answer.output, [denied], 0
    from onstation.harness.adapters import adapter
    from onstation.relief import hook_texts as texts

    host = adapter(harness)
    mode, why = _fail_mode(fields)
    notes = [why] if why else []
    if event == "PreToolUse" and mode == "closed" and _maybe_effect(harness, fields):
        reason = texts.fail_closed(problem)
        notes.append(f"hook PreToolUse denied (fail closed): {problem}")
        return host.with_notice(event, _deny(reason), reason), notes, 0
    notice = texts.failed_open(event, problem)
    notes.append(f"hook {event} failed open: {problem}")
    return host.with_notice(event, host.no_decision(event), notice), notes, 0


def _fail_mode(fields: dict[str, Any]) -> tuple[str, str]:
    """("open" or "closed", a note when a setting was not understood). The configuration
    file is read raw: whatever else is wrong in it, its ``hook_fail`` still counts."""
    from onstation.relief.hotpath import raw_config

    given = fields.get("cwd")
    cwd = given if isinstance(given, str) and os.path.isdir(given) else os.getcwd()
    config = raw_config(cwd) or {}
    settings = (("ONSTATION_HOOK_FAIL", os.environ.get("ONSTATION_HOOK_FAIL") or None),
                ("hook_fail", config.get("hook_fail")))  # fmt: skip
    for name, value in settings:
        if value is None or value == "open":
            continue
        if value == "closed":
            return "closed", ""
        # A misspelt setting is taken as the safe one.
        return "closed", f"{name}={str(value)[:40]!r} is not open or closed: taken as closed"
    return HOOK_FAIL_DEFAULT, ""


def _maybe_effect(harness: str, fields: dict[str, Any]) -> bool:
    """Whether a PreToolUse may cause an effect, classified without the ledger; True when
    that cannot be shown otherwise (an unreadable payload, a classifier failure)."""
    if not isinstance(fields.get("tool_input"), dict):
        return True
    try:
        from onstation.harness.adapters import HookCall
        from onstation.relief.hotpath import _effect_capable, raw_config

        call = HookCall.from_payload(harness, "PreToolUse", fields)
        cwd = call.cwd if call.cwd is not None and os.path.isdir(call.cwd) else os.getcwd()
        config = raw_config(cwd)
        return _effect_capable(call, config or {}, time.monotonic() + 2.0) is not False
    except Exception:
        return True


def _judge_session(
    harness: str, session_id: str, fields: dict[str, Any], db: str | None, problem: str
) -> Any:
    from onstation.harness.config import load_config
    from onstation.relief.hotpath import _sqlite_path

    given = fields.get("cwd")
    cwd = given if isinstance(given, str) and os.path.isdir(given) else os.getcwd()
    config = load_config(cwd)
    url = db or config.db or os.environ.get("ONSTATION_DB") or None
    path = _sqlite_path(url)
    if path is not None and not os.path.isfile(path):
        return None  # no ledger: no session is known, none is fenced
    from onstation.ledger import Ledger
    from onstation.relief.hooks import HookRunner

    with Ledger.open(url) as ledger:
        runner = HookRunner(ledger, harness, config)
        return runner.deny_unjudged(session_id, fields.get("tool_name"), problem)


def _wrapped(command: str, raw: bytes) -> str:
    import subprocess

    try:
        done = subprocess.run(  # noqa: S602 - the user's own status line command, as configured
            command, shell=True, input=raw, capture_output=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _note(f"wrapped status line failed: {exc}")
        return ""
    return done.stdout.decode("utf-8", "replace").rstrip("\n")


def statusline_main(args: list[str], *, whole_process: bool | None = None) -> int:
    """Record the status line's telemetry and print one line: tier, percent, generation.

    The common line (an admitted body, its tier unchanged) is answered on the fast path
    (:mod:`onstation.relief.fast_status`); ``whole_process`` as for :func:`hook_main`."""
    args, db = _split_db(args)
    wrap: str | None = None
    if args[:1] == ["--wrap"] and len(args) == 2:
        wrap = args[1]
    elif args:
        _note(USAGE_STATUS)
        return 1
    raw = sys.stdin.buffer.read(MAX_PAYLOAD)
    before = _wrapped(wrap, raw) if wrap else ""
    line = "onstation: no telemetry"
    kept: list[Any] = []  # the fast path's open connection, if it answered
    try:
        payload = loads(raw.decode("utf-8"))
        if isinstance(payload, dict):
            fast = _fast_status_line(payload, db, kept)
            # A declined PostgreSQL fast path hands its connection on; an SQLite one stays
            # open beside the full path's, which closes its own (closing the last
            # connection would checkpoint and delete the WAL).
            handed = kept[0] if kept and getattr(kept[0], "name", None) == "postgres" else None
            line = fast or _status_line(payload, db, handed)
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        _note(f"statusline failed open: {message}")
    sys.stdout.write((before + "\n" if before else "") + line + "\n")
    if kept and _whole_process(whole_process, "statusline"):
        _exit_now(0)
    for conn in kept:
        conn.close()
    return 0


def _fast_status_line(payload: dict[str, Any], db: str | None, kept: list[Any]) -> str | None:
    """The fast path's line, or None for the full path (``ONSTATION_HOOK_FAST_PATH=off``
    sends every call there, as for the hooks)."""
    if os.environ.get("ONSTATION_HOOK_FAST_PATH", "on") == "off":
        return None
    from onstation.relief.fast_status import try_status

    try:
        line = try_status(payload, db, keep=kept)
    except Exception as exc:  # the full path answers, and says what is wrong if it is
        _note(f"statusline fast path skipped: {getattr(exc, 'message', None) or exc}")
        return None
    return line if isinstance(line, str) else None


def _status_line(payload: dict[str, Any], db: str | None, handed: Any = None) -> str:
    """The full path's line; ``handed``: the declined fast path's connection (``_open``)."""
    from onstation.core.hull import (
        fill_from_statusline,
        statusline_declared_window,
        statusline_usage_cleared,
    )
    from onstation.harness.adapters import CLAUDE_CODE  # the status line is Claude Code's
    from onstation.relief.hooks import HookRunner

    reading = fill_from_statusline(payload)
    session_id = payload.get("session_id")
    ledger, config = _open(payload, db, handed)
    try:
        runner = HookRunner(ledger, CLAUDE_CODE.name, config)
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
        found = runner.records.node_for_workspace(str(cwd))
        node = found[0] if found else config.node
        if node is None or not isinstance(session_id, str) or not session_id:
            pct = "?" if reading is None else f"{reading.percent:.0f}%"
            return f"onstation: unmanaged workspace · context {pct}"
        admission = runner.records.admit_session(
            session_id, harness=CLAUDE_CODE.name, node=node, workspace=found[1] if found else None
        )
        session = admission.session
        state = "body" if admission.admitted else ("FENCED" if admission.fenced else "NOT ADMITTED")
        declared = statusline_declared_window(payload)
        if admission.admitted:
            # The window the host declares is remembered for the body: the hooks read the
            # transcript against it too, so both say one percent.
            if declared and declared != session.context_window:
                runner.records.set_context_window(session.session_id, declared)
            if statusline_usage_cleared(payload):  # right after /compact (or before any usage)
                runner.records.start_epoch(session, signal="statusline current_usage null")
        if reading is not None and declared is None and session.context_window:
            reading = fill_from_statusline(payload, declared_window=session.context_window)
        if reading is None:
            return f"⚓ {node} gen {session.generation} {state} · context unknown"
        tier = runner.observe_fill(session, reading) if admission.admitted else "-"
        if tier == "unknown":  # an impossible figure: recorded as rejected, never acted on
            return (
                f"⚓ {node} gen {session.generation} {state} · context unknown "
                f"(a reading of {reading.percent:.0f}% was rejected)"
            )
        window = (
            f"{reading.window_tokens // 1000}k"
            if reading.window_tokens < 1_000_000
            else (f"{reading.window_tokens / 1_000_000:g}M")
        )
        line = (
            f"⚓ {node} gen {session.generation} {state} · {tier.capitalize()} "
            f"{reading.percent:.1f}% of {window}"
        )
        if admission.admitted:
            from onstation.core.compaction import compaction_warning
            from onstation.harness.compaction import claude_point

            point = claude_point(reading.window_tokens, project=session.workspace)
            warning = compaction_warning(runner._policy(), point)
            if warning is not None:
                line += f"\n⚠ onstation: {warning}"
        return line
    finally:
        ledger.close()
