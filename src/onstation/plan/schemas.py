"""The shipped JSON Schemas (draft 2020-12) and violations with stable rule ids.

Two validators, each built once per process with a registry holding only the shipped
schemas (a ``$ref`` to anything else fails instead of being fetched):

- ``jsonschema-rs`` (compiled, Rust) answers first, valid or not. A document it accepts has
  no schema violations; that is the common case and costs well under a millisecond.
- ``jsonschema``'s pure-Python ``Draft202012Validator`` is the source of every reported
  violation: a document the compiled validator rejects (or cannot read) is validated again
  here, so the violations, their pointers, rule ids and messages are the same with or
  without the fast path. A schema error takes the rule id of the nearest ``x-rule``
  annotation on its schema path (the guards on ready verdicts), else ``OS-SCH-001``.

A document that embeds a sealed capsule (an incident, a plan) can be checked around it: a
caller that holds proof that this very capsule object passed the capsule schema on the
compiled path (plain JSON, valid: :class:`onstation.plan.validator.CapsuleCheck`) passes it
as ``around``, and the compiled validator then checks the document against its schema with
``/capsule`` required only to be an object, without walking the capsule again (issue 14:
a relief's capsule was read by four validations). A document that fails that check, and any
violation report, takes the whole schema.

The compiled validator is consulted only for plain JSON values (``dict``, ``list``, ``str``,
``int``, ``float``, ``bool``, ``None``; at most :data:`FAST_MAX_DEPTH` deep): it reads a
tuple as an array and a ``Decimal`` as an integer where the pure-Python validator does not,
and it recurses natively, so anything else takes the pure-Python path.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
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

#: Ask the compiled validator first. Tests turn it off to compare both paths.
FAST_PATH = True
#: Deeper documents skip the compiled validator (its recursion is native); the canonical
#: form refuses more than 64 levels anyway.
FAST_MAX_DEPTH = 64


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


@functools.cache
def _fast_registry() -> jsonschema_rs.Registry:
    return jsonschema_rs.Registry([(schema(n)["$id"], schema(n)) for n in SCHEMA_FILES])


@functools.cache
def fast_validator(name: str) -> jsonschema_rs.Validator:
    """The compiled (``jsonschema-rs``) validator for one of the shipped schemas.

    Formats are annotations only, as in the pure-Python validator; ``offline`` refuses to
    fetch a ``$ref`` the registry does not hold.
    """
    return jsonschema_rs.Draft202012Validator(
        schema(name), registry=_fast_registry(), validate_formats=False, offline=True
    )


#: The schemas whose documents embed a sealed capsule document at ``/capsule``.
EMBEDS_CAPSULE = frozenset({"incident", "plan"})


@functools.cache
def _around_capsule_validator(name: str) -> jsonschema_rs.Validator:
    """The compiled validator for ``name`` with ``/capsule`` required only to be an object
    (the guards on ready verdicts that look into it stay): for a document whose capsule
    passed the capsule schema already. Its own ``$id``, so the registry's whole schema is
    not shadowed."""
    root = copy.deepcopy(schema(name))
    assert root["properties"]["capsule"] == {"$ref": schema("capsule")["$id"]}
    root["$id"] = f"{root['$id']}:around-capsule"
    root["properties"]["capsule"] = {"type": "object"}
    return jsonschema_rs.Draft202012Validator(
        root, registry=_fast_registry(), validate_formats=False, offline=True
    )


_SCALARS = (str, int, float, bool)


def _plain_json(document: Any, skip: Any = None) -> bool:
    """Whether ``document`` holds only exact JSON types, at most FAST_MAX_DEPTH deep (the
    object ``skip``, wherever it is held, not looked into)."""
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is dict:
            items: Iterable[Any] = value.values()
        elif kind is list:
            items = value
        elif kind in _SCALARS or value is None:
            continue
        else:
            return False
        if depth >= FAST_MAX_DEPTH:
            return False
        for item in items:
            item_kind = type(item)
            if item is skip:
                continue
            if item_kind is dict or item_kind is list:
                stack.append((item, depth + 1))
            elif item_kind not in _SCALARS and item is not None:
                return False
    return True


def fast_accepts(name: str, instance: Any, around: Any = None) -> bool:
    """True only when the compiled validator accepts ``instance`` (False: ask the other).

    ``around``: the capsule document ``instance`` holds at ``/capsule``, from a caller that
    holds proof that this very object, unchanged, passed the capsule schema here (see the
    module docstring); it is then not checked again. Ignored unless it is that member of a
    document of :data:`EMBEDS_CAPSULE`."""
    if (
        around is not None
        and name in EMBEDS_CAPSULE
        and type(instance) is dict
        and instance.get("capsule") is around
    ):
        if not _plain_json(instance, skip=around):
            return False
        check = _around_capsule_validator(name)
    elif not _plain_json(instance):
        return False
    else:
        check = fast_validator(name)
    try:
        return bool(check.is_valid(instance))
    except (ValueError, TypeError, OverflowError):
        # A value it cannot convert (e.g. a non-string key): the pure-Python path decides.
        return False


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


def schema_violations(
    name: str, instance: Any, base: str = "", *, around: Any = None
) -> list[Violation]:
    """Every schema error of ``instance`` against schema ``name``, sorted by pointer.

    A document the compiled validator accepts has none; any other is read by the pure-Python
    validator, which names each violation. ``around``: as for :func:`fast_accepts`.
    """
    return schema_check(name, instance, base, around=around)[0]


def schema_check(
    name: str, instance: Any, base: str = "", *, around: Any = None
) -> tuple[list[Violation], bool]:
    """:func:`schema_violations`, and whether the compiled validator accepted ``instance``
    (so it is plain JSON and valid)."""
    if FAST_PATH and fast_accepts(name, instance, around):
        return [], True
    return _pure_violations(name, instance, base), False


def _pure_violations(name: str, instance: Any, base: str) -> list[Violation]:
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
