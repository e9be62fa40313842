"""The XPolicyLab Model on the twin, driven the way RoboDojo's deploy loop drives it (one observation per chunk)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from pyrua_dojo.plugin.model import Model
from pyrua_dojo.runtime.trace import load_run
from pyrua_dojo.twin.env import TwinEnv
from tests.support.openai_server import FakeOpenAIServer, Slow, ToolCalls, python_call

SMALL_MOVE = """\
# %% move the right arm up a little, then stop
m = robo.move_to("right", [0.3, -0.2, 0.95], path="joint")
print(m.reached, m.steps_used)
"""

LONG_MOVES = """\
# %% keep moving
for k in range(100):
    robo.move_to("right", [0.3, -0.2, 0.95 if k % 2 else 0.85], path="joint")
"""


@pytest.fixture(scope="module")
def env() -> TwinEnv:
    e = TwinEnv()
    yield e
    e.close()


def model(tmp_path: Path, program: str | None = None, **cfg) -> Model:
    settings = {"task_name": "stack_blocks", "seed": 0, "action_type": "joint", "run_root": str(tmp_path / "runs")}
    if program is not None:
        p = tmp_path / "program.py"
        p.write_text(program)
        settings.update(planner="scripted", program=str(p))
    settings.update(cfg)
    return Model(settings)


def drive(m: Model, env: TwinEnv, max_chunks: int = 10_000) -> tuple[int, list[int]]:
    """XPolicyLab's reference loop: obs -> update_obs -> get_action -> run the chunk; returns steps and chunk sizes."""
    steps, sizes = 0, []
    for _ in range(max_chunks):
        if env.is_episode_end():
            break
        m.update_obs(env.get_obs())
        chunk = m.get_action()
        assert isinstance(chunk, list) and chunk, "get_action must never return an empty chunk"
        sizes.append(len(chunk))
        for action in chunk:
            env.take_action(action)
            steps += 1
            if env.is_episode_end():
                break
    return steps, sizes


@pytest.mark.slow
def test_agent_that_finishes_early_gets_hold_chunks_until_the_step_limit(tmp_path, env):
    env.reset("stack_blocks", 0, 3)
    m = model(tmp_path, SMALL_MOVE, hold_steps=25)
    m.reset()
    m.reset()  # RoboDojo resets twice; both before the first observation
    steps, sizes = drive(m, env)
    assert steps == env.step_lim
    ep = m.episode(0)
    assert ep is not None
    m.reset()
    assert ep.result.status == "finished"
    assert sizes[0] == ep.robo.steps_used and all(n == 25 for n in sizes[1:-1])
    result = json.loads((ep.run_dir / "result.json").read_text())
    assert result["status"] == "finished"
    assert result["episode"]["closed_by"] == "reset"
    # Holds keep the last commanded targets: the arm stays where the program left it (approach horizontal,
    # so the ee link is at the TCP's height).
    assert env.truth(0).ee_pose("right")[2] == pytest.approx(0.95, abs=0.005)
    runs = [json.loads(line) for line in (tmp_path / "runs" / "episodes.jsonl").read_text().splitlines()]
    assert runs[0]["run_dir"] == str(ep.run_dir) and runs[0]["env_idx"] == 0


