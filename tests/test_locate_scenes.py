"""locate where objects do not simply stand on the table (issue 17): stacks, a gripper in front of a block, cubes
measured with a wrist view. Built on constructed twin scenes (`pyrua_dojo.benchmarks.locate_scenes`), masks from the twin's
oracle (no segmentation noise); truths are the twin's object poses (the tests' privilege)."""

from __future__ import annotations

import os
import re

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from calibration import load_station  # noqa: E402
from pyrua_dojo.benchmarks.locate import unique_prompt, without_depth  # noqa: E402
from primitives.actions import Observation  # noqa: E402
from primitives.kinematics import X5Kinematics  # noqa: E402
from primitives.perception import Perception  # noqa: E402
from primitives.results import Located  # noqa: E402
from primitives.seg_client import SegmentationClient  # noqa: E402
from pyrua_dojo.benchmarks.locate_scenes import Shot, _robo, shots, true_top  # noqa: E402
from pyrua_dojo.seg_service.serve import serve_twin  # noqa: E402
from pyrua_dojo.twin.env import TwinConfig, TwinEnv  # noqa: E402

STATION = load_station()
KIN = X5Kinematics(STATION)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env() -> Iterator[TwinEnv]:
    e = TwinEnv(TwinConfig(segmentation=True, depth=True, mask_capacity=8))
    yield e
    e.close()


def _locate(env: TwinEnv, raw: dict, step: int, text: str, **kw: object) -> Located:
    server = serve_twin(env.truth(0).mask_oracle)
    try:
        per = Perception(STATION, KIN, SegmentationClient(server.url, retries=0))
        return per.locate(Observation.from_robodojo(raw, step), text, **kw)  # type: ignore[arg-type]
    finally:
        server.close()


def _errors(loc: Located, shot: Shot) -> tuple[float, float]:
    return float(np.hypot(loc.xyz[0] - shot.true_xy[0], loc.xyz[1] - shot.true_xy[1])), abs(loc.xyz[2] - shot.true_top)


def test_the_top_block_of_a_stack_is_measured_on_its_support(env: TwinEnv) -> None:
    # issue 17 item 1: green on purple after look_at came back 0.049 tall (true 0.088), 2.3 cm off in xy.
    for shot in shots(env, STATION, "stack2 top", 0, 2):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found and loc.method == "head+wrist", loc
        exy, ez = _errors(loc, shot)
        assert exy < 0.004 and ez < 0.004, (loc, shot.true_xy, shot.true_top)
        assert "rests on something" in loc.reason
        assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m
        depth = _locate(env, shot.raw, shot.step, shot.text)
        assert depth.method == "depth" and max(_errors(depth, shot)) < 0.002


def test_a_block_partly_hidden_by_a_gripper_is_flagged(env: TwinEnv) -> None:
    # issue 17 item 8: a block hidden in part moved 1.4 cm and turned 35 deg with no warning. Head camera only.
    env.reset("stack_blocks", 0, 1)
    robo = _robo(env, STATION)
    label = "block_0"  # in the middle of the table, clear of the arms at home
    text = unique_prompt(label, dict(env.truth(0).scene.objects))
    assert text is not None
    xy, top = true_top(env, label)
    clear = _locate(env, without_depth(env.get_obs()), 0, text, cameras=["cam_head"])
    assert clear.found and "hidden by" not in clear.reason
    arm = "left" if xy[0] < 0 else "right"
    assert robo.move_to(arm, [xy[0], xy[1] - 0.07, top + 0.04], yaw=0.0, path="joint").reached
    loc = _locate(env, without_depth(env.get_obs()), robo.steps_used, text, cameras=["cam_head"])
    assert loc.found and "partly hidden" in loc.reason, loc
    assert "stands on the table" in loc.reason  # the assumption is named
    exy = float(np.hypot(loc.xyz[0] - xy[0], loc.xyz[1] - xy[1]))
    assert exy <= 2 * loc.uncertainty_xy_m and abs(loc.xyz[2] - top) <= 2 * loc.uncertainty_z_m
    # A wrist view from the other arm measures it despite the gripper in front.
    other = "right" if arm == "left" else "left"
    assert robo.look_at(other, [xy[0], xy[1], top]).planned
    both = _locate(env, without_depth(env.get_obs()), robo.steps_used, text)
    assert both.method == "head+wrist", both
    assert np.hypot(both.xyz[0] - xy[0], both.xyz[1] - xy[1]) < 0.004 and abs(both.xyz[2] - top) < 0.004, both


