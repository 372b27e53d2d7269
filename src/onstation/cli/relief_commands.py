"""Commands of the relief: relieve, challenge, tasks, team status, reports, supervise."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

import click

from onstation.cli.common import (
    Options,
    body_generation,
    command_options,
    emit,
    plain_output,
    positive_int,
)
from onstation.core.errors import BadInput
from onstation.core.names import validate_name
from onstation.harness.adapters import FAKE, HOOK_HARNESSES


def _by() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "operator"


@click.command("relieve")
@click.argument("node_name", metavar="NODE")
@click.option(
    "--harness",
    default=None,
    type=click.Choice([*HOOK_HARNESSES, "command", "interactive", FAKE.name]),
    help="What launches the successor (default: what the body runs under, recorded "
    "at its admission; interactive: the next session started in the workspace "
    "takes over; fake: the test stand-in, only on a scratch workspace).",
)
@click.option("--command", "command_template", default=None, help="--harness command's template.")
@click.option("--model", default=None, help="Model for a claude-code or codex successor.")
@click.option("--execution-class", default="real-provider", show_default=True,
              type=click.Choice(["real-provider", "fake", "replay"]),
              help="A command successor's class (fake: an explicit simulation).")  # fmt: skip
@click.option("--emergency", is_flag=True, help="Do not wait for a brief: build it from evidence.")
@click.option("--native", is_flag=True,
              help="Resume the predecessor's provider session, only with proof (else a fresh "
                   "successor).")  # fmt: skip
@click.option("--brief-wait", type=float, default=30.0, show_default=True, help="Seconds.")
@click.option("--challenge-wait", type=float, default=60.0, show_default=True, help="Seconds.")
@click.option("--shutdown-wait", type=float, default=10.0, show_default=True, help="Seconds.")
@click.option("--workspace", default=None, help="Workspace (default: the node's bound one).")
@click.option("--capacity", "capacity_file", default=None, help="Capacity evidence JSON file.")
@click.option("--facts", "facts_file", default=None, help="Capsule parts the agent states (JSON).")
@click.option("--by", "by", default=None, help="Who relieves (default: the current user).")
@click.option("--arg", "launch_args", multiple=True, help="Extra argument for the successor.")
@click.option("--incident", default=None,
              type=click.Choice(["context-pressure", "crash", "hang", "operator"]),
              help="Why the body is relieved (the incident class of the plan); default: what "
                   "the evidence shows (its process gone: crash; its lease expired: hang; "
                   "its hull at Red or Critical: context-pressure; else operator).")  # fmt: skip
@click.option(
    "--exchange-wait",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds to wait for an open APPROACH/CHECKPOINT exchange to close.",
)
@command_options
def relieve_cmd(
    node_name: str, harness: str | None, command_template: str | None, model: str | None,
    execution_class: str, emergency: bool, native: bool, brief_wait: float, challenge_wait: float,
    shutdown_wait: float, workspace: str | None, capacity_file: str | None,
    facts_file: str | None, by: str | None, launch_args: tuple[str, ...], incident: str | None,
    exchange_wait: float, opts: Options,
) -> None:  # fmt: skip
    """Relieve NODE: brief, fence, reconcile, capsule, verdict, and only if READY launch,
    challenge, shut down the predecessor and settle.

    What would stop the relief after the fence (a halt, the breaker, the respawn cap, no
    objective, no harness, no capacity evidence, an open coordinator exchange) is checked
    first: then nothing is fenced, the body stays live, and the reason and the command that
    fixes it are printed (exit 4)."""
    from onstation.harness.launch import launcher_for
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import HarnessLedger
    from onstation.relief.relieve import Relief, ReliefOptions

    validate_name(node_name, "node")
    for value, name in ((brief_wait, "--brief-wait"), (challenge_wait, "--challenge-wait"),
                        (shutdown_wait, "--shutdown-wait"),
                        (exchange_wait, "--exchange-wait")):  # fmt: skip
        if value < 0:
            raise BadInput(f"{name}: must not be negative")
    for path, name in ((capacity_file, "--capacity"), (facts_file, "--facts")):
        if path is not None:
            # Read and parsed here, before the relief records anything: the relief reads them
            # again only after the fence, where a bad file would leave the body fenced.
            from onstation.core.canonical import loads_strict
            from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

            loads_strict(read_bounded(path, MAX_SMALL_JSON_BYTES, name), name)
    launcher = None
    if harness is not None:
        launcher = launcher_for(harness, model=model, command=command_template)
        if harness == "command":
            launcher.execution_class = execution_class
    live = _LiveLine(enabled=not opts.json, plain=plain_output(sys.stderr))
    say = (lambda _t: None) if opts.json else live.say
    options = ReliefOptions(
        launcher=launcher, by=by or _by(), cause="manual" if not emergency else "emergency",
        incident=incident, exchange_wait=exchange_wait,
        emergency=emergency, native=native, brief_wait=brief_wait,
        challenge_wait=challenge_wait,
        shutdown_wait=shutdown_wait, workspace=workspace,
        db=opts.db or os.environ.get("ONSTATION_DB"), capacity_file=capacity_file,
        facts_file=facts_file,
        launch_args=launch_args, progress=say, waiting=live.waiting,
    )  # fmt: skip
    with Ledger.open(opts.db) as ledger:
        ledger.get_node(node_name)  # an unknown identity is bad input, before anything else
        if launcher is None and HarnessLedger(ledger).recorded_launcher(node_name) is None:
            # Never a stand-in by default: with nothing recorded, the operator chooses.
            raise BadInput(
                f"--harness: no body of {node_name} recorded what it runs under; give "
                "--harness claude-code, codex, command (with --command) or interactive",
                field="--harness",
            )  # fmt: skip
        try:
            outcome = Relief(ledger, node_name, options).run()
        finally:
            live.clear()
    emit(
        opts,
        outcome.to_json(),
        f"relief {outcome.relief_id} of {outcome.node}: {outcome.verdict}, {outcome.state}"
        + (f" (generation {outcome.to_generation})" if outcome.to_generation else "")
        + (f"\nreport: {outcome.report_path}" if outcome.report_path else "")
        + "".join(f"\n  {reason}" for reason in (outcome.reasons if not outcome.fenced else []))
        + "".join(f"\nto fix: {fix}" for fix in outcome.fix),
    )
    if outcome.state not in ("SETTLED",):
        raise SystemExit(4 if outcome.state in ("NOT_LAUNCHED", "BLOCKED", "NOT_STARTED") else 1)


class _LiveLine:
    """Progress for people: step lines, and while waiting either one live line redrawn in
    place (a colour-capable terminal) or one plain line per wait (``NO_COLOR``,
    ``TERM=dumb``, or stderr not a terminal: see :func:`plain_output`)."""

    def __init__(self, *, enabled: bool, plain: bool) -> None:
        self.enabled = enabled
        self.plain = plain
        self.shown = False
        self.announced: str | None = None

    def clear(self) -> None:
        if self.shown:
            click.echo("\r\x1b[2K", nl=False, err=True)
            self.shown = False

    def say(self, text: str) -> None:
        self.clear()
        self.announced = None
        click.echo(f"  · {text}", err=True)

    def waiting(self, what: str, elapsed: float, total: float) -> None:
        if not self.enabled:
            return
        if self.plain:
            # One line when a wait begins; never a redraw.
            if self.announced != what:
                self.announced = what
                click.echo(f"    waiting for {what} (up to {total:.0f} s)", err=True)
            return
        width = 20
        done = min(width, int(width * elapsed / total)) if total > 0 else width
        bar = "#" * done + "." * (width - done)
        click.echo(f"\r\x1b[2K    waiting for {what} [{bar}] {elapsed:4.0f}/{total:.0f} s",
                   nl=False, err=True)  # fmt: skip
        self.shown = True


@click.group("challenge")
def challenge() -> None:
    """A successor's challenge."""


