"""The `robo` API defects LLM trials Q and R found (issue 17), each reproduced on the twin: a move without a yaw
refused where the same grasp turned by pi reaches, and a transit refusal that did not say a smaller clearance would
travel lower."""

from __future__ import annotations

import math

import pytest

from calibration import load_station
from primitives.robot import Robo
from pyrua_dojo.runtime.stepping import EnvBridge
from pyrua_dojo.twin.env import TwinEnv

STATION = load_station()


@pytest.fixture()
def robo() -> Robo:
    env = TwinEnv()
    env.reset("stack_blocks", 21, 0)
    bridge = EnvBridge(env)
    yield Robo(bridge, bridge.first_observation(), station=STATION, step_limit=env.step_lim)
    env.close()


def test_a_move_without_yaw_may_turn_the_grasp_by_pi(robo: Robo) -> None:
    # Trial R: after a grasp with an explicit yaw (the wrist took its twin, yaw - pi), check_move without a yaw was
    # refused "out of reach" for line and joint paths where yaw=<the arm's heading> planned in 24 steps: keeping the
    # exact orientation needs the wrist beyond its limit there, the same grasp turned by pi does not.
    assert robo.move_to("left", [-0.2, -0.15, 0.86], yaw=1.0, path="joint").reached
    heading = robo.arm("left").yaw
    for goal in ([0.0, -0.3, 0.86], [-0.1, -0.2, 0.92]):
        plain = robo.check_move("left", goal, path="joint")
        assert plain.feasible, plain.reason
    moved = robo.move_to("left", [0.0, -0.3, 0.86], path="joint")
    assert moved.reached, moved.reason
    turned = (robo.arm("left").yaw - heading) % math.pi  # the same closing line (mod pi), vertical fingers
    assert min(turned, math.pi - turned) < math.radians(2.0)


def test_a_refused_transit_names_a_smaller_clearance(robo: Robo) -> None:
    # Trial Q: a raised goal near the reach ceiling was refused with the default clearance and reached with 0.025;
    # the reason named path="joint" only.
    assert robo.move_to("right", [0.15, -0.1, 0.88], yaw=0.0, path="joint").reached
    goal = [0.0, -0.2, 0.90]  # 3 cm above it is out of reach from here; 2 cm is not
    refused = robo.check_move("right", goal, yaw=0.0, path="transit")
    assert not refused.feasible and "a smaller clearance travels lower (clearance=0.02" in refused.reason, refused
    lower = robo.check_move("right", goal, yaw=0.0, path="transit", clearance=0.02)
    assert lower.feasible and abs(lower.travel_z - 0.92) < 0.002, lower