def test_cubes_at_table_level_with_a_wrist_view_have_their_height(env: TwinEnv) -> None:
    # issue 17 item 8: a 4.4 cm cube measured "head+wrist" came back 1.3 mm tall.
    env.reset("cover_blocks", 0, 0)
    robo = _robo(env, STATION)
    for label in ("red", "green", "blue"):
        xy, top = true_top(env, label)
        for arm in ("left", "right"):
            if not robo.look_at(arm, [xy[0], xy[1], top]).planned:
                continue
            loc = _locate(env, without_depth(env.get_obs()), robo.steps_used, f"{label} cube")
            assert loc.found and loc.method == "head+wrist", loc
            assert abs(loc.height - (top - STATION.table.top_z)) < 0.004, (label, arm, loc)
            assert np.hypot(loc.xyz[0] - xy[0], loc.xyz[1] - xy[1]) < 0.004
            robo.home(arm)


def test_a_held_block_is_measured_relative_to_the_tcp(env: TwinEnv) -> None:
    # issue 17 item 9: nothing measured where a held object sits relative to the TCP.
    from pyrua_dojo.benchmarks.locate_scenes import _grasp

    env.reset("stack_blocks", 0, 0)
    robo = _robo(env, STATION)
    arm = _grasp(env, robo, "block_0", 0.15)
    text = unique_prompt("block_0", dict(env.truth(0).scene.objects))
    assert text is not None
    xy, top = true_top(env, "block_0")
    truth = np.array([xy[0], xy[1], top]) - np.array(robo.arm(arm).tcp)
    for raw in (without_depth(env.get_obs()), env.get_obs()):
        loc = _locate(env, raw, robo.steps_used, text)
        assert loc.found and loc.held_by == arm, loc
        assert np.linalg.norm(np.array(loc.tcp_offset) - truth) < 0.005, (loc.tcp_offset, truth)
        assert "held by" in loc.reason or "gripper" in loc.reason
        # The outline (at the top's height, as the steepest usable camera sees it) surrounds the top centre.
        assert len(loc.outline) >= 3
        poly = np.array(loc.outline, np.float32)
        assert cv2.pointPolygonTest(poly, (float(xy[0]), float(xy[1])), False) > 0


def test_a_held_block_is_measured_between_the_pads(env: TwinEnv) -> None:
    # The held block's locate was 64 mm off (the free solid fit found too little of it behind the fingers and
    # the table-plane outline followed). Grasped, lifted 12 cm, the other arm's wrist camera looking at it.
    measured = 0
    for shot in shots(env, STATION, "held block", 5, 3):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found and loc.method == "head+wrist" and loc.held_by, loc
        assert "held by the" in loc.reason
        exy, ez = _errors(loc, shot)
        assert exy < 0.004 and ez < 0.006, (loc, shot.true_xy, shot.true_top)
        assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m
        depth = _locate(env, shot.raw, shot.step, shot.text)
        assert depth.method == "depth" and max(_errors(depth, shot)) < 0.004, depth
        measured += 1
    assert measured >= 2