@challenge.command("answer")
@click.argument("node_name", metavar="NODE")
@click.option("--generation", type=int, required=True, help="The successor's generation.")
@click.option("--echo", "echo", default=None, help="The challenge JSON, exactly as received.")
@click.option("--echo-file", default=None, help="A file holding the challenge JSON.")
@command_options
def challenge_answer(
    node_name: str, generation: int, echo: str | None, echo_file: str | None, opts: Options
) -> None:
    """Echo the challenge (exit 0), or be refused: 3 stale generation, 5 wrong echo."""
    from onstation.core.canonical import loads_strict
    from onstation.harness import witness as witnesses
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger, new_nonce

    validate_name(node_name, "node")
    positive_int(generation, "--generation")
    if (echo is None) == (echo_file is None):
        raise BadInput("give exactly one of --echo JSON or --echo-file PATH")
    if echo_file is not None:
        from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

        data = loads_strict(read_bounded(echo_file, MAX_SMALL_JSON_BYTES, "--echo-file"),
                            "--echo-file")  # fmt: skip
    else:
        data = loads_strict(str(echo), "--echo")
    if not isinstance(data, dict):
        raise BadInput("--echo: must be a JSON object")
    with Ledger.open(opts.db) as ledger:
        # The body answering is the host process that ran this command, found as a hook finds
        # it: up the parent chain past the shells between. A host's tool shell (Claude Code
        # wraps each Bash command in its own `bash -c`) exits right after the command, so
        # witnessing our direct parent would name a process gone before the relief looks.
        seen = witnesses.host_process(nonce=new_nonce(), observed_at=ledger.now().isoformat(),
                                      wrappers=witnesses.SHELL_WRAPPERS)  # fmt: skip
        if seen is None:
            seen = witnesses.observe(witnesses.caller_parent_pid(), nonce=new_nonce(),
                                     observed_at=ledger.now().isoformat())  # fmt: skip
        birth = ReliefLedger(ledger).answer_challenge(
            node_name, generation=generation, echo=data,
            witness=None if seen is None else seen.to_json(),
        )  # fmt: skip
    emit(opts, birth.to_json(),
         f"challenge answered for {node_name} generation {generation}; effect rights follow "
         "once the relief sees your process and heartbeat")  # fmt: skip


