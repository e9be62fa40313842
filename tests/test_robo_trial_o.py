"""The `robo` API defects LLM trial O found (issue 17), each reproduced on the twin: a held block set down that
ended "target" with no contact, a transit refused for a raised goal at 0.4 m from the base, tilt with the closing
line pointing at the base, and a NOT FOUND that did not say what to try."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from calibration import load_station
from primitives.actions import Action
from primitives.kinematics import X5Kinematics
from primitives.robot import Robo
from pyrua_dojo.runtime.stepping import EnvBridge
from pyrua_dojo.twin.env import TwinEnv

STATION = load_station()
TABLE = STATION.table.top_z
KIN = X5Kinematics(STATION)


class CommandWatch(EnvBridge):
    """EnvBridge that records the commanded TCP z of one arm, action by action."""

    def __init__(self, env: TwinEnv, arm: str) -> None:
        super().__init__(env)
        self.arm = arm
        self.commanded_z: list[float] = []

    def exchange(self, chunk: Sequence[Action]) -> Mapping[str, Any]:
        kin = KIN.arm(self.arm)
        self.commanded_z += [float(kin.fk(np.asarray(a[f"{self.arm}_arm_joint_state"], float), "tcp")[2, 3])
                             for a in chunk]
        return super().exchange(chunk)


def episode(task: str, seed: int, arm: str = "left") -> tuple[TwinEnv, CommandWatch, Robo]:
    env = TwinEnv()
    env.reset(task, seed, 0)
    bridge = CommandWatch(env, arm)
    return env, bridge, Robo(bridge, bridge.first_observation(), station=STATION, step_limit=env.step_lim)


@pytest.mark.slow
@pytest.mark.parametrize("aim_below_mm, speed", [(3.0, 0.05), (8.0, 0.05), (8.0, 0.15)])
def test_setting_a_held_block_down_on_another_is_contact_not_target(aim_below_mm, speed):
    # Trial O, stack_blocks: the top block, aimed 8 mm below its expected contact, landed and slipped up in the grip;
    # the arm lagged 2.2-2.9 mm (under the 3 mm contact lag), so the descent came back "target", no contact.
    env, bridge, robo = episode("stack_blocks", 12)
    try:
        truth = env.truth(0)
        base = truth.object_poses()["block_2"].copy()  # 4 cm cubes: block_0 is carried onto block_2
        base[:2] = -0.041, -0.199  # the trial's stack spot
        truth.set_object_pose("block_2", base)
        block = truth.object_poses()["block_0"]
        assert robo.move_to("left", [block[0], block[1], 0.85], yaw=0.0, path="transit", clearance=0.05).reached
        assert robo.descend("left", z=TABLE + 0.025, speed=0.1).stopped_by == "target"
        g = robo.close("left")
        assert g.held, g
        below = robo.arm("left").tcp[2] - (truth.object_poses()["block_0"][2] - 0.02)  # its bottom under the TCP
        assert robo.move_to("left", [base[0], base[1], 0.90], yaw=0.0, path="transit", clearance=0.03).reached
        free = robo.descend("left", z=0.87, speed=speed)  # held block in free air: no false contact
        assert free.stopped_by == "target" and not free.contact, free
        contact_z = TABLE + 0.04 + below  # the TCP where the held block's bottom meets the lower block's top
        d = robo.descend("left", z=contact_z - aim_below_mm / 1000, speed=speed)
        assert d.stopped_by == "contact" and d.contact, d
        # Found within one chunk (2 steps of 40 ms): the held block slips up in the grip by up to that much.
        assert contact_z - 0.002 - speed * 0.08 <= d.tcp[2] <= contact_z + 0.002
        held = truth.object_poses()["block_0"]
        assert held[2] == pytest.approx(base[2] + 0.04, abs=0.002)  # it has landed
        # It stopped pressing, and what it measured as free is still free: a descent in the air is not contact.
        assert robo.move_to("left", [base[0] - 0.1, base[1], 0.90], yaw=0.0, path="transit", clearance=0.03).reached
        again = robo.descend("left", by=0.02, speed=0.05)
        assert again.stopped_by == "target", again
    finally:
        env.close()


def test_transit_to_a_raised_goal_near_its_reach_lowers_its_travel_down_to_3_cm_above_the_goal():
    # Trial O, stack_blocks: check_move("right", [-0.04, -0.2, 0.83], path="transit") answered "no IK solution above
    # the target at z=0.994; nor at any lower height down to z=0.910": clearance above the goal was out of reach.
    env, bridge, robo = episode("stack_blocks", 12, "right")
    try:
        goal = [-0.04, -0.2, 0.83]
        check = robo.check_move("right", goal, yaw=0.0, path="transit")
        assert check.feasible, check.reason
        assert goal[2] + 0.03 - 1e-6 <= check.travel_z < goal[2] + 0.08
        bridge.commanded_z.clear()
        m = robo.move_to("right", goal, yaw=0.0, path="transit")
        assert m.reached, m.reason
        assert m.travel_z == [pytest.approx(check.travel_z)]
        assert check.steps <= m.steps_used <= check.steps + robo._config.settle_steps
        zs = bridge.commanded_z
        last_high = max(i for i, z in enumerate(zs) if z >= check.travel_z - 0.005)
        assert min(zs[: last_high + 1]) >= min(zs[0], check.travel_z) - 0.005  # never under it before the descent
        assert all(np.diff(zs[last_high:]) < 0.002)
        # A goal whose every travel height down to 3 cm above it is out of reach is still refused, saying so.
        far = robo.check_move("right", [0.3, 0.3, 0.85], yaw=0.0, path="transit")
        assert not far.feasible and "z=0.880" in far.reason, far.reason
    finally:
        env.close()


def test_a_tilted_pose_refused_with_the_closing_line_toward_the_base_names_the_yaw_that_reaches():
    # Trial O, general_pickup: a bottle 0.49 m from the right base; every yaw=pi/2 pose with tilt came back "out of
    # reach": tilt leans about the closing line, and pi/2 pointed that line (nearly) at the base.
    import re

    env, bridge, robo = episode("general_pickup", 12, "right")
    try:
        target = [0.386, 0.028, 0.95]
        refused = robo.check_move("right", target, yaw=1.57, tilt=0.5, path="joint")
        assert not refused.feasible
        found = re.search(r"yaw=(-?\d+\.\d+)", refused.reason)
        assert found and "closing line" in refused.reason, refused.reason
        across = float(found.group(1))
        assert robo.check_move("right", target, yaw=across, tilt=0.5, path="joint").feasible
        # The hint is for tilted poses only: a refused top-down pose says nothing of it.
        plain = robo.check_move("right", target, yaw=1.57, path="joint")
        assert not plain.feasible and "closing line" not in plain.reason
    finally:
        env.close()


def test_a_description_that_matches_nothing_says_to_try_fewer_of_its_own_words():
    # Trial O, stack_blocks: locate("red and white checkered block") came back "no instance ... in cam_head; ... in
    # cam_left_wrist; ... in cam_right_wrist" where locate("checkered block") found the block; nothing said so.
    import re

    from primitives.perception import Perception
    from primitives.seg_client import SegmentationClient
    from pyrua_dojo.seg_service.serve import serve_twin
    from pyrua_dojo.twin.env import TwinConfig

    env = TwinEnv(TwinConfig(segmentation=True))
    env.reset("stack_blocks", 12, 0)
    server = serve_twin(env.truth(0).mask_oracle)
    try:
        bridge = EnvBridge(env)
        robo = Robo(bridge, bridge.first_observation(), station=STATION, step_limit=env.step_lim,
                    perception=Perception(STATION, KIN, SegmentationClient(server.url, retries=0)))
        text = "red and white checkered block"
        miss = robo.locate(text)
        assert not miss.found and "cam_head" in miss.reason
        suggested = re.findall(r"'([^']+)'", miss.reason.rsplit(" try ", 1)[-1])
        assert suggested[:2] == ["checkered block", "block"], miss.reason
        # The hint is made of the caller's own words: it names nothing the agent could not know.
        assert all(set(s.split()) <= set(text.split()) for s in suggested)
        hit = robo.locate(suggested[0])
        assert hit.found, hit.reason
        block = env.truth(0).object_poses()["block_1"]  # the red checkered one
        assert np.linalg.norm(np.array(hit.xyz[:2]) - block[:2]) < 0.01
        # A one-word description that matches nothing gets the other advice.
        lone = robo.locate("pyramid")
        assert not lone.found and "look_at" in lone.reason
    finally:
        server.close()
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("tcp_above_table, width", [(0.14, 0.026), (0.125, 0.060)])
def test_a_bottle_from_above_is_held_by_its_neck_or_by_its_body_top_as_the_notes_say(tcp_above_table, width):
    # Trial O, general_pickup: a grasp aimed at the neck read 59 mm (the body); the notes now say which TCP height
    # holds which. The twin's bottle: body 60 mm across up to 11 cm, neck 26 mm up to 15 cm.
    env, bridge, robo = episode("general_pickup", 12, "right")
    try:
        truth = env.truth(0)
        label = next(o.label for o in truth.layout.objects if truth.scene.objects[o.label].spec.category == "bottle")
        for i, o in enumerate(truth.layout.objects):  # the bottle alone in front of the right arm
            pose = truth.object_poses()[o.label].copy()
            pose[:2] = (0.42, -0.13) if o.label == label else (-0.55, -0.3 + 0.05 * i)
            truth.set_object_pose(o.label, pose)
        robo.wait(15)
        bottle = truth.object_poses()[label]
        assert robo.move_to("right", [bottle[0], bottle[1], TABLE + 0.18], yaw=0.0, path="joint").reached
        assert robo.descend("right", z=TABLE + tcp_above_table, speed=0.05).stopped_by == "target"
        g = robo.close("right")
        assert g.held and g.width_m == pytest.approx(width, abs=0.003), g
        assert robo.move_to("right", [bottle[0], bottle[1], TABLE + tcp_above_table + 0.04]).reached
        robo.wait(10)
        assert truth.object_poses()[label][2] > bottle[2] + 0.03  # lifted with the gripper
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("layout", [0, 2])
def test_a_held_block_descends_in_free_air_to_its_target_and_is_set_down_as_contact_on_a_drawn_station(layout):
    # The held-object rule (the lag grows 0.8 mm) against false contacts: fast descents with the block swinging in
    # the grip, right after joint moves, on a station a little unlike the model the agent assumes.
    from pyrua_dojo.twin.env import TwinConfig
    from pyrua_dojo.twin.station_draw import station_for_layout

    env = TwinEnv(TwinConfig(station=station_for_layout("unknown", 10, layout)))
    try:
        env.reset("stack_blocks", 10, layout)
        truth = env.truth(0)
        labels = sorted(truth.object_poses())
        for i, label in enumerate(labels):  # one block in front of the right arm, the others out of the way
            pose = truth.object_poses()[label].copy()
            pose[:2] = (0.2, -0.15) if i == 0 else (-0.5, -0.3 + 0.1 * i)
            truth.set_object_pose(label, pose)
        bridge = EnvBridge(env)
        robo = Robo(bridge, bridge.first_observation(), station=STATION, step_limit=env.step_lim)
        robo.wait(5)
        table = truth.station.table.top_z
        block = truth.object_poses()[labels[0]]
        size = 2 * (block[2] - table)
        assert robo.move_to("right", [block[0], block[1], TABLE + size + 0.06], yaw=0.0, path="joint").reached
        robo.descend("right", z=TABLE + 0.03, speed=0.1)
        assert robo.close("right").held
        for speed in (0.2, 0.1, 0.05):
            for goal in ([0.25, -0.2, TABLE + 0.13], [0.1, -0.25, TABLE + 0.14]):
                assert robo.move_to("right", goal, yaw=0.0, path="joint").reached
                free = robo.descend("right", by=0.05, speed=speed)
                assert free.stopped_by == "target", (speed, goal, free)
        assert robo.move_to("right", [0.25, -0.2, TABLE + 0.13], yaw=0.0, path="joint").reached
        bottom = truth.object_poses()[labels[0]][2] - size / 2
        d = robo.descend("right", by=bottom - table + 0.006, speed=0.05)  # 6 mm below the table contact
        assert d.stopped_by == "contact", d
        assert truth.object_poses()[labels[0]][2] - size / 2 == pytest.approx(table, abs=0.002)
    finally:
        env.close()


@pytest.mark.slow
def test_home_from_above_the_home_height_first_rises_clear_of_what_is_below():
    # Trial P, stack_blocks: the TCP 1.4 cm above its home height with the open fingers still beside a stack's top
    # block; home() rose only from below the home height, so its joint path swept the stack over.
    env, bridge, robo = episode("stack_blocks", 18, arm="right")
    try:
        start = 0.936
        assert robo.move_to("right", [0.12, -0.30, start], yaw=0.0).reached
        bridge.commanded_z.clear()
        assert robo.home("right").reached
        z = bridge.commanded_z
        peak = int(np.argmax(z))
        assert z[peak] >= start + 0.01 - 1e-4  # it rose (2 cm here: 3 cm and more are out of reach)
        assert min(z[: peak + 1]) >= start - 1e-4  # and never went lower before it had risen
    finally:
        env.close()


def test_the_fewer_words_hint_is_only_for_a_text_no_camera_segmented():
    # Trial P: a held block "reaches the gripper's part of the image" in the wrist camera; the hint to try fewer words
    # was appended anyway, and misled.
    from primitives.robot import _nothing_matched

    held = ("no instance of 'purple block' above score 0.3 in cam_head; no instance of 'purple block' above score 0.3"
            " in cam_left_wrist; the 'purple block' instance in cam_right_wrist reaches the gripper's part of the image")
    assert not _nothing_matched(held)
    assert _nothing_matched("no instance of 'pyramid' above score 0.3 in cam_head; no instance of 'pyramid' above"
                            " score 0.3 in cam_left_wrist")