def test_a_mug_with_depth_is_measured_at_its_body(env: TwinEnv) -> None:
    # With depth, the mug's centre came from a cylinder fit pulled toward its handle (8-10 mm off): the depth
    # points' centre is kept when the fit does not explain the masks.
    from itertools import chain

    measured = 0
    for shot in chain(shots(env, STATION, "cup upright", 5, 2), shots(env, STATION, "cup upside down", 5, 1)):
        measured += 1
        loc = _locate(env, shot.raw, shot.step, shot.text)  # each right away: the twin keeps few images' masks
        assert loc.found and loc.method == "depth", loc
        exy, ez = _errors(loc, shot)
        assert exy < 0.002 and ez < 0.002, (shot.scenario, loc, shot.true_xy, shot.true_top)
        assert exy <= 2 * loc.uncertainty_xy_m
    assert measured >= 2


def test_a_round_object_whose_top_an_arm_hides_says_so(env: TwinEnv) -> None:
    # The bell (a dome with a knob) under the looking gripper: the head camera does not see its top, the wrist
    # camera from above sees a disc, and the cylinder fit came back 44 mm too low with a 1.5 mm uncertainty.
    measured = 0
    for shot in shots(env, STATION, "round pickup", 4, 2):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found, loc
        exy, ez = _errors(loc, shot)
        assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (loc, shot.true_top)
        if ez > 0.004:
            assert "top is hidden" in loc.reason
        measured += 1
    assert measured == 2


def test_bench_scenarios_print_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from pyrua_dojo.benchmarks.locate_scenes import SCENARIOS, run_scenarios

    results = run_scenarios(1, 0, ["stack2 top"])
    plain, depth = results[("stack2 top", "no depth")], results[("stack2 top", "depth")]
    assert len(plain.xy) == 1 and len(depth.xy) == 1 and plain.misses == 0
    assert plain.xy[0] < 4.0 and plain.z[0] < 4.0 and plain.covered == [True]
    assert set(SCENARIOS) >= {"stack2 top", "stack3 top", "held block", "beside gripper", "half hidden",
                              "cup upright", "cup upside down", "round pickup"}


def test_a_mug_without_depth_is_measured_at_its_body(env: TwinEnv) -> None:
    # Without depth, the mug's cylinder fit compared its silhouette with the mask's convex hull, which fills the gaps
    # beside the handle: upright 4-7 mm off in xy and up to 10 mm in height, upside down up to 17 mm in height.
    from itertools import chain

    measured = 0
    for shot in chain(shots(env, STATION, "cup upright", 4, 2), shots(env, STATION, "cup upside down", 4, 2)):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found and loc.method == "head+wrist", loc
        exy, ez = _errors(loc, shot)
        assert exy < 0.003 and ez < 0.004, (shot.scenario, loc, shot.true_xy, shot.true_top)
        assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m
        measured += 1
    assert measured == 4


def test_a_held_block_is_not_stretched_where_the_arm_may_hide_it(env: TwinEnv) -> None:
    # Seed 13, layouts 0 and 2 (a 50 and a 60 mm cube, each centred between the pads within 4 mm): the arm's capsules
    # covered the box's whole outline in the head and the looking wrist views, nothing kept the free fit from growing
    # along the pads (57 and 67 mm long, centre 3 mm off), and the "view from above" footprint came back 66 x 13 mm.
    for i, shot in enumerate(shots(env, STATION, "held block", 13, 3)):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found and loc.held_by, loc
        exy, ez = _errors(loc, shot)
        if i == 1:
            # A 50 mm cube turned in the grip (pads 54 mm apart, 16 mm off along them): a box square to the pads
            # put it 14 mm off; turned, it touches them with its corners.
            assert exy < 0.008 and exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, loc
            continue
        assert exy < 0.0015 and ez < 0.002, (loc, shot.true_xy, shot.true_top)
        bb = env.truth(0).scene.objects[shot.label].spec.bbox_vertices
        size = float((bb.max(0) - bb.min(0))[0])
        assert abs(loc.footprint[0] - size) < 0.004 and abs(loc.footprint[1] - size) < 0.004, (loc.footprint, size)