@click.group("task")
def task() -> None:
    """Tasks: status, owner and hand-off notes."""


@task.command("create")
@click.argument("title")
@click.option("--owner", default=None)
@click.option("--status", default="pending", show_default=True)
@click.option("--parent", "parent_id", type=int, default=None)
@click.option("--brief", "brief_path", default=None)
@click.option("--note", default=None)
@command_options
def task_create(title: str, owner: str | None, status: str, parent_id: int | None,
                brief_path: str | None, note: str | None, opts: Options) -> None:  # fmt: skip
    """Create a task."""
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger

    with Ledger.open(opts.db) as ledger:
        got = ReliefLedger(ledger).create_task(title, owner=owner, status=status,
                                               parent_id=parent_id, brief_path=brief_path,
                                               note=note, by=_by())  # fmt: skip
    emit(opts, got.to_json(), f"task {got.task_id}: {got.title} [{got.status}]")


@task.command("update")
@click.argument("task_id", type=int)
@click.option("--status", default=None)
@click.option("--owner", default=None)
@click.option("--note", default=None)
@click.option("--brief", "brief_path", default=None)
@click.option(
    "--as",
    "as_node",
    default=None,
    help="The identity whose body updates the task (default: ONSTATION_NODE).",
)
@click.option("--generation", type=int, default=None,
              help="That body's generation (default: ONSTATION_GENERATION).")  # fmt: skip
@command_options
def task_update(task_id: int, status: str | None, owner: str | None, note: str | None,
                brief_path: str | None, as_node: str | None, generation: int | None,
                opts: Options) -> None:  # fmt: skip
    """Update a task (e.g. keep in_progress with a hand-off note).

    A body's update (``--as`` or ONSTATION_NODE) carries its generation; a fenced generation
    is denied (exit 3) and nothing is changed."""
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger

    as_node = as_node or os.environ.get("ONSTATION_NODE") or None
    if as_node is not None:
        validate_name(as_node, "--as")
        generation = body_generation(generation, as_node, required=True, what="task update")
    elif generation is not None:
        raise BadInput("--generation: give --as NODE, the identity it is a generation of")
    with Ledger.open(opts.db) as ledger:
        got = ReliefLedger(ledger).update_task(task_id, status=status, owner=owner, note=note,
                                               brief_path=brief_path, by=_by(), as_node=as_node,
                                               generation=generation)  # fmt: skip
    emit(opts, got.to_json(), f"task {got.task_id}: {got.title} [{got.status}]")


@task.command("list")
@click.option("--owner", default=None)
@command_options
def task_list(owner: str | None, opts: Options) -> None:
    """Tasks, oldest first."""
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger

    with Ledger.open(opts.db, create=False) as ledger:
        rows = ReliefLedger(ledger).tasks(owner)
    emit(opts, {"tasks": [t.to_json() for t in rows]},
         lambda: "\n".join(f"{t.task_id:>4} {t.status:<12} {t.owner or '-':<16} {t.title}"
                           for t in rows) or "no tasks")  # fmt: skip


@click.group("team")
def team() -> None:
    """The team as the ledger sees it."""


@team.command("status")
@command_options
def team_status(opts: Options) -> None:
    """Identity, generation, tier, body, last heartbeat, open effects."""
    from onstation.ledger import Ledger
    from onstation.relief.team import team_rows

    with Ledger.open(opts.db, create=False) as ledger:
        rows = team_rows(ledger)
    emit(opts, {"team": rows}, lambda: _table(rows))


