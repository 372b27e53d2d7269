"""The scratch team's pace (issue 14): what each body of ``onstation demo`` is told."""

from __future__ import annotations

from pathlib import Path

from onstation.harness.fake_agent import Options, parse_args
from onstation.harness.fake_agent.control import lease_ttl
from onstation.relief import demo


def _options(member: demo.Member, *, successor: bool) -> Options:
    args = member.agent_args(Path("/scratch"), successor=successor)
    return parse_args(["--workspace", "/scratch/x", *args])


def test_first_bodies_think_and_successors_do_not() -> None:
    for member in demo.TEAM:
        first = _options(member, successor=False)
        later = _options(member, successor=True)
        # The first bodies' pace spaces the team's reliefs out; after a relief nothing is
        # due that waiting would make room for.
        assert first.step_seconds == member.first_think
        assert later.step_seconds == 0
        assert later.start_tokens == demo.SUCCESSOR_START_TOKENS


def test_the_login_executor_thinks_so_the_lead_can_ask_it_for_a_brief_in_time() -> None:
    # Red comes at the first call of its step 6; two think times of that step still follow
    # before its last call, and the coordinator (which needs none) is done by then.
    (login,) = [m for m in demo.TEAM if m.node == "exec-login"]
    (coord,) = [m for m in demo.TEAM if m.role == "coordinator"]
    assert login.first_think == demo.STEP_SECONDS > 0
    assert coord.first_think == 0


def test_every_body_beats_no_more_often_than_its_lease_needs() -> None:
    for member in demo.TEAM:
        for successor in (False, True):
            every = _options(member, successor=successor).heartbeat
            assert every is not None
            # The lease stays short (a silent body is noticed within 30 s), and a beat
            # comes once per third of it: three chances, no more process starts than that.
            assert lease_ttl(every) == 30
            assert every >= lease_ttl(every) / 3