def test_a_block_beside_a_gripper_is_measured_where_the_arm_hides_part_of_it(env: TwinEnv) -> None:
    # Seed 8 of the bench's "beside gripper" scene. Layout 0, with depth: the depth points of the partly hidden top
    # started the masks' fit in another valley (a cylinder), 13 mm off at 5 mm stated. Layout 9, without depth: the
    # box's free length ran along the edges the arms hide (68 x 94 mm for a 60 mm cube, 16 mm off).
    for i, shot in enumerate(shots(env, STATION, "beside gripper", 8, 10)):
        if i not in (0, 9):
            continue
        for raw in (without_depth(shot.raw), shot.raw):
            loc = _locate(env, raw, shot.step, shot.text)
            assert loc.found, loc
            exy, ez = _errors(loc, shot)
            assert exy < 0.003 and exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (i, loc)


def test_a_held_block_with_depth_is_not_as_tall_as_its_gripper(env: TwinEnv) -> None:
    # Trial Z (depth on, realistic masks): a held block's tcp_offset read 0.042 m up for 0.021: a mask grown over the
    # pads and the gripper's body brought their depth points, up to the palm and above. Seed 13's held blocks: the
    # top's error was 13.5 mm median (p95 30) under realistic masks, 67 % covered.
    errors = []
    for shot in shots(env, STATION, "held block", 13, 6):
        loc = _locate_noisy(env, shot.raw, shot.step, shot.text, "realistic")
        if not loc.held_by:
            continue  # the noise level sometimes offers another instance first (a sliver on the table)
        assert loc.method == "depth", loc
        ez = abs(loc.xyz[2] - shot.true_top)
        assert ez <= 2 * loc.uncertainty_z_m, (loc, shot.true_top)
        errors.append(ez)
    assert len(errors) >= 4 and float(np.median(errors)) < 0.008, errors


def test_a_held_block_no_camera_sees_whole_is_measured_between_the_pads(env: TwinEnv) -> None:
    # A held block cut by the head image's border and reaching into its own wrist camera's gripper part (the other
    # arm's wrist camera looking elsewhere) was not found at all: it is measured from those parts and the pads.
    cut = 0
    for shot in shots(env, STATION, "held block", 4, 5):
        for raw in (without_depth(shot.raw), shot.raw):
            loc = _locate(env, raw, shot.step, shot.text)
            assert loc.found and loc.held_by, loc
            exy, ez = _errors(loc, shot)
            assert exy < 0.004 and ez < 0.004, (loc, shot.true_xy, shot.true_top)
            assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m
            cut += "no camera sees all of it" in loc.reason
    assert cut >= 2  # the green block of layout 1, with and without depth


def test_a_bottle_is_measured_to_its_neck_or_says_it_may_miss_it(env: TwinEnv) -> None:
    # general_pickup's bottles without depth read 18-40 mm low (the body's top, without its neck) with a 1.5 mm
    # uncertainty. A neck the head camera sees is fitted; one the looking gripper hides is named and covered.
    necks = 0
    for shot in shots(env, STATION, "round pickup", 4, 4, categories=("bottle",)):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found, loc
        exy, ez = _errors(loc, shot)
        assert exy < 0.004 and exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (loc, shot.true_top)
        if "narrower part stands on it" in loc.reason:
            assert ez < 0.004, (loc, shot.true_top)
            necks += 1
        else:
            assert "a neck, a knob or a dome on top would be missed" in loc.reason, loc
    assert necks >= 1


# ------------------------------------------------------------------ trial O: realistic masks, an unknown station

def _trial_env() -> TwinEnv:
    """A twin as LLM trials run it: the true station drawn around the one the agent assumes (seed 12, layout 0
    moves the left wrist camera by 14 mm and 2.6 deg, the right by 7 mm and 3.9 deg)."""
    from pyrua_dojo.twin.station_draw import StationSpread

    e = TwinEnv(TwinConfig(segmentation=True, depth=True, mask_capacity=8, station_spread=StationSpread()))
    e.reset("stack_blocks", 12, 0)
    return e


