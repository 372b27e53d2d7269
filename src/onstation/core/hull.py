"""Hull integrity: how full a body's context window is, and which tier that puts it in.

Fill is always a host measurement (status line, transcript usage, Codex ``token_count``),
never the model's own estimate, and is expressed as a percent of the model's *real* window
(200k or 1M tokens). Tiers are a policy object: the relief preset is normative (DESIGN.md),
the coordinator preset is the second named one, and custom thresholds come from a mapping
loaded from a config file.

Pure: no I/O, no clock, no environment. Callers pass in what the harness told them.
"""

from __future__ import annotations

import math

# ``collections.abc`` is ``_collections_abc`` re-exported, but importing it runs
# ``collections/__init__`` (keyword, operator, reprlib: milliseconds); ``_collections_abc``
# is loaded at every start-up already (``os`` imports it).
from _collections_abc import Mapping

from onstation.core.errors import BadInput
from onstation.core.frozen import FrozenRecord

# This module is on the hook hot path: typing and dataclasses cost milliseconds of import
# time on every tool call, so annotations stay unevaluated and records are plain classes.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import MappingProxyType
    from typing import Final

    from onstation.core.tiers import Tier
else:
    # The read-only mapping type, as ``types`` defines it, without importing ``types``.
    MappingProxyType = type(type.__dict__)

DEFAULT_WINDOW: Final = 200_000
"""Window assumed for a model we cannot identify. The smaller of the two real windows is
the safe guess: over-stating fill relieves a body early, under-stating it lets the body
run into auto-compaction, which is the failure this project exists to prevent."""

ONE_MILLION: Final = 1_000_000

SOURCE_STATUSLINE_USED_PERCENTAGE: Final = "statusline.used_percentage"
SOURCE_STATUSLINE_CURRENT_USAGE: Final = "statusline.current_usage"
SOURCE_STATUSLINE_TOTAL_INPUT: Final = "statusline.total_input_tokens"
SOURCE_TRANSCRIPT: Final = "transcript"
SOURCE_TRANSCRIPT_POST_COMPACTION: Final = "transcript.post_compaction"
SOURCE_CODEX_TOKEN_COUNT: Final = "codex.token_count"  # noqa: S105 - a source name
FILL_SOURCES: Final = frozenset(
    {
        SOURCE_STATUSLINE_USED_PERCENTAGE,
        SOURCE_STATUSLINE_CURRENT_USAGE,
        SOURCE_STATUSLINE_TOTAL_INPUT,
        SOURCE_TRANSCRIPT,
        SOURCE_TRANSCRIPT_POST_COMPACTION,
        SOURCE_CODEX_TOKEN_COUNT,
    }
)

# Before this Claude Code release the status line's total_input_tokens was a cumulative
# session total (spend), not the current context (changelog of v2.1.132).
TOTAL_INPUT_RELIABLE_SINCE: Final = (2, 1, 132)


def _finite(value: object) -> float | None:
    """A finite int or float, else None (bool is an int subclass: JSON true is not 1 token)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


class TierPolicy(FrozenRecord):
    """Tier thresholds: each field is the lower bound of its tier, in percent of the window.

    ``0 < amber <= red <= critical <= 100``. Below ``amber`` is Green. Immutable.
    """

    __slots__ = ("name", "amber", "red", "critical")  # noqa: RUF023 - field order

    name: str
    amber: float
    red: float
    critical: float

    def __init__(self, name: str, amber: float, red: float, critical: float) -> None:
        self._set(name=name, amber=amber, red=red, critical=critical)
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise BadInput("hull policy name: must be a non-empty string")
        for field in ("amber", "red", "critical"):
            value = getattr(self, field)
            if _finite(value) is None:
                raise BadInput(f"hull policy {field}: must be a finite number, got {value!r}")
        if self.amber <= 0:
            raise BadInput(f"hull policy amber: must be above 0, got {self.amber!r}")
        if self.critical > 100:
            raise BadInput(f"hull policy critical: must be at most 100, got {self.critical!r}")
        if self.red < self.amber:
            raise BadInput(
                f"hull policy red: must be at least amber ({self.amber!r}), got {self.red!r}"
            )
        if self.critical < self.red:
            raise BadInput(
                f"hull policy critical: must be at least red ({self.red!r}), got {self.critical!r}"
            )

    def to_mapping(self) -> dict[str, object]:
        """The config form, accepted back by :func:`policy_from_mapping`."""
        return {"name": self.name, "amber": self.amber, "red": self.red, "critical": self.critical}


RELIEF_PRESET: Final = TierPolicy(name="relief", amber=25, red=33, critical=38)
"""The relief document's table (normative): Green < 25, Amber 25-32, Red 33-37, Critical >= 38."""