def _table(rows: list[dict[str, object]]) -> str:
    headers = ["identity", "gen", "tier", "body", "witness", "heartbeat", "open effects"]
    keys = ["node", "generation", "tier", "body", "witness", "heartbeat_at", "open_effects"]
    cells = [[str(r.get(k) if r.get(k) is not None else "-") for k in keys] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(headers)]  # fmt: skip
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body]) if rows else "no team"


@click.command("report")
@click.argument("node_name", metavar="NODE")
@command_options
def report_cmd(node_name: str, opts: Options) -> None:
    """The discontinuity reports of NODE's reliefs."""
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger

    validate_name(node_name, "node")
    from onstation.harness.files import MAX_DOCUMENT_BYTES, read_bounded
    from onstation.ledger.bodies import HarnessLedger

    with Ledger.open(opts.db, create=False) as ledger:
        reliefs = ReliefLedger(ledger).reliefs(node_name)
        late = HarnessLedger(ledger).late_documents(node_name)
    if not reliefs:
        raise BadInput(f"{node_name} has no reliefs")
    texts = []
    for relief in reliefs:
        path = relief.report_path
        text, missing = "", "no report file"
        if path and Path(path).is_file():
            try:
                raw = read_bounded(path, MAX_DOCUMENT_BYTES, "report")
                text = raw.decode("utf-8", "replace")
            except BadInput as exc:  # one unreadable report must not hide the others
                missing = exc.message
        texts.append(text or f"relief {relief.relief_id}: {relief.state} ({missing})")
        # A brief that arrived after the fence (even after the report was written) is shown
        # with the relief that fenced its writer, as late, untrusted evidence.
        arrived = [d for d in late if d.generation == relief.from_generation]
        if arrived and (not text or "## Late evidence" not in text):
            texts[-1] += "\n\n## Late evidence (untrusted)\n\n" + "\n".join(
                f"- a brief written by generation {d.generation} after its fence: {d.path}"
                for d in arrived
            )
    emit(opts, {"reliefs": [r.to_json() for r in reliefs],
                "late_evidence": [d.to_json() for d in late]}, "\n\n".join(texts))  # fmt: skip


@click.command("supervise")
@click.option("--team", "team_file", default=None, help="Team file (JSON): nodes to watch.")
@click.option("--harness", default=None,
              type=click.Choice([*HOOK_HARNESSES, "interactive", FAKE.name]),
              help="What launches successors (default: what each body runs under, recorded at "
                   "its admission; a body with nothing recorded is not relieved).")  # fmt: skip
@click.option("--poll", type=float, default=1.0, show_default=True, help="Seconds between looks.")
@click.option("--once", is_flag=True, help="Look once, act, and stop.")
@click.option("--max-seconds", type=float, default=None, help="Stop after this long.")
@click.option("--brief-wait", type=float, default=30.0, show_default=True, help="Seconds.")
@click.option("--challenge-wait", type=float, default=60.0, show_default=True, help="Seconds.")
@command_options
def supervise_cmd(team_file: str | None, harness: str | None, poll: float, once: bool,
                  max_seconds: float | None, brief_wait: float, challenge_wait: float,
                  opts: Options) -> None:  # fmt: skip
    """The team lead loop: watch tiers, relieve at Red, stop on halt."""
    from onstation.ledger import Ledger
    from onstation.relief.team import supervise

    for value, name in ((poll, "--poll"), (brief_wait, "--brief-wait"),
                        (challenge_wait, "--challenge-wait")):  # fmt: skip
        if value < 0:
            raise BadInput(f"{name}: must not be negative")
    nodes: list[str] | None = None
    if team_file is not None:
        from onstation.core.canonical import loads_strict
        from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

        data = loads_strict(read_bounded(team_file, MAX_SMALL_JSON_BYTES, "--team"), "--team")
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise BadInput('--team: must be {"nodes": ["NAME", ...]}')
        nodes = [validate_name(str(n), "--team node") for n in data["nodes"]]
    with Ledger.open(opts.db) as ledger:
        actions = supervise(ledger, nodes=nodes, harness=harness, poll=poll, once=once,
                            max_seconds=max_seconds, db=opts.db or os.environ.get("ONSTATION_DB"),
                            say=lambda t: click.echo(t, err=True), brief_wait=brief_wait,
                            challenge_wait=challenge_wait)  # fmt: skip
    emit(opts, {"actions": actions}, "\n".join(actions) or "nothing to do")
