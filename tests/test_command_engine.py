"""The command engine behind `Robo`: the one owner of the step count, whoever drives the station through it."""

from __future__ import annotations

import numpy as np
import pytest

from calibration import load_station
from primitives.actions import hold_action, make_action
from primitives.command_engine import CommandEngine
from primitives.errors import CancelToken, CellInterrupted, EpisodeFinished
from primitives.robot import Robo
from pyrua_dojo.runtime.stepping import EnvBridge
from pyrua_dojo.twin.env import TwinEnv

STATION = load_station()


@pytest.fixture()
def twin():
    env = TwinEnv()
    env.reset("stack_blocks", 0, 0)
    yield env
    env.close()


def _engine(env: TwinEnv, step_limit: int | None = None, cancel: CancelToken | None = None) -> CommandEngine:
    bridge = EnvBridge(env)
    limit = env.step_lim if step_limit is None else step_limit
    return CommandEngine(bridge, bridge.first_observation(), station=STATION, step_limit=limit, cancel=cancel)


def test_robo_and_a_runner_that_builds_its_own_chunks_share_one_step_count(twin):
    engine = _engine(twin)
    robo = Robo(engine, {}, station=STATION, step_limit=twin.step_lim)  # an engine passed as the bridge is used as is
    robo.wait(4)
    start = engine.observation
    hold = hold_action(start)
    raw = engine.exchange([hold, dict(hold), dict(hold)])  # e.g. the calibration routine
    assert "state" in raw
    robo.wait(2)
    assert engine.steps_used == robo.steps_used == 9 == twin.truth(0).outcome().steps
    assert robo.steps_left == engine.steps_left == twin.step_lim - 9
    assert engine.observation.step == 9 and robo.state().step == 9


def test_a_runners_chunk_becomes_the_commanded_targets_and_the_latest_observation(twin):
    engine = _engine(twin)
    q = engine.observation.joints["left"].copy()
    q[0] += 0.05
    action = make_action(q, 0.5, engine.observation.joints["right"], 1.0)
    engine.exchange([action] * 10)
    assert np.allclose(engine.commanded_q["left"], q) and engine.commanded_g["left"] == 0.5
    assert engine.observation.step == 10
    assert abs(engine.observation.joints["left"][0] - q[0]) < 0.01  # the parsed observation is the one after it


def test_a_bad_chunk_is_refused_before_anything_moves(twin):
    engine = _engine(twin)
    bad = hold_action(engine.observation)
    bad["left_arm_joint_state"] = np.full(6, 9.0)
    with pytest.raises(ValueError, match="joint limits"):
        engine.exchange([bad])
    with pytest.raises(ValueError, match="at least one action"):
        engine.exchange([])
    assert engine.steps_used == 0 == twin.truth(0).outcome().steps


def test_the_step_limit_and_the_cancel_token_stop_the_engine(twin):
    cancel = CancelToken()
    engine = _engine(twin, step_limit=5, cancel=cancel)
    assert engine.send({}, {}, 5) == 5
    with pytest.raises(EpisodeFinished, match="step limit"):
        engine.send({}, {}, 1)
    with pytest.raises(EpisodeFinished, match="step limit"):
        engine.exchange([hold_action(engine.observation)])
    assert engine.steps_used == 5 and engine.steps_left == 0
    other = _engine(twin, cancel=cancel)
    cancel.cancel(CellInterrupted("deadline"))
    with pytest.raises(CellInterrupted):
        other.send({}, {}, 1)
    assert other.steps_used == 0


def test_hold_reads_only_joints_and_grippers_of_a_raw_observation():
    raw = {"state": {"left_arm_joint_state": np.full(6, 0.1), "right_arm_joint_state": np.zeros(6),
                     "left_ee_joint_state": [0.3], "right_ee_joint_state": [1.0]}}  # no ee pose, no cameras
    h = hold_action(raw)
    assert np.allclose(h["left_arm_joint_state"], 0.1) and h["left_ee_joint_state"][0] == 0.3
    with pytest.raises(ValueError, match="left arm"):
        hold_action({"state": {}})
    with pytest.raises(ValueError, match="no observation"):
        hold_action(None)