def test_reset_during_a_chunk_stops_the_agent_and_closes_the_trace(tmp_path, env):
    env.reset("stack_blocks", 0, 4)
    m = model(tmp_path, LONG_MOVES)
    m.update_obs(env.get_obs())
    chunk = m.get_action()
    for action in chunk[: len(chunk) // 2]:  # the episode "ends" half-way through the chunk
        env.take_action(action)
    ep = m.episode(0)
    t0 = time.monotonic()
    m.reset()
    assert time.monotonic() - t0 < 10
    assert not ep.running
    assert ep.result.status == "cancelled"
    summary = load_run(ep.run_dir)
    assert summary.status == "cancelled"
    m.reset()  # idempotent
    assert m.episode(0) is None


def test_retried_infer_returns_the_same_chunk_without_advancing(tmp_path, env):
    env.reset("stack_blocks", 0, 5)
    m = model(tmp_path, LONG_MOVES)
    obs = env.get_obs()
    m.update_obs(obs)
    first = m.get_action()
    m.update_obs(obs)  # the client re-sent the same INFER after a reconnect
    again = m.get_action()
    assert len(first) == len(again)
    assert all(np.array_equal(a["right_arm_joint_state"], b["right_arm_joint_state"]) for a, b in zip(first, again))
    ep = m.episode(0)
    assert ep.robo.steps_used == 0  # the agent is still waiting for the first chunk's observation
    for action in first:
        env.take_action(action)
    m.update_obs(env.get_obs())
    m.get_action()
    assert ep.robo.steps_used == len(first)
    m.reset()


def test_reset_while_the_llm_thinks_cancels_the_request(tmp_path, env):
    env.reset("stack_blocks", 0, 6)
    with FakeOpenAIServer() as server:
        server.script([Slow(60.0, ToolCalls((python_call("print(1)"),)))])
        m = model(
            tmp_path,
            planner="openai",
            model="fake-model",
            base_url=server.base_url(),
            api_key_env="PYRUA_TEST_NO_KEY",
            get_action_timeout_s=0.5,
        )
        m.update_obs(env.get_obs())
        chunk = m.get_action()  # the LLM is still thinking: a hold comes back after 0.5 s
        assert len(chunk) >= 1
        assert server.wait_for_requests(1)
        ep = m.episode(0)
        t0 = time.monotonic()
        m.reset()
        assert time.monotonic() - t0 < 10
        assert server.wait_for_disconnects(1, timeout=10)
        assert not ep.running
        assert ep.result.status == "cancelled"


def test_an_episode_that_cannot_start_is_logged_and_held(tmp_path, env):
    env.reset("stack_blocks", 0, 7)
    m = model(tmp_path, planner="replay", replay_from=str(tmp_path / "no-such-run"))
    obs = env.get_obs()
    m.update_obs(obs)
    chunk = m.get_action()
    assert len(chunk) == 1
    assert np.allclose(chunk[0]["left_arm_joint_state"], obs["state"]["left_arm_joint_state"])
    m.update_obs(obs)
    assert len(m.get_action()) == 1  # still serving, still holding
    errors = list((tmp_path / "runs").glob("model-errors-*.log"))
    assert errors and "no turns.jsonl" in errors[0].read_text()
    m.reset()


@pytest.mark.slow
def test_two_env_indexes_in_one_model_keep_their_episodes_apart(tmp_path):
    env2 = TwinEnv(num_envs=2)
    try:
        env2.reset("stack_blocks", 0, [1, 2])
        m = model(tmp_path, SMALL_MOVE, hold_steps=50)
        steps = {0: 0, 1: 0}
        for _ in range(100):
            running = env2.get_running_env_idx_list()
            if not running:
                break
            obs_list = env2.get_obs_batch(running)
            chunks = []
            for obs in obs_list:  # XPolicyLab's ws client: one INFER per env
                m.update_obs(obs)
                chunks.append(m.get_action())
            for i in range(min(len(c) for c in chunks)):
                env2.take_action_batch([c[i] for c in chunks], running)
                for e in running:
                    steps[e] += 1
        eps = {k: m.episode(k) for k in (0, 1)}
        assert eps[0] is not eps[1]
        assert eps[0].run_dir != eps[1].run_dir
        m.reset()
        for k in (0, 1):
            assert eps[k].result.status == "finished"
            assert eps[k].result.cells == 1
    finally:
        env2.close()


def test_ee_action_type_converts_joint_targets_with_forward_kinematics(tmp_path, env):
    env.reset("stack_blocks", 0, 8)
    m = model(tmp_path, SMALL_MOVE, action_type="ee")
    m.update_obs(env.get_obs())
    chunk = m.get_action()
    assert set(chunk[0]) == {"left_ee_pose", "right_ee_pose", "left_ee_joint_state", "right_ee_joint_state"}
    assert chunk[-1]["right_ee_pose"].shape == (7,)
    for action in chunk:
        env.take_action(action)
    right = env.truth(0).ee_pose("right")
    assert np.linalg.norm(right[:3] - chunk[-1]["right_ee_pose"][:3]) < 0.01
    m.reset()


def test_unknown_setting_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown policy settings"):
        model(tmp_path, SMALL_MOVE, temprature=0.2)