def _locate_noisy(env: TwinEnv, raw: dict, step: int, text: str, noise: str, **kw: object) -> Located:
    from pyrua_dojo.benchmarks.locate import NOISES

    server = serve_twin(env.truth(0).mask_oracle, noise=NOISES[noise])
    try:
        per = Perception(STATION, KIN, SegmentationClient(server.url, retries=0))
        return per.locate(Observation.from_robodojo(raw, step), text, **kw)  # type: ignore[arg-type]
    finally:
        server.close()


@pytest.mark.parametrize("depth", [False, True], ids=["masks", "depth"])
def test_a_stack_checked_on_an_unknown_station_says_how_unsure_it_is(depth: bool) -> None:
    # trialO item 3: blue placed on the checkered block, the left wrist looking at the stack: locate("blue block")
    # said "rests on the table", 30 mm low, and stated 4-9 mm. The wrist camera's model, corrected at the fingertips
    # only, is off by about 7 px at the block and the head's by 2 px: the fit places the support wrong by a few
    # centimetres, and its own residuals cannot show it. The stated uncertainty carries the cameras' model errors.
    # With depth the points are placed through each camera's pose: a drawn station moved them by 5-9 mm while 1.5 mm
    # was stated (bench locate, realistic masks on unknown stations: 0-50 % covered).
    from pyrua_dojo.benchmarks.locate_scenes import _place, _settle
    from pyrua_dojo.twin.objects import IDENTITY

    env = _trial_env()
    try:
        robo = _robo(env, STATION)
        spot = np.array([-0.04, -0.20])
        _place(env, "block_1", spot, 0.765 + 0.0205, IDENTITY, yaw=0.3)
        _place(env, "block_2", spot + [-0.002, 0.001], 0.765 + 0.0405 + 0.0205, IDENTITY, yaw=0.1)
        _settle(env, robo)
        assert robo.look_at("left", [-0.042, -0.199, 0.83]).planned
        xy, top = true_top(env, "block_2")
        raw = env.get_obs() if depth else without_depth(env.get_obs())
        for noise in ("none", "realistic"):
            loc = _locate_noisy(env, raw, robo.steps_used, "blue block", noise)
            assert loc.found and loc.method == ("depth" if depth else "head+wrist"), (noise, loc)
            assert "rests on the table" not in loc.reason, (noise, loc.reason)
            exy, ez = float(np.hypot(loc.xyz[0] - xy[0], loc.xyz[1] - xy[1])), abs(loc.xyz[2] - top)
            assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (noise, loc, xy, top)
    finally:
        env.close()


def test_a_sliver_at_a_wrist_image_border_does_not_decide_the_support() -> None:
    # trialO item 2: the right wrist looking at the checkered block shows the blue block (on the table) as a sliver
    # at its image border; the head + wrist fit said "rests on something 37 mm above the table", 31 mm too high.
    env = _trial_env()
    try:
        robo = _robo(env, STATION)
        xy1, top1 = true_top(env, "block_1")
        assert robo.look_at("right", [float(xy1[0]), float(xy1[1]), top1]).planned
        xy, top = true_top(env, "block_2")
        raw = without_depth(env.get_obs())
        for noise in ("none", "realistic"):
            loc = _locate_noisy(env, raw, robo.steps_used, "blue block", noise, cameras=["cam_head", "cam_right_wrist"])
            assert loc.found, loc
            assert not re.search(r"rests on something \d+ mm", loc.reason), (noise, loc.reason)
            if "cam_right_wrist" in loc.cameras:
                assert "image border" in loc.reason, loc.reason
            exy, ez = float(np.hypot(loc.xyz[0] - xy[0], loc.xyz[1] - xy[1])), abs(loc.xyz[2] - top)
            assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (noise, loc, xy, top)
    finally:
        env.close()