COORDINATOR_PRESET: Final = TierPolicy(name="coordinator", amber=60, red=70, critical=80)
"""The coordinator document: proactive respawn above 70 (Red, "prepare"), mandatory at 80
(Critical). Amber at 60 gives one early warning band of the same width as Red's lead time."""

PRESETS: Final[Mapping[str, TierPolicy]] = MappingProxyType(
    {RELIEF_PRESET.name: RELIEF_PRESET, COORDINATOR_PRESET.name: COORDINATOR_PRESET}
)


def tier_value(percent: float, policy: TierPolicy = RELIEF_PRESET) -> str:
    """The name of the tier of a fill percent under ``policy`` ("green" ... "critical"; a
    bound belongs to the higher tier): :func:`classify` without the enum, for the hook's
    fast path."""
    if isinstance(percent, bool) or not isinstance(percent, int | float) or math.isnan(percent):
        raise BadInput(f"hull percent: must be a number, got {percent!r}")
    if percent >= policy.critical:
        return "critical"
    if percent >= policy.red:
        return "red"
    if percent >= policy.amber:
        return "amber"
    return "green"


def classify(percent: float, policy: TierPolicy = RELIEF_PRESET) -> Tier:
    """The tier of a fill percent under ``policy`` (a bound belongs to the higher tier)."""
    from onstation.core.tiers import Tier

    return Tier(tier_value(percent, policy))


def __getattr__(name: str) -> object:
    # ``Tier`` lives in core/tiers.py (it imports enum, which the hook's fast path does
    # without); it is still importable from here, loaded when first asked for.
    if name == "Tier":
        from onstation.core.tiers import Tier

        return Tier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_POLICY_KEYS: Final = frozenset({"preset", "name", "amber", "red", "critical"})


def policy_from_mapping(mapping: Mapping[str, object]) -> TierPolicy:
    """Build a policy from a config mapping.

    Accepted forms: ``{"preset": "relief"}``; a preset with overrides
    (``{"preset": "coordinator", "amber": 50}``); or a full custom policy
    (``{"name": "tight", "amber": 20, "red": 28, "critical": 34}``, name optional).
    Raises :class:`BadInput` naming the offending field.
    """
    if not isinstance(mapping, Mapping):
        raise BadInput(f"hull policy: must be a mapping, got {type(mapping).__name__}")
    unknown = sorted(str(k) for k in mapping if k not in _POLICY_KEYS)
    if unknown:
        raise BadInput(f"hull policy {unknown[0]}: unknown field (allowed: {_allowed_keys()})")
    base: TierPolicy | None = None
    if "preset" in mapping:
        preset = mapping["preset"]
        if not isinstance(preset, str) or preset not in PRESETS:
            raise BadInput(
                f"hull policy preset: must be one of {', '.join(sorted(PRESETS))}, got {preset!r}"
            )
        base = PRESETS[preset]
    values: dict[str, float] = {}
    for field in ("amber", "red", "critical"):
        if field in mapping:
            value = _finite(mapping[field])
            if value is None:
                raise BadInput(f"hull policy {field}: must be a number, got {mapping[field]!r}")
            values[field] = value
        elif base is not None:
            values[field] = getattr(base, field)
        else:
            raise BadInput(f"hull policy {field}: missing (or give a preset)")
    name = mapping.get("name")
    if name is None:
        if base is None:
            name = "custom"
        elif any(field in mapping for field in ("amber", "red", "critical")):
            name = f"{base.name}+custom"
        else:
            name = base.name
    if not isinstance(name, str):
        raise BadInput(f"hull policy name: must be a string, got {name!r}")
    return TierPolicy(name=name, **values)


def workspace_policy(tiers: object) -> TierPolicy:
    """The policy a workspace configuration's ``tiers`` names: a preset by name, a mapping
    (:func:`policy_from_mapping`), else the relief preset."""
    # A name or nothing (almost every workspace) is answered before asking the Mapping ABC:
    # that check walks the ABC's whole subclass tree the first time in a process, about
    # 0.3 ms in a daemon's child (hundreds of classes loaded), on every PostToolUse.
    if tiers is None:
        return PRESETS["relief"]
    if isinstance(tiers, str):
        return PRESETS.get(tiers, PRESETS["relief"])
    if isinstance(tiers, Mapping):
        return policy_from_mapping(tiers)
    return PRESETS["relief"]


