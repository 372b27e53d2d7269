"""One scenario end to end: build the world, run the scripted body, relieve it, and measure
the brief, the capsule, the successor prompt and the report against the ground truth."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.handover.truth import (
    Fact,
    Secret,
    evidence_only,
    leaked,
    outside_evidence,
    recall,
    uncited_claims,
)
from bench.handover.world import (
    NODE,
    WAIT,
    Body,
    Truth,
    World,
    baseline_text,
    on_time_brief,
    remove_mirror,
    work,
)
from onstation.harness.fake_agent.common import onstation_argv

RELIEF_KINDS = ("relief.requested", "relief.emergency", "relief_requested")
RED_TOKENS = 70_000  # 35 % of 200k: Red
CRITICAL_TOKENS = 80_000  # 40 %: Critical


@dataclass(frozen=True)
class Scenario:
    """How the body is relieved: ``on-time`` (it writes its brief when asked), ``emergency``
    (at Critical, silent), ``crash`` (killed mid-push); ``plant`` adds secrets/instructions."""

    key: str
    title: str
    mode: str
    plant: bool = False


@dataclass
class Result:
    """What one scenario's relief produced, and its measurements."""

    scenario: Scenario
    truth: Truth
    outcome: dict[str, Any] = field(default_factory=dict)
    brief: dict[str, Any] | None = None
    capsule: dict[str, Any] | None = None
    prompt: str | None = None
    report: str = ""
    #: Every other file the relief left under the workspace's ``.bridge/`` (briefs, logs).
    other: str = ""
    seconds: float = 0.0
    error: str | None = None
    missed: dict[str, list[Fact]] = field(default_factory=dict)
    recalled: dict[str, int] = field(default_factory=dict)
    uncited: dict[str, int] = field(default_factory=dict)
    leaks: dict[str, list[Secret]] = field(default_factory=dict)
    losses_missing: list[str] = field(default_factory=list)
    instructions_outside: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.truth.facts)

    @property
    def brief_tokens(self) -> int | None:
        text = (self.brief or {}).get("markdown")
        return None if not isinstance(text, str) else len(text) // 4

    @property
    def prompt_tokens(self) -> int | None:
        return None if self.prompt is None else len(self.prompt) // 4


def run(scenario: Scenario, root: Path, say: Any) -> Result:
    """Build, work, relieve, measure; the world under ``root`` is left for the caller."""
    began = time.monotonic()
    truth = Truth()
    result = Result(scenario, truth)
    world = World(root, plant=scenario.plant)
    world.build()
    body = Body(world)
    try:
        ids = work(world, body, truth)
        if scenario.mode == "crash":
            body.tokens = CRITICAL_TOKENS - 12_000
            body.bash(["git", "push", "mirror", "main"], crash=True)
            remove_mirror(world)
        else:
            body.tokens = (RED_TOKENS if scenario.mode == "on-time" else CRITICAL_TOKENS) - 2_000
            body.bash(["git", "status", "--short"])  # the hooks read the fill after this call
        _push_facts(world, truth, crashed=scenario.mode == "crash")
        if scenario.mode != "on-time":
            truth.losses.append(("no-brief", "turnover brief"))
        truth.baseline = baseline_text(world)
        result.outcome = _relieve(world, body, scenario, truth, ids)
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if scenario.mode == "crash":
            body.host = None
        body.close()
    _collect(world, result)
    _wait_successor(world, result)
    _score(result)
    result.seconds = time.monotonic() - began
    failed = f" (error: {result.error})" if result.error else ""
    say(f"  {scenario.title}: {result.outcome.get('verdict')} / {result.outcome.get('state')} "
        f"in {result.seconds:.1f} s{failed}")  # fmt: skip
    return result


def _push_facts(world: World, truth: Truth, *, crashed: bool) -> None:
    from onstation.ledger import Ledger

    with Ledger.open(world.db) as ledger:
        pushes = [e for e in ledger.effects(NODE) if e.operation == "git.push"]
    for effect in pushes:
        where = "mirror" if "mirror" in str(effect.destination) else "origin"
        truth.fact("push", f"push to {where} ({effect.effect_id})", effect.effect_id)
        if crashed and effect.state.value == "DISPATCHED":
            truth.losses.append(("ambiguous-effect", effect.effect_id))


def _relieve(world: World, body: Body, scenario: Scenario, truth: Truth,
             ids: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    import subprocess

    argv = [*onstation_argv(), "relieve", NODE, "--harness", "fake", "--challenge-wait", "60",
            "--shutdown-wait", "0.5", "--json", "--arg=--steps=1", "--arg=--push-every=0",
            f"--arg=--log={world.root / 'successor.log'}"]  # fmt: skip
    if scenario.mode == "emergency":
        argv += ["--emergency"]
    elif scenario.mode == "crash":
        argv += ["--emergency", "--incident", "crash"]
    else:
        argv += ["--brief-wait", "60"]
    relief = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=world.env, cwd=world.root)  # fmt: skip
    try:
        if scenario.mode == "on-time":
            _answer_relief(world, body, truth, ids)
        out, err = relief.communicate(timeout=WAIT * 2)
    finally:
        if relief.poll() is None:
            relief.kill()
            relief.wait()
    try:
        return dict(json.loads(out))
    except ValueError:
        raise RuntimeError(f"relieve exit {relief.returncode}: {err.strip()[-500:]}") from None


