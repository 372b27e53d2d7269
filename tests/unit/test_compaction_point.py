"""The host's compaction point, the tiers past it, and which readings are refused (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.compaction import (
    claude_compaction_point,
    codex_compaction_point,
    compaction_warning,
    reject_reason,
    tiers_past_compaction,
)
from onstation.core.hull import (
    COORDINATOR_PRESET,
    RELIEF_PRESET,
    FillReading,
    Tier,
    TierPolicy,
    fill_from_statusline,
)
from onstation.harness import codex
from onstation.harness.compaction import claude_point

windows = st.sampled_from([200_000, 258_400, 400_000, 1_000_000])
percents = st.floats(min_value=1, max_value=100, allow_nan=False)


@st.composite
def policies(draw: st.DrawFn) -> TierPolicy:
    amber = draw(st.floats(min_value=0.5, max_value=100))
    red = draw(st.floats(min_value=amber, max_value=100))
    critical = draw(st.floats(min_value=red, max_value=100))
    return TierPolicy(name="drawn", amber=amber, red=red, critical=critical)


def test_claude_default_points() -> None:
    # 200k less Claude Code's 33k reserve: 167k, 83.5 %; 1M: "about 967K" (model-config docs).
    assert claude_compaction_point(200_000) == pytest.approx(83.5)
    assert claude_compaction_point(1_000_000) == pytest.approx(96.7)
    assert claude_compaction_point(200_000, pct_override=50) == pytest.approx(50)
    assert claude_compaction_point(200_000, pct_override=95) == pytest.approx(83.5)  # only lowers
    assert claude_compaction_point(1_000_000, auto_compact_window=400_000) == pytest.approx(36.7)
    assert claude_compaction_point(200_000, auto_compact_window=10) == pytest.approx(33.5)
    assert claude_compaction_point(200_000, disabled=True) is None
    assert codex_compaction_point(258_400, 200_000) == pytest.approx(77.399, abs=1e-3)
    assert codex_compaction_point(258_400, None) is None


@given(window=windows, pct=st.one_of(st.none(), percents),
       chosen=st.one_of(st.none(), st.integers(min_value=1, max_value=2_000_000)))  # fmt: skip
def test_claude_point_lies_in_the_window_and_override_only_lowers(
    window: int, pct: float | None, chosen: int | None
) -> None:
    point = claude_compaction_point(window, auto_compact_window=chosen, pct_override=pct)
    assert point is not None and 0 <= point <= 100
    plain = claude_compaction_point(window, auto_compact_window=chosen)
    assert plain is not None and point <= plain + 1e-9
    if pct is not None:
        assert point <= pct + 1e-9


@given(policy=policies(), point=st.one_of(st.none(), st.floats(0, 100)))
def test_tiers_past_the_point_are_the_upper_ones(policy: TierPolicy, point: float | None) -> None:
    past = tiers_past_compaction(policy, point)
    order = [Tier.AMBER, Tier.RED, Tier.CRITICAL]
    # Upward closed: once a tier is past the point, every higher one is too.
    assert list(past) == order[len(order) - len(past) :]
    for tier in order:
        bound = getattr(policy, tier.value)
        assert (tier in past) == (point is not None and bound >= point)
    warning = compaction_warning(policy, point)
    assert (warning is not None) == (Tier.RED in past or Tier.CRITICAL in past)
    # The warning names the tiers by their names, without the enum: the same text as one
    # built from the tiers past the point.
    upper = [t for t in past if t.rank >= Tier.RED.rank]
    if upper and point is not None:
        named = " and ".join(f"{t.value.capitalize()} ({getattr(policy, t.value):g}%)"
                             for t in upper)  # fmt: skip
        assert warning is not None and warning.startswith(f"tier policy {policy.name}: {named} ")
        assert f"({point:.1f}% of the window)" in warning


def test_a_preset_past_an_override_point_is_named() -> None:
    point = claude_compaction_point(200_000, pct_override=30)
    assert tiers_past_compaction(RELIEF_PRESET, point) == (Tier.RED, Tier.CRITICAL)
    warning = compaction_warning(RELIEF_PRESET, point)
    assert warning is not None and "Red (33%) and Critical (38%) lie past" in warning
    assert compaction_warning(RELIEF_PRESET, claude_compaction_point(200_000)) is None
    # The coordinator preset's Critical (80 %) is close to, not past, the default 83.5 %.
    assert compaction_warning(COORDINATOR_PRESET, claude_compaction_point(200_000)) is None
    assert tiers_past_compaction(COORDINATOR_PRESET, None) == ()


def test_settings_and_environment_are_read_as_documented(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".claude").mkdir(parents=True)
    config = tmp_path / "user"
    config.mkdir()
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    assert claude_point(200_000, project=str(project), env=env) == pytest.approx(83.5)
    (config / "settings.json").write_text(json.dumps({"autoCompactWindow": "150k"}))
    assert claude_point(200_000, project=str(project), env=env) == pytest.approx(58.5)
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"autoCompactWindow": 120}))
    assert claude_point(200_000, project=str(project), env=env) == pytest.approx(43.5)
    env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = "200000"  # the variable wins over the settings
    assert claude_point(200_000, project=str(project), env=env) == pytest.approx(83.5)
    env["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = "40"
    assert claude_point(200_000, project=str(project), env=env) == pytest.approx(40)
    env["DISABLE_AUTO_COMPACT"] = "1"
    assert claude_point(200_000, project=str(project), env=env) is None


@given(used=st.integers(min_value=0, max_value=2_000_000), window=windows)
def test_readings_over_the_window_are_rejected(used: int, window: int) -> None:
    reading = FillReading(used, window, used * 100 / window, "transcript")
    assert (reject_reason(reading) is None) == (used <= window)


@given(percent=st.floats(allow_nan=True, allow_infinity=True))
def test_reported_percents_outside_0_100_are_rejected(percent: float) -> None:
    reading = FillReading(None, 200_000, percent, "statusline.used_percentage")
    assert (reject_reason(reading) is None) == (0 <= percent <= 100)


def _last(**usage: int) -> bytes:
    return json.dumps({"timestamp": "t", "type": "event_msg",
                       "payload": {"type": "token_count",
                                   "info": {"model_context_window": 258_400,
                                            "last_token_usage": usage}}}).encode()  # fmt: skip


def test_codex_estimate_records_are_rejected() -> None:
    estimate = codex.classify_codex_line(_last(input_tokens=0, cached_input_tokens=0,
                                               output_tokens=0, reasoning_output_tokens=0,
                                               total_tokens=940_000))  # fmt: skip
    assert estimate is not None and estimate.rejected is not None and estimate.tokens is None
    real = codex.classify_codex_line(_last(input_tokens=90_000, cached_input_tokens=500,
                                           output_tokens=300, reasoning_output_tokens=200,
                                           total_tokens=90_300))  # fmt: skip
    assert real is not None and real.rejected is None and real.tokens == 90_300
    for bad in ({"input_tokens": 10, "cached_input_tokens": 20, "output_tokens": 0,
                 "total_tokens": 10},
                {"input_tokens": 10, "output_tokens": 5, "total_tokens": 9},
                {"input_tokens": -1, "output_tokens": 5, "total_tokens": 4}):  # fmt: skip
        event = codex.classify_codex_line(_last(**bad))
        assert event is not None and event.rejected is not None, bad


def test_statusline_null_usage_gives_no_reading_even_with_a_stale_percentage() -> None:
    payload = {"model": {"id": "claude-opus-4-6"}, "version": "2.1.240",
               "context_window": {"context_window_size": 200_000, "used_percentage": 35,
                                  "total_input_tokens": 70_000, "current_usage": None}}  # fmt: skip
    assert fill_from_statusline(payload) is None
    declared = {"model": {"id": "claude-opus-4-6"},
                "context_window": {"current_usage": {"input_tokens": 130_000}}}  # fmt: skip
    reading = fill_from_statusline(declared, declared_window=1_000_000)
    assert reading is not None and reading.percent == pytest.approx(13.0)


def test_the_doctor_report_names_the_point_and_the_tiers_past_it(tmp_path: Path) -> None:
    from onstation.harness.compaction import compaction_report

    env = {"CLAUDE_CONFIG_DIR": str(tmp_path), "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "35"}
    report = compaction_report("claude-code", 200_000, RELIEF_PRESET, env=env)
    assert report["compaction_point"] == 35.0
    assert report["tiers_past_compaction"] == ["critical"]
    assert report["warning"] is not None and "Critical (38%) lies past" in str(report["warning"])
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text("model_auto_compact_token_limit = 200000\n")
    report = compaction_report("codex", 258_400, COORDINATOR_PRESET,
                               env={"CODEX_HOME": str(codex_home)})  # fmt: skip
    assert report["compaction_point"] == pytest.approx(77.4, abs=0.01)
    assert report["tiers_past_compaction"] == ["critical"]
    none = compaction_report("codex", 258_400, COORDINATOR_PRESET, env={"CODEX_HOME": "/none"})
    assert none["compaction_point"] is None and none["warning"] is None
