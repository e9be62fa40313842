"""The scripted and replay planners drive the same loop as the LLM: cells in order, then finish."""

from __future__ import annotations

import pytest

from pyrua_dojo.runtime.agent import AgentConfig
from pyrua_dojo.llm import ReplayPlanner, ScriptedPlanner
from pyrua_dojo.runtime.trace import read_jsonl, recorded_cells
from tests.support.episode import build_episode

PROGRAM = [
    "state = {'moves': 0}\nrobo.move('left', steps=3)\nstate['moves'] += 1",
    "robo.show('cam_left_wrist')\nprint('moves', state['moves'], 'steps', robo.steps_used)",
    "robo.move('right', steps=2)\nstate",
]


def test_scripted_planner_plays_its_cells_then_finishes(tmp_path):
    ep = build_episode(tmp_path, ScriptedPlanner(PROGRAM))
    result = ep.agent.run()
    assert result.status == "finished" and result.finish["status"] == "done"
    assert (result.cells, result.llm_calls, result.llm_requests, result.steps_used) == (3, 3, 0, 5)
    turns = read_jsonl(ep.run_dir / "turns.jsonl")
    assert [t["code"] for t in turns if t["kind"] == "cell"] == PROGRAM
    assert "moves 1 steps 3" in turns[1]["stdout"] and turns[1]["images"][0]["source"] == "cam_left_wrist"
    assert turns[2]["value"] == "{'moves': 1}"
    assert read_jsonl(ep.run_dir / "llm_calls.jsonl") == []


def test_scripted_planner_stops_after_a_failed_cell(tmp_path):
    ep = build_episode(tmp_path, ScriptedPlanner(["x = 1", "robo.move('middle')", "print('unreached')"]))
    result = ep.agent.run()
    assert result.status == "finished" and result.finish["status"] == "failure"
    assert result.cells == 2 and "cell 2 ended with error" in result.finish["summary"]
    lenient = build_episode(tmp_path, ScriptedPlanner(["robo.move('middle')", "print('reached')"], stop_on_error=False), name="lenient")
    assert lenient.agent.run().cells == 2


def test_scripted_program_that_ends_the_episode(tmp_path):
    ep = build_episode(tmp_path, ScriptedPlanner(["robo.move('left', steps=50)", "print('never')"]), robot={"success_at": 10})
    result = ep.agent.run()
    assert (result.status, result.outcome, result.cells) == ("episode_ended", "success", 1)


def test_replay_reproduces_a_recorded_run(tmp_path):
    original = build_episode(tmp_path, ScriptedPlanner(PROGRAM + ["1/0", "print('after the error')"], stop_on_error=False), name="original")
    original.agent.run()
    replay = build_episode(tmp_path, ReplayPlanner(recorded_cells(original.run_dir)), name="replay")
    result = replay.agent.run()
    assert result.status == "finished" and replay.planner.name == "replay"
    keys = ("code", "status", "stdout", "value", "steps_used")
    a = [{k: t[k] for k in keys} for t in read_jsonl(original.run_dir / "turns.jsonl") if t["kind"] == "cell"]
    b = [{k: t[k] for k in keys} for t in read_jsonl(replay.run_dir / "turns.jsonl") if t["kind"] == "cell"]
    assert a == b and len(a) == 5


def test_bad_scripts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="cell 2 is not a non-empty string"):
        ScriptedPlanner(["x = 1", "  "])
    with pytest.raises(ValueError, match="no turns.jsonl"):
        recorded_cells(tmp_path)
    (tmp_path / "turns.jsonl").write_text('{"kind": "reminder"}\n')
    with pytest.raises(ValueError, match="records no cells"):
        recorded_cells(tmp_path)


def test_budget_applies_to_scripted_planners_too(tmp_path):
    ep = build_episode(tmp_path, ScriptedPlanner(["x = 1"] * 10), config=AgentConfig(max_llm_calls=4))
    result = ep.agent.run()
    assert (result.status, result.cells) == ("call_budget", 4)


def test_an_agent_runs_once(tmp_path):
    ep = build_episode(tmp_path, ScriptedPlanner(["x = 1"]))
    ep.agent.run()
    with pytest.raises(RuntimeError, match="runs one episode once"):
        ep.agent.run()