def _allowed_keys() -> str:
    return ", ".join(sorted(_POLICY_KEYS))


class FillReading(FrozenRecord):
    """One measurement of context fill, with where it came from. Immutable."""

    __slots__ = ("used_tokens", "window_tokens", "percent", "source", "model")  # noqa: RUF023 - field order, not sorted

    used_tokens: int | None
    window_tokens: int
    percent: float
    source: str
    model: str | None

    def __init__(
        self,
        used_tokens: int | None,
        window_tokens: int,
        percent: float,
        source: str,
        model: str | None = None,
    ) -> None:
        self._set(used_tokens=used_tokens, window_tokens=window_tokens, percent=percent,
                  source=source, model=model)  # fmt: skip

    def tier(self, policy: TierPolicy = RELIEF_PRESET) -> Tier:
        """This reading's tier under ``policy``."""
        return classify(self.percent, policy)


def fill_percent(used_tokens: int, window_tokens: int) -> float:
    """``used / window`` in percent, computed so exact bounds stay exact (66000/200000 -> 33.0)."""
    return used_tokens * 100 / window_tokens


# Model families documented to run natively at 1M on the Anthropic API (model-config docs,
# v2.1.240): Opus 4.7 and later, Sonnet 5, Fable 5. Providers and CLAUDE_CODE_DISABLE_1M_CONTEXT
# can hold them at 200k; the status line's context_window_size (passed as ``declared``) is then
# the truth, which is why a declared window always wins.
# The families and the first version of each whose plain model id means a 1M window: the
# versions read as "(opus|sonnet|fable|haiku)-(\d{1,2})(?:[-.](\d{1,2}))?(?!\d)" reads them,
# by hand, so that the hook path (which reads a model id at every reading) never imports re.
_FAMILIES = ("opus", "sonnet", "fable", "haiku")
_NATIVE_1M: Final = {"opus": (4, 7), "sonnet": (5, 0), "fable": (5, 0)}


def _digits(text: str, start: int, count: int) -> bool:
    return start + count <= len(text) and text[start : start + count].isdecimal()


def _version_at(text: str, at: int) -> tuple[int, int | None] | None:
    """(major, minor) of the version right after a family name and its dash at ``at``, as
    the pattern above matches there (greedy, then backtracking), or None."""
    for major_len in (2, 1):
        if not _digits(text, at, major_len):
            continue
        after = at + major_len
        if after < len(text) and text[after] in "-.":
            for minor_len in (2, 1):
                end = after + 1 + minor_len
                if _digits(text, after + 1, minor_len) and (
                    end == len(text) or not text[end].isdecimal()
                ):
                    return int(text[at:after]), int(text[after + 1 : end])
        if after == len(text) or not text[after].isdecimal():
            return int(text[at:after]), None
    return None


def family_versions(name: str) -> list[tuple[str, int, int]]:
    """Every (family, major, minor) a lower-case model id names, in order (minor 0 when it
    gives none)."""
    found: list[tuple[int, str, int, int]] = []
    for family in _FAMILIES:
        start = name.find(family + "-")
        while start != -1:
            version = _version_at(name, start + len(family) + 1)
            if version is not None:
                found.append((start, family, version[0], version[1] or 0))
            start = name.find(family + "-", start + 1)
    return [(family, major, minor) for _, family, major, minor in sorted(found)]


def _names_1m(name: str) -> bool:
    lowered = name.lower()
    if "[1m]" in lowered or "1m context" in lowered:
        return True
    for family, major, minor in family_versions(lowered):
        floor = _NATIVE_1M.get(family)
        if floor is not None and (major, minor) >= floor:
            return True
    return False


def model_window(model_id: str | None, declared: int | None = None) -> int:
    """The model's real context window in tokens.

    A positive ``declared`` window (status line ``context_window_size``, Codex
    ``model_context_window``, an operator override) wins. Otherwise a ``[1m]`` suffix, a
    "1M context" display name or a model documented to run at 1M gives 1_000_000; anything
    else, unknown models included, gives :data:`DEFAULT_WINDOW` (200_000).
    """
    declared_number = _finite(declared)
    if declared_number is not None and declared_number > 0:
        return int(declared_number)
    if isinstance(model_id, str) and _names_1m(model_id):
        return ONE_MILLION
    return DEFAULT_WINDOW


