"""``onstation token``: the console's access tokens (create, list, revoke).

An operator token names a person; an agent token is bound to one identity and its current
generation (see :mod:`onstation.ledger.tokens`). A token's text is printed once, when it is
created, and never again: the ledger keeps only its secret's digest.
"""

from __future__ import annotations

from typing import Any

import click

from onstation.cli.common import Options, command_options, emit, open_ledger, operator_name
from onstation.core.errors import BadInput
from onstation.core.names import validate_name


def _describe(data: dict[str, Any]) -> str:
    who = (f"agent {data['node']}@{data['generation']}" if data["kind"] == "agent"
           else f"operator {data['name']}")  # fmt: skip
    state = (
        f"revoked {data['revoked_at']} by {data['revoked_by']}" if data["revoked_at"] else "live"
    )
    made = f"created {data['created_at']} by {data['created_by']}"
    return f"{data['token_id']}  {who}  {made}  {state}"


@click.group()
def token() -> None:
    """Access tokens of the operator's console (onstation serve)."""


@token.command("create")
@click.option("--operator", "operator", default=None, metavar="NAME",
              help="An operator token for the person NAME.")  # fmt: skip
@click.option("--agent", "agent", default=None, metavar="NODE",
              help="An agent token bound to NODE and one generation.")  # fmt: skip
@click.option("--generation", type=int, default=None,
              help="The agent token's generation (default: NODE's current one).")  # fmt: skip
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@command_options
def token_create(
    operator: str | None, agent: str | None, generation: int | None, by: str | None,
    opts: Options,
) -> None:  # fmt: skip
    """Create a token and print its text once (it is not kept)."""
    if (operator is None) == (agent is None):
        raise BadInput("give exactly one of --operator NAME and --agent NODE", field="kind")
    if operator is not None and generation is not None:
        raise BadInput("--generation applies to an agent token only", field="generation")
    by = by or operator_name()
    with open_ledger(opts) as ledger:
        if operator is not None:
            issued = ledger.create_operator_token(operator, by=by)
        else:
            assert agent is not None
            validate_name(agent, "node")
            if generation is None:
                generation = ledger.get_node(agent).generation
            issued = ledger.create_agent_token(agent, generation=generation, by=by)
    data = {**issued.record.to_json(), "token": issued.token}
    emit(opts, data, lambda: f"{_describe(data)}\ntoken (shown once): {issued.token}")


@token.command("list")
@command_options
def token_list(opts: Options) -> None:
    """Every token, revoked ones too (never their text)."""
    with open_ledger(opts, create=False) as ledger:
        rows = [t.to_json() for t in ledger.tokens()]
    emit(opts, {"tokens": rows}, lambda: "\n".join(map(_describe, rows)) or "no tokens")


@token.command("revoke")
@click.argument("token_id")
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@command_options
def token_revoke(token_id: str, by: str | None, opts: Options) -> None:
    """Revoke a token for good (exit 5 if it already was)."""
    with open_ledger(opts, create=False) as ledger:
        got = ledger.revoke_token(token_id, by=by or operator_name())
    emit(opts, got.to_json(), lambda: f"revoked {_describe(got.to_json())}")
