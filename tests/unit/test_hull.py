"""Hull integrity: tiers, presets, custom policies, model windows, status line fill."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.core.hull import (
    COORDINATOR_PRESET,
    DEFAULT_WINDOW,
    FILL_SOURCES,
    PRESETS,
    RELIEF_PRESET,
    FillReading,
    Tier,
    TierPolicy,
    classify,
    fill_from_statusline,
    model_window,
    policy_from_mapping,
)

# The status line sample of the v2.1.240 docs (harness-formats.md section 2.2), verbatim.
STATUSLINE_SAMPLE: dict[str, Any] = json.loads(
    """
{
  "cwd": "/current/working/directory",
  "session_id": "abc123...",
  "session_name": "my-session",
  "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
  "transcript_path": "/path/to/transcript.jsonl",
  "model": { "id": "claude-opus-5", "display_name": "Opus" },
  "workspace": { "current_dir": "/current/working/directory",
                 "project_dir": "/original/project/directory",
                 "added_dirs": [], "git_worktree": "feature-xyz",
                 "repo": { "host": "github.com", "owner": "anthropics", "name": "claude-code" } },
  "version": "2.1.90",
  "output_style": { "name": "default" },
  "cost": { "total_cost_usd": 0.01234, "total_duration_ms": 45000, "total_api_duration_ms": 2300,
            "total_lines_added": 156, "total_lines_removed": 23 },
  "context_window": {
    "total_input_tokens": 15500, "total_output_tokens": 1200,
    "context_window_size": 200000,
    "used_percentage": 8, "remaining_percentage": 92,
    "current_usage": { "input_tokens": 8500, "output_tokens": 1200,
                       "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 2000 }
  },
  "exceeds_200k_tokens": false,
  "fast_mode": false,
  "effort": { "level": "high" },
  "thinking": { "enabled": true },
  "rate_limits": { "five_hour": { "used_percentage": 23.5, "resets_at": 1738425600 },
                   "seven_day": { "used_percentage": 41.2, "resets_at": 1738857600 } },
  "vim": { "mode": "NORMAL" }, "agent": { "name": "security-reviewer" },
  "pr": { "number": 1234, "url": "https://github.com/anthropics/claude-code/pull/1234",
          "review_state": "pending" },
  "worktree": { "name": "my-feature", "path": "/path/to/.claude/worktrees/my-feature",
                "branch": "worktree-my-feature", "original_cwd": "/path/to/project",
                "original_branch": "main" }
}
"""
)

# ccusage's apps/ccusage/test/statusline-test.json shape (CC 1.0.88): cumulative totals only.
OLD_STATUSLINE: dict[str, Any] = {
    "session_id": "73cc9f9a-2775-4418-beec-bc36b62a1c6f",
    "transcript_path": "/tmp/t.jsonl",
    "model": {"id": "claude-sonnet-4-20250514", "display_name": "Sonnet 4"},
    "version": "1.0.88",
    "context_window": {
        "total_input_tokens": 42500,
        "total_output_tokens": 3200,
        "context_window_size": 200000,
    },
}


def sample() -> dict[str, Any]:
    return copy.deepcopy(STATUSLINE_SAMPLE)


# --- tiers and presets -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("percent", "tier"),
    [
        (0, Tier.GREEN),
        (24.99, Tier.GREEN),
        (25, Tier.AMBER),
        (32.99, Tier.AMBER),
        (33, Tier.RED),
        (37.99, Tier.RED),
        (38, Tier.CRITICAL),
        (100, Tier.CRITICAL),
        (140, Tier.CRITICAL),
    ],
)
def test_relief_preset_boundaries(percent: float, tier: Tier) -> None:
    assert classify(percent, RELIEF_PRESET) is tier


@pytest.mark.parametrize(
    ("percent", "tier"),
    [
        (59.99, Tier.GREEN),
        (60, Tier.AMBER),
        (69.99, Tier.AMBER),
        (70, Tier.RED),
        (79.99, Tier.RED),
        (80, Tier.CRITICAL),
    ],
)
def test_coordinator_preset_proactive_70_mandatory_80(percent: float, tier: Tier) -> None:
    assert classify(percent, COORDINATOR_PRESET) is tier


def test_presets_are_named_and_relief_is_the_default() -> None:
    assert PRESETS["relief"] is RELIEF_PRESET
    assert PRESETS["coordinator"] is COORDINATOR_PRESET
    assert classify(33) is Tier.RED
    with pytest.raises(TypeError):
        PRESETS["mine"] = RELIEF_PRESET  # type: ignore[index]


def test_tier_rank_orders_tiers() -> None:
    assert [t.rank for t in (Tier.GREEN, Tier.AMBER, Tier.RED, Tier.CRITICAL)] == [0, 1, 2, 3]
    assert Tier("red") is Tier.RED


def test_classify_rejects_nan_and_non_numbers() -> None:
    with pytest.raises(BadInput):
        classify(float("nan"))
    with pytest.raises(BadInput):
        classify(True)
    with pytest.raises(BadInput):
        classify("33")  # type: ignore[arg-type]


policies = st.tuples(
    st.floats(min_value=0.01, max_value=100),
    st.floats(min_value=0, max_value=100),
    st.floats(min_value=0, max_value=100),
).map(sorted)


@given(
    bounds=policies,
    a=st.floats(min_value=-10, max_value=200, allow_nan=False),
    b=st.floats(min_value=-10, max_value=200, allow_nan=False),
)
def test_classify_is_monotonic_in_percent(bounds: list[float], a: float, b: float) -> None:
    amber, red, critical = bounds
    if amber <= 0:
        amber = 0.01
    policy = TierPolicy("p", amber=amber, red=max(red, amber), critical=max(critical, red, amber))
    low, high = min(a, b), max(a, b)
    assert classify(low, policy).rank <= classify(high, policy).rank


@given(st.floats(min_value=-10, max_value=200, allow_nan=False))
def test_classify_agrees_with_the_bounds(percent: float) -> None:
    tier = classify(percent, RELIEF_PRESET)
    expected = (
        Tier.CRITICAL
        if percent >= 38
        else Tier.RED
        if percent >= 33
        else Tier.AMBER
        if percent >= 25
        else Tier.GREEN
    )
    assert tier is expected


# --- custom policies -----------------------------------------------------------------------


def test_custom_policy_equal_bounds_are_allowed() -> None:
    policy = TierPolicy("flat", amber=50, red=50, critical=50)
    assert classify(49.9, policy) is Tier.GREEN
    assert classify(50, policy) is Tier.CRITICAL


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"amber": 0, "red": 10, "critical": 20}, "amber"),
        ({"amber": -1, "red": 10, "critical": 20}, "amber"),
        ({"amber": 30, "red": 20, "critical": 40}, "red"),
        ({"amber": 10, "red": 30, "critical": 20}, "critical"),
        ({"amber": 10, "red": 20, "critical": 101}, "critical"),
        ({"amber": float("nan"), "red": 20, "critical": 30}, "amber"),
        ({"amber": 10, "red": float("inf"), "critical": 30}, "red"),
        ({"amber": True, "red": 20, "critical": 30}, "amber"),
    ],
)
def test_custom_policy_validation_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as err:
        TierPolicy("bad", **kwargs)
    assert f"hull policy {field}:" in err.value.message
    assert "\n" not in err.value.message


def test_policy_from_mapping_forms() -> None:
    assert policy_from_mapping({"preset": "relief"}) == RELIEF_PRESET
    assert policy_from_mapping({"preset": "coordinator"}) == COORDINATOR_PRESET
    tweaked = policy_from_mapping({"preset": "coordinator", "amber": 50})
    assert (tweaked.amber, tweaked.red, tweaked.critical) == (50, 70, 80)
    assert tweaked.name == "coordinator+custom"
    custom = policy_from_mapping({"amber": 20, "red": 28.5, "critical": 34})
    assert custom == TierPolicy("custom", 20, 28.5, 34)
    named = policy_from_mapping({"name": "tight", "amber": 20, "red": 28, "critical": 34})
    assert named.name == "tight"
    assert policy_from_mapping(RELIEF_PRESET.to_mapping()) == RELIEF_PRESET


@pytest.mark.parametrize(
    ("mapping", "field"),
    [
        ({"preset": "nope"}, "preset"),
        ({"preset": 3}, "preset"),
        ({"amber": 20, "red": 30}, "critical"),
        ({"amber": "20", "red": 30, "critical": 40}, "amber"),
        ({"amber": 20, "red": None, "critical": 40}, "red"),
        ({"amber": 20, "red": 30, "critical": 40, "colour": "x"}, "colour"),
        ({"amber": 20, "red": 30, "critical": 140}, "critical"),
        ({"preset": "relief", "red": 20}, "red"),
        ({"name": 5, "amber": 20, "red": 30, "critical": 40}, "name"),
    ],
)
def test_policy_from_mapping_bad_values(mapping: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as err:
        policy_from_mapping(mapping)
    assert f"hull policy {field}:" in err.value.message
    assert "\n" not in err.value.message


def test_policy_from_mapping_rejects_non_mapping() -> None:
    with pytest.raises(BadInput):
        policy_from_mapping([("amber", 1)])  # type: ignore[arg-type]


# --- windows -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "declared", "window"),
    [
        ("claude-sonnet-4-5-20250929", None, 200_000),
        ("claude-opus-4-6[1m]", None, 1_000_000),
        ("sonnet[1m]", None, 1_000_000),
        ("Opus 4.6 (1M context)", None, 1_000_000),
        ("claude-opus-4-7", None, 1_000_000),
        ("claude-opus-5-20260101", None, 1_000_000),
        ("claude-sonnet-5", None, 1_000_000),
        ("claude-fable-5", None, 1_000_000),
        ("claude-opus-4-6", None, 200_000),
        ("claude-haiku-5", None, 200_000),
        ("claude-3-5-sonnet-20241022", None, 200_000),
        ("gpt-5.3-codex", None, DEFAULT_WINDOW),
        (None, None, DEFAULT_WINDOW),
        ("", None, DEFAULT_WINDOW),
        ("claude-opus-5", 200_000, 200_000),
        ("unknown", 258_400, 258_400),
        ("claude-opus-4-6[1m]", 0, 1_000_000),
        ("unknown", -5, DEFAULT_WINDOW),
    ],
)
def test_model_window(model: str | None, declared: int | None, window: int) -> None:
    assert model_window(model, declared) == window


# --- status line -------------------------------------------------------------------------


def test_statusline_documented_sample_uses_used_percentage() -> None:
    reading = fill_from_statusline(sample())
    assert reading == FillReading(
        used_tokens=15500,
        window_tokens=200_000,
        percent=8.0,
        source="statusline.used_percentage",
        model="claude-opus-5",
    )
    assert reading.tier() is Tier.GREEN


def test_statusline_used_percentage_null_falls_back_to_current_usage() -> None:
    payload = sample()
    payload["context_window"]["used_percentage"] = None
    payload["context_window"]["current_usage"] = {
        "input_tokens": 60000,
        "output_tokens": 999,
        "cache_creation_input_tokens": 4000,
        "cache_read_input_tokens": 2000,
    }
    reading = fill_from_statusline(payload)
    assert reading is not None
    assert reading.source == "statusline.current_usage"
    assert reading.used_tokens == 66000  # output tokens are not context
    assert reading.percent == 33.0
    assert reading.tier(RELIEF_PRESET) is Tier.RED


def test_statusline_current_usage_without_window_size_uses_model_window() -> None:
    payload = sample()
    del payload["context_window"]["used_percentage"]
    del payload["context_window"]["context_window_size"]
    payload["model"] = {"id": "claude-opus-4-6[1m]", "display_name": "Opus 4.6 (1M context)"}
    reading = fill_from_statusline(payload)
    assert reading is not None
    assert reading.window_tokens == 1_000_000
    assert reading.percent == pytest.approx(1.55)


def test_statusline_right_after_compact_has_no_reading() -> None:
    payload = sample()
    payload["version"] = "2.1.240"
    payload["context_window"].update(
        used_percentage=None, remaining_percentage=None, current_usage=None
    )
    assert fill_from_statusline(payload) is None


def test_statusline_before_first_response_has_no_reading() -> None:
    payload = sample()
    payload["context_window"] = {
        "total_input_tokens": 0,
        "total_output_tokens": 0,
        "context_window_size": 200000,
        "used_percentage": None,
        "remaining_percentage": None,
        "current_usage": None,
    }
    assert fill_from_statusline(payload) is None


def test_statusline_old_cumulative_total_is_not_used() -> None:
    assert fill_from_statusline(OLD_STATUSLINE) is None
    payload = copy.deepcopy(OLD_STATUSLINE)
    payload["version"] = "2.1.131"
    assert fill_from_statusline(payload) is None
    del payload["version"]
    assert fill_from_statusline(payload) is None


def test_statusline_total_input_tokens_from_2_1_132() -> None:
    for version in ("2.1.132", "2.1.240", "2.2.0", "3.0.0-beta.1"):
        payload = copy.deepcopy(OLD_STATUSLINE)
        payload["version"] = version
        reading = fill_from_statusline(payload)
        assert reading is not None, version
        assert reading.source == "statusline.total_input_tokens"
        assert reading.used_tokens == 42500
        assert reading.percent == 21.25


def test_statusline_missing_context_window() -> None:
    payload = sample()
    del payload["context_window"]
    assert fill_from_statusline(payload) is None


def test_statusline_new_fields_are_ignored() -> None:
    payload = sample()
    payload["context_window"]["brand_new"] = {"x": [1, 2]}
    payload["hook_event_name"] = "Status"
    payload["something_else"] = None
    reading = fill_from_statusline(payload)
    assert reading is not None and reading.percent == 8.0


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        "context_window",
        42,
        {"context_window": None},
        {"context_window": []},
        {"context_window": "8%"},
        {"context_window": {"used_percentage": "8"}},
        {"context_window": {"used_percentage": True}},
        {"context_window": {"used_percentage": -3}},
        {"context_window": {"current_usage": {"input_tokens": "12"}}},
        {"context_window": {"current_usage": {"input_tokens": 12, "cache_read_input_tokens": "x"}}},
        {"context_window": {"current_usage": [1, 2, 3]}},
        {"context_window": {"total_input_tokens": 5}, "version": 2.2},
        {"context_window": {"total_input_tokens": 5}, "version": "latest"},
        {"context_window": {"total_input_tokens": 5}, "version": "2.1"},
        {"context_window": {"total_input_tokens": "5"}, "version": "2.1.200"},
    ],
)
def test_statusline_garbage_never_raises(payload: Any) -> None:
    assert fill_from_statusline(payload) is None


def test_statusline_garbage_model_and_window_still_reads() -> None:
    payload = sample()
    payload["model"] = ["not", "a", "dict"]
    payload["context_window"]["context_window_size"] = "big"
    reading = fill_from_statusline(payload)
    assert reading is not None
    assert reading.model is None and reading.window_tokens == DEFAULT_WINDOW
    payload["model"] = "claude-sonnet-4-5[1m]"
    reading = fill_from_statusline(payload)
    assert reading is not None and reading.window_tokens == 1_000_000


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_statusline_never_raises_on_any_json(value: Any) -> None:
    for payload in (value, {"context_window": value}, {"context_window": {"current_usage": value}}):
        reading = fill_from_statusline(payload)
        assert reading is None or reading.source in FILL_SOURCES


@given(st.floats(allow_nan=False, min_value=-1e6, max_value=1e6) | st.integers(-1000, 1000))
def test_tier_value_names_the_tier_classify_gives(percent: float) -> None:
    from onstation.core.hull import tier_value

    for policy in (RELIEF_PRESET, COORDINATOR_PRESET):
        assert tier_value(percent, policy) == classify(percent, policy).value


def test_tier_is_still_importable_from_hull_as_the_one_enum() -> None:
    from onstation.core import hull, tiers

    assert hull.Tier is tiers.Tier
    assert classify(40.0) is tiers.Tier.CRITICAL
    with pytest.raises(AttributeError):
        hull.NoSuchName  # noqa: B018 - the module's lazy attributes name only Tier


def test_workspace_policy_reads_a_name_a_mapping_or_nothing() -> None:
    from onstation.core.hull import PRESETS, workspace_policy

    assert workspace_policy(None) == PRESETS["relief"]
    assert workspace_policy("coordinator") == PRESETS["coordinator"]
    assert workspace_policy("no-such-preset") == PRESETS["relief"]
    assert workspace_policy(17) == PRESETS["relief"]
    custom = workspace_policy({"preset": "coordinator", "amber": 50})
    assert (custom.name, custom.amber) == ("coordinator+custom", 50)
    with pytest.raises(BadInput, match="unknown field"):
        workspace_policy({"bogus": 1})


def test_workspace_policy_answers_a_name_or_nothing_without_the_mapping_abc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every PostToolUse asks for the workspace's policy; a first check against the Mapping
    ABC walks its subclass tree (about 0.3 ms in a daemon's child), so the common answers
    (no ``tiers``, a preset's name) never ask it."""
    import abc

    from onstation.core.hull import workspace_policy

    asked: list[object] = []
    real = abc.ABCMeta.__instancecheck__

    def instancecheck(cls: abc.ABCMeta, instance: object) -> bool:
        asked.append(instance)
        return real(cls, instance)

    monkeypatch.setattr(abc.ABCMeta, "__instancecheck__", instancecheck)
    workspace_policy(None)
    workspace_policy("relief")
    assert asked == []
    workspace_policy({"preset": "relief"})
    assert asked != []  # a mapping is still recognised through the ABC