def test_a_bell_top_is_within_its_stated_uncertainty(env: TwinEnv) -> None:
    # bench locate, round pickup: the bell (a dome and a knob) came back 33-36 mm low with 5-8 mm stated: a cylinder
    # fits its body and no neck explains what sticks out above it in the head's view.
    measured = 0
    for shot in shots(env, STATION, "round pickup", 4, 2, categories=("bell",)):
        loc = _locate(env, without_depth(shot.raw), shot.step, shot.text)
        assert loc.found and loc.method == "head+wrist", loc
        exy, ez = _errors(loc, shot)
        assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (loc, shot.true_top)
        measured += 1
    assert measured == 2


def test_a_block_held_at_mid_height_is_measured_from_its_wrist_view_alone_and_not_held_once_released() -> None:
    # trialP item 2, stack_blocks seed 18 layout 0 on an unknown station: the 5 cm purple cube carried in the right
    # gripper (grasped 2.5 cm above the table) was NOT FOUND when only its own wrist camera saw it (the fingers hide
    # 76% of its outline; the held fit was dropped above 75%). Then, released and lifted 5 cm above, it came back
    # held_by "right": open fingers around an object were taken for a grip.
    from pyrua_dojo.benchmarks.locate import NOISES
    from pyrua_dojo.twin.station_draw import station_for_layout

    env = TwinEnv(TwinConfig(segmentation=True, depth=True, mask_capacity=8, station=station_for_layout("unknown", 18, 0)))
    try:
        env.reset("stack_blocks", 18, 0)
        robo = _robo(env, STATION)
        table = STATION.table.top_z
        block = env.truth(0).object_poses()["block_2"].copy()  # the purple cube, in front of the right arm
        block[:2] = 0.327, -0.123  # where the trial found it
        env.truth(0).set_object_pose("block_2", block)
        robo.wait(5)
        assert robo.move_to("right", [block[0], block[1], table + 0.1], yaw=0.0, path="transit").reached
        robo.descend("right", z=table + 0.012, speed=0.12)
        assert robo.close("right").held
        tcp = robo.arm("right").tcp
        assert robo.move_to("right", [tcp[0], tcp[1], tcp[2] + 0.06], path="line").reached
        assert robo.move_to("right", [0.123, -0.30, 0.905], path="transit").reached
        xy, top = true_top(env, "block_2")
        obs = Observation.from_robodojo(without_depth(env.get_obs()), robo.steps_used)
        wrist_only = held = 0
        for seed in (0, 1, 2, 4, 5, 7):  # 3, 6: the noise model matches another object (a spurious mask, green)
            server = serve_twin(env.truth(0).mask_oracle, noise=NOISES["realistic"], seed=seed)
            try:
                per = Perception(STATION, KIN, SegmentationClient(server.url, retries=0))
                loc = per.locate(obs, "purple block")
            finally:
                server.close()
            if not loc.held_by:  # the head sees part of it, the fingers hide 90% in the wrist view: it says so
                assert "it may be the object it holds" in loc.reason and "not measured" in loc.reason, (seed, loc)
                continue
            assert loc.found and loc.held_by == "right", (seed, loc.reason)
            exy, ez = float(np.hypot(loc.xyz[0] - xy[0], loc.xyz[1] - xy[1])), abs(loc.xyz[2] - top)
            assert exy <= 2 * loc.uncertainty_xy_m and ez <= 2 * loc.uncertainty_z_m, (seed, loc, xy, top)
            wrist_only += loc.cameras == ["cam_right_wrist"]
            held += 1
        assert wrist_only >= 3 and held >= 5
        # Released: its top between the open fingers is no grip.
        held_tcp = np.array(robo.arm("right").tcp)
        assert per._held(obs, held_tcp + [0.0, 0.0, 0.01], 0.05)[0] == "right"
        assert robo.open("right").value > 0.9
        released = Observation.from_robodojo(env.get_obs(), robo.steps_used)
        assert per._held(released, np.array(robo.arm("right").tcp) + [0.0, 0.0, 0.01], 0.05) == ("", [])
    finally:
        env.close()
