"""RunOptions: play and eval take the same options, with the same checks, flags and policy settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pyrua_dojo.cli import build_parser
from pyrua_dojo.evaluate.plan import EvalSettings
from pyrua_dojo.evaluate.eval_command import settings_from_args
from pyrua_dojo.evaluate.play import PlayOptions
from pyrua_dojo.evaluate.run_options import SEG_NOISE_LEVELS, STATION_MODES, RunOptions


def test_the_command_line_names_the_twin_conditions_their_owners_define() -> None:
    from pyrua_dojo.seg_service.twin_backend import NOISE_LEVELS
    from pyrua_dojo.twin.station_draw import STATION_MODES as TWIN_STATION_MODES

    assert tuple(SEG_NOISE_LEVELS) == tuple(NOISE_LEVELS) and tuple(STATION_MODES) == tuple(TWIN_STATION_MODES)


@pytest.mark.parametrize("bad, message", [
    ({"planner": "openai"}, "needs --model or --preset"),
    ({"planner": "replay"}, "needs --replay-from"),
    ({"program": Path("/nonexistent/program.py")}, "program file not found"),
    ({"seg_noise": "perfect"}, "perfect"),
    ({"station": "guessed"}, "station must be one of"),
    ({"segmentation": "sam3"}, "segmentation must be"),
    ({"llm_call_budget": 0}, "llm_call_budget must be >= 1"),
    ({"judging_card": True, "overrides": ("judging_card=false",)}, "judging_card is set twice"),
])
def test_play_and_eval_refuse_the_same_bad_options_with_the_same_words(bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PlayOptions(task="stack_blocks", **bad)
    with pytest.raises(ValueError, match=message):
        EvalSettings(tasks=("stack_blocks",), **bad)


def test_the_console_planner_is_plays_alone() -> None:
    assert PlayOptions(task="stack_blocks", planner="console").planner == "console"
    with pytest.raises(ValueError, match="planner must be one of"):
        EvalSettings(tasks=("stack_blocks",), planner="console")


def test_the_flags_of_play_and_eval_give_the_same_run_options() -> None:
    shared = ["--planner", "scripted", "--seg-noise", "mild", "--station", "exact", "--depth", "--llm-call-budget",
              "7", "--set", "cell_deadline_s=30", "--answer-timeout", "60", "--no-judging-card"]
    parser = build_parser()
    eval_args = parser.parse_args(["eval", "--tasks", "stack_blocks", *shared])
    play_args = parser.parse_args(["play", "--task", "stack_blocks", *shared])
    settings = settings_from_args(eval_args)
    from pyrua_dojo.evaluate.run_options import run_options_from_args

    options = PlayOptions(task="stack_blocks", **run_options_from_args(play_args))
    names = [f.name for f in dataclasses.fields(RunOptions) if f.name != "request_timeout_s"]
    assert {n: getattr(settings, n) for n in names} == {n: getattr(options, n) for n in names}
    assert settings.policy_settings() == options.policy_settings() == {
        "planner": "scripted", "depth": True, "llm_call_budget": 7, "judging_card": False}


def test_an_eval_episode_gets_every_run_option_of_its_settings() -> None:
    settings = EvalSettings(tasks=("stack_blocks",), seg_noise="harsh", depth=True, judging_card=False)
    options = PlayOptions(task="stack_blocks", **settings.run_options())
    for f in dataclasses.fields(RunOptions):
        assert getattr(options, f.name) == getattr(settings, f.name), f.name