def _parse_version(value: object) -> tuple[int, ...] | None:
    if not isinstance(value, str):
        return None
    parts: list[int] = []
    for piece in value.strip().split(".")[:3]:
        # The leading digits (what the regex \d+ matched: Unicode decimal digits), without
        # importing re on the hook path.
        end = 0
        while end < len(piece) and piece[end].isdecimal():
            end += 1
        if end == 0:
            return None
        parts.append(int(piece[:end]))
    return tuple(parts) if len(parts) == 3 else None


def _count(value: object) -> int | None:
    """A token count: a non-negative finite number (JSON may give 12.0), else None."""
    number = _finite(value)
    if number is None or number < 0:
        return None
    return int(number)


def _usage_sum(usage: object) -> int | None:
    """input + cache_creation + cache_read of one usage object; None without input_tokens."""
    if not isinstance(usage, Mapping):
        return None
    base = _count(usage.get("input_tokens"))
    if base is None:
        return None
    total = base
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        extra = usage.get(key)
        if extra is None:
            continue
        counted = _count(extra)
        if counted is None:
            return None
        total += counted
    return total


def fill_from_statusline(
    payload: object, *, declared_window: int | None = None
) -> FillReading | None:
    """The fill reported by one Claude Code status line payload, or None when it has none.

    Order: ``context_window.used_percentage``; else ``current_usage`` (input + cache_creation
    + cache_read) over ``context_window_size``; else ``total_input_tokens`` only from
    version 2.1.132 on (earlier it was a cumulative session total). An explicitly null
    ``current_usage`` means "no current usage" (before the first response, and right after
    /compact until the next one): no reading then, whatever else the payload holds, since its
    other figures are stale. ``declared_window`` (the window the host declared earlier for
    this body) is used when the payload gives no ``context_window_size``. Never raises on odd
    input.
    """
    if not isinstance(payload, Mapping):
        return None
    window_info = payload.get("context_window")
    if not isinstance(window_info, Mapping):
        return None
    model_id, names = _statusline_model(payload.get("model"))
    declared = _count(window_info.get("context_window_size")) or _count(declared_window)
    window = model_window(" ".join(names), declared if declared else None)
    usage_present = "current_usage" in window_info
    if usage_present and window_info.get("current_usage") is None:
        return None
    current = _usage_sum(window_info.get("current_usage"))

    used_pct = _finite(window_info.get("used_percentage"))
    if used_pct is not None and used_pct >= 0:
        return FillReading(
            used_tokens=current,
            window_tokens=window,
            percent=float(used_pct),
            source=SOURCE_STATUSLINE_USED_PERCENTAGE,
            model=model_id,
        )
    if current is not None:
        return FillReading(
            used_tokens=current,
            window_tokens=window,
            percent=fill_percent(current, window),
            source=SOURCE_STATUSLINE_CURRENT_USAGE,
            model=model_id,
        )
    version = _parse_version(payload.get("version"))
    total = _count(window_info.get("total_input_tokens"))
    if version is not None and version >= TOTAL_INPUT_RELIABLE_SINCE and total is not None:
        return FillReading(
            used_tokens=total,
            window_tokens=window,
            percent=fill_percent(total, window),
            source=SOURCE_STATUSLINE_TOTAL_INPUT,
            model=model_id,
        )
    return None


def _statusline_model(model: object) -> tuple[str | None, list[str]]:
    """(model id, every name that may carry a 1M marker) from the payload's ``model``."""
    if isinstance(model, str):
        return model, [model]
    if not isinstance(model, Mapping):
        return None, []
    model_id = model.get("id")
    display = model.get("display_name")
    names = [n for n in (model_id, display) if isinstance(n, str)]
    return (model_id if isinstance(model_id, str) else None), names


def statusline_declared_window(payload: object) -> int | None:
    """The context window a status line payload declares (``context_window_size``), or None."""
    if not isinstance(payload, Mapping):
        return None
    window_info = payload.get("context_window")
    if not isinstance(window_info, Mapping):
        return None
    return _count(window_info.get("context_window_size")) or None


def statusline_usage_cleared(payload: object) -> bool:
    """Whether a status line payload says "no current usage" (``current_usage: null``): before
    the first response, and right after a compaction until the next response."""
    if not isinstance(payload, Mapping):
        return False
    window_info = payload.get("context_window")
    return (
        isinstance(window_info, Mapping)
        and "current_usage" in window_info
        and window_info["current_usage"] is None
    )