def _answer_relief(world: World, body: Body, truth: Truth, ids: dict[str, int]) -> None:
    """The agent, when asked (the request reaches it through its hooks), writes its brief
    and stops, as the relief procedure asks."""
    deadline = time.monotonic() + WAIT
    target = world.app / "README.md"
    while time.monotonic() < deadline:
        listed = json.loads(world.must("message", "list", NODE, "--json"))
        if any(m.get("kind") in RELIEF_KINDS and m.get("sender_generation") is None
               for m in listed.get("messages") or []):  # fmt: skip
            break
        # A harmless call meanwhile: the hooks deliver what is queued for this body.
        body.tool("Read", {"file_path": str(target)}, lambda: (
            {"type": "text", "file": {"filePath": str(target), "content": target.read_text()}},
            True))  # fmt: skip
        time.sleep(0.3)
    else:
        raise RuntimeError("no relief request reached the body")
    on_time_brief(body, truth, ids)
    for active in (False, True):
        reply = body.hook("Stop", stop_hook_active=active, last_assistant_message="Handed over.")
        if reply.stop_reason is not None or reply.block_reason is None:
            break
    body.hook("SessionEnd", reason="other")


def _collect(world: World, result: Result) -> None:
    """The brief (as the ledger keeps it), the capsule, the prompt and the report."""
    shown = world.cli("brief", "show", NODE, "--json")
    if shown.returncode == 0:
        data = json.loads(shown.stdout)
        content = data.get("content", data) if isinstance(data, dict) else None
        result.brief = content if isinstance(content, dict) else None
    path = result.outcome.get("report_path")
    if isinstance(path, str) and Path(path).is_file():
        result.report = Path(path).read_text(encoding="utf-8")
    found = re.search(r"capsule: ([0-9a-f]{64})", result.report)
    digest = found.group(1) if found else _capsule_digest(world)
    if digest:
        shown = world.cli("capsule", "show", digest, "--json")
        if shown.returncode == 0:
            result.capsule = json.loads(shown.stdout)
    bridge = world.app / ".bridge"
    others = [p for p in sorted(bridge.rglob("*")) if p.is_file() and not p.is_symlink()]
    result.other = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in others)
    generation = result.outcome.get("to_generation")
    prompt = world.app / ".bridge" / "bodies" / f"{NODE}-g{generation}-prompt.md"
    if generation is not None and prompt.is_file():
        result.prompt = prompt.read_text(encoding="utf-8")


def _capsule_digest(world: World) -> str | None:
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger

    with Ledger.open(world.db) as ledger:
        for relief in reversed(ReliefLedger(ledger).reliefs(NODE)):
            digest = (relief.detail or {}).get("capsule_digest")
            if isinstance(digest, str):
                return digest
    return None


def _wait_successor(world: World, result: Result) -> None:
    """Let the launched successor finish its one step; stop it through its witness if not."""
    if result.outcome.get("state") != "SETTLED":
        return
    log = world.root / "successor.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        if any('"event": "exit"' in line for line in lines):
            return
        time.sleep(0.3)
    import signal

    from onstation.harness.witness import ProcessWitness, signal_if_match, wait_gone
    from onstation.ledger import Ledger
    from onstation.ledger.relief_records import ReliefLedger

    with Ledger.open(world.db) as ledger:
        birth = ReliefLedger(ledger).birth(NODE, int(result.outcome["to_generation"]))
    if birth is not None and birth.launch_witness is not None:
        seen = ProcessWitness.from_json(birth.launch_witness)
        if signal_if_match(seen, signal.SIGTERM).signalled and not wait_gone(seen, 5.0):
            signal_if_match(seen, signal.SIGKILL)


def _losses_section(report: str) -> str:
    found = re.search(r"^## Losses\n(.*?)(?=^## |\Z)", report, re.S | re.M)
    return found.group(1) if found else ""


def _score(result: Result) -> None:
    truth = result.truth
    documents: dict[str, Any] = {
        "brief": result.brief,
        "capsule": result.capsule,
        "capsule-cited": evidence_only(result.capsule),
        "prompt": result.prompt,
        "baseline": truth.baseline,
    }
    for name, document in documents.items():
        got, missed = recall(truth.facts, document)
        result.recalled[name], result.missed[name] = got, missed
    both = {id(f) for f in result.missed["brief"]} & {id(f) for f in result.missed["capsule"]}
    result.missed["handover"] = [f for f in truth.facts if id(f) in both]
    result.recalled["handover"] = result.total - len(result.missed["handover"])
    result.uncited = uncited_claims(result.capsule)
    texts = {
        "brief": json.dumps(result.brief, ensure_ascii=False) if result.brief else "",
        "capsule": json.dumps(result.capsule, ensure_ascii=False) if result.capsule else "",
        "prompt": result.prompt or "",
        "report": result.report,
        "other .bridge files": result.other,
    }
    for name, text in texts.items():
        found = leaked(truth.secrets, text)
        if found:
            result.leaks[name] = found
    losses = _losses_section(result.report).casefold()
    for kind, subject in truth.losses:
        if not any(kind in line and subject.casefold() in line for line in losses.splitlines()):
            result.losses_missing.append(f"{kind}: {subject}")
    if result.prompt is not None and truth.instructions:
        result.instructions_outside = outside_evidence(result.prompt, truth.instructions)
