"""The shipped JSON Schemas (draft 2020-12) and violations with stable rule ids.

Validation uses ``jsonschema``'s ``Draft202012Validator`` with a local ``referencing``
registry holding only the shipped schemas: a ``$ref`` to anything else fails instead of
being fetched. A schema error takes the rule id of the nearest ``x-rule`` annotation on its
schema path (the guards on ready verdicts), else ``OS-SCH-001`` (structure).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # no stubs shipped
from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]  # no stubs
from referencing import Registry, Resource

from onstation.plan.resources import read_json

SCHEMA_FILES = {
    "capsule": "resurrection-capsule.schema.json",
    "plan": "resurrection-plan.schema.json",
    "capacity": "capacity-evidence.schema.json",
    "incident": "incident.schema.json",
}

STRUCTURE_RULE = "OS-SCH-001"


@dataclass(frozen=True, order=True)
class Violation:
    """One reason a document is invalid: where (JSON pointer), which rule, and why."""

    pointer: str
    rule: str
    message: str
    layer: str = "semantic"

    def to_json(self) -> dict[str, str]:
        """``{"pointer", "rule", "message", "layer"}``."""
        return {
            "pointer": self.pointer,
            "rule": self.rule,
            "message": self.message,
            "layer": self.layer,
        }

    def line(self) -> str:
        """One human line: ``RULE  /pointer  message``."""
        return f"{self.rule:<12} {self.pointer or '/'}  {self.message}"


def pointer(parts: Iterable[Any]) -> str:
    """RFC 6901 JSON pointer from path parts."""
    out = ""
    for part in parts:
        out += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return out


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """A shipped schema, parsed (cached: the files are immutable package data)."""
    value = read_json("schemas", SCHEMA_FILES[name])
    assert isinstance(value, dict)
    return value


@functools.cache
def _registry() -> Registry[Any]:
    resources = [(schema(n)["$id"], Resource.from_contents(schema(n))) for n in SCHEMA_FILES]
    registry: Registry[Any] = Registry().with_resources(resources)
    return registry.crawl()


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A compiled validator for one of ``capsule``, ``plan``, ``capacity``, ``incident``."""
    root = schema(name)
    Draft202012Validator.check_schema(root)
    return Draft202012Validator(root, registry=_registry())


def _rule_for(root: dict[str, Any], error: ValidationError) -> str:
    node: Any = root
    rule = STRUCTURE_RULE
    for part in error.absolute_schema_path:
        if isinstance(node, dict) and isinstance(node.get("x-rule"), str):
            rule = node["x-rule"]
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
    if isinstance(node, dict) and isinstance(node.get("x-rule"), str):
        rule = node["x-rule"]
    return rule


def _message(error: ValidationError) -> str:
    text = error.message
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{text} (schema keyword {error.validator})"


def schema_violations(name: str, instance: Any, base: str = "") -> list[Violation]:
    """Every schema error of ``instance`` against schema ``name``, sorted by pointer."""
    root = schema(name)
    found = {
        Violation(
            pointer=base + pointer(err.absolute_path),
            rule=_rule_for(root, err),
            message=_message(err),
            layer="schema",
        )
        for err in validator(name).iter_errors(instance)
    }
    return sorted(found)
