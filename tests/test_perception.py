"""locate, back_project and look_at on the twin, with the real twin segmentation server and client.

Accuracy is measured against the twin's true object poses (the tests' privilege; the agent never sees them).
"""

from __future__ import annotations

import math

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from calibration import load_station  # noqa: E402
from pyrua_dojo.benchmarks.locate import main as bench_main  # noqa: E402
from pyrua_dojo.benchmarks.locate import run as bench_run  # noqa: E402
from pyrua_dojo.benchmarks.locate import true_top, unique_prompt, without_depth  # noqa: E402
from primitives.actions import Observation  # noqa: E402
from primitives.kinematics import X5Kinematics  # noqa: E402
from primitives.mask_geometry import mask_outline  # noqa: E402
from primitives.perception import Perception  # noqa: E402
from primitives.robot import Robo  # noqa: E402
from primitives.seg_client import SegmentationClient  # noqa: E402
from pyrua_dojo.runtime.stepping import EnvBridge  # noqa: E402
from pyrua_dojo.seg_service.serve import serve_twin  # noqa: E402
from pyrua_dojo.twin.env import TwinConfig, TwinEnv  # noqa: E402

STATION = load_station()
KIN = X5Kinematics(STATION)


@dataclass
class Scene:
    env: TwinEnv
    url: str
    raw: dict
    depth_obs: Observation
    plain_obs: Observation

    def perception(self, url: str | None = None) -> Perception:
        return Perception(STATION, KIN, SegmentationClient(url or self.url, retries=0))

    def truth(self, label: str) -> tuple[np.ndarray, float]:
        t = self.env.truth(0)
        return true_top(t.scene.objects[label].spec, t.object_poses()[label])

    def prompt(self, label: str) -> str:
        text = unique_prompt(label, dict(self.env.truth(0).scene.objects))
        assert text is not None
        return text


def _scene(task: str, layout: int) -> Iterator[Scene]:
    env = TwinEnv(TwinConfig(segmentation=True, depth=True))
    env.reset(task, 0, layout)
    server = serve_twin(env.truth(0).mask_oracle)
    raw = env.get_obs()
    try:
        yield Scene(env, server.url, raw, Observation.from_robodojo(raw, 0),
                    Observation.from_robodojo(without_depth(raw), 0))
    finally:
        server.close()
        env.close()


@pytest.fixture(scope="module")
def blocks() -> Iterator[Scene]:
    yield from _scene("stack_blocks", 3)


def errors(loc, xy: np.ndarray, top: float) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    return float(np.hypot(loc.xyz[0] - xy[0], loc.xyz[1] - xy[1])), abs(loc.xyz[2] - top)


# ----------------------------------------------------------------------------------------------- geometry


def test_mask_outline_lies_on_the_edges() -> None:
    m = np.zeros((20, 30), bool)
    m[5:12, 8:20] = True  # columns 8..19, rows 5..11: edges at u = 8 and 20, v = 5 and 12
    pts = mask_outline(m)
    assert len(pts) == 2 * 7 + 2 * 12
    on_u = np.isin(pts[:, 0], [8.0, 20.0]) & (pts[:, 1] > 5) & (pts[:, 1] < 12)
    on_v = np.isin(pts[:, 1], [5.0, 12.0]) & (pts[:, 0] > 8) & (pts[:, 0] < 20)
    assert np.all(on_u | on_v)


def test_back_project_with_and_without_depth(blocks: Scene) -> None:
    per = blocks.perception()
    xy, top = blocks.truth("block_0")
    point = np.array([xy[0], xy[1], top - 1e-4])  # just inside the top face
    cam = per.camera(blocks.depth_obs, "cam_head")
    uv, _ = cam.project(point)
    # With depth, the depth pixel at the top face's centre gives the point (within a pixel's footprint).
    got = per.back_project(blocks.depth_obs, "cam_head", (float(uv[0]), float(uv[1])), None)
    assert got is not None and np.linalg.norm(np.array(got) - point) < 0.004
    # Without depth, the ray is cut at the given plane (exact) or the table (default).
    got = per.back_project(blocks.plain_obs, "cam_head", (float(uv[0]), float(uv[1])), top - 1e-4)
    assert got is not None and np.allclose(got, point, atol=1e-4)
    on_table = per.back_project(blocks.plain_obs, "cam_head", (float(uv[0]), float(uv[1])), None)
    assert on_table is not None and abs(on_table[2] - STATION.table.top_z) < 1e-6
    with pytest.raises(ValueError):
        per.back_project(blocks.plain_obs, "cam_head", (-5.0, 10.0), None)


# ----------------------------------------------------------------------------------------------- methods


def test_head_only_within_tolerance(blocks: Scene) -> None:
    per = blocks.perception()
    errs = []
    for label in ("block_0", "block_1", "block_2"):
        loc = per.locate(blocks.plain_obs, blocks.prompt(label), cameras=["cam_head"])
        assert loc.found and loc.method == "head" and loc.cameras == ["cam_head"], loc
        assert "prior" in loc.reason  # the head-only estimate states its assumption
        assert loc.instances == 1 and loc.score > 0.8 and loc.step == 0
        exy, ez = errors(loc, *blocks.truth(label))
        errs.append(exy)
        assert exy < 0.010 and ez < 0.015
        # Blocks of one layout share a size (0.04 / 0.05 / 0.06 m): the footprint is about that.
        size = 2 * blocks.env.truth(0).scene.objects[label].spec.half_extents[0]
        assert abs(loc.footprint[0] - size) < 0.008 and abs(loc.footprint[1] - size) < 0.008
    assert float(np.median(errs)) < 0.005


def test_depth_within_tolerance(blocks: Scene) -> None:
    per = blocks.perception()
    for label in ("block_0", "block_1", "block_2"):
        loc = per.locate(blocks.depth_obs, blocks.prompt(label))
        assert loc.found and loc.method == "depth", loc
        exy, ez = errors(loc, *blocks.truth(label))
        assert exy < 0.003 and ez < 0.002
        assert abs(loc.height - (loc.xyz[2] - STATION.table.top_z)) < 1e-3


def test_look_at_then_head_and_wrist(blocks: Scene) -> None:
    env = blocks.env
    bridge = EnvBridge(env)
    robo = Robo(bridge, bridge.first_observation(), station=STATION, step_limit=env.step_lim,
                perception=blocks.perception())
    per = blocks.perception()
    for label in ("block_1", "block_2"):
        xy, top = blocks.truth(label)
        arm = "left" if xy[0] < 0 else "right"
        target = [float(xy[0]), float(xy[1]), top]
        motion = robo.look_at(arm, target)
        assert motion.planned and motion.reached and motion.steps_used > 0, motion
        obs = Observation.from_robodojo(without_depth(env.get_obs()), robo.steps_used)
        cam = per.camera(obs, f"cam_{arm}_wrist")
        uv, dist = cam.project(np.array(target))
        assert np.hypot(uv[0] - 320, uv[1] - 240) < 10 and abs(dist - 0.25 * np.cos(0)) < 0.05
        loc = per.locate(obs, blocks.prompt(label))
        assert loc.found and loc.method == "head+wrist" and f"cam_{arm}_wrist" in loc.cameras, loc
        exy, ez = errors(loc, xy, top)
        assert exy < 0.006 and ez < 0.006
        robo.home()
    with pytest.raises(ValueError):
        robo.look_at("left", [0.0, 0.0, 0.8], distance=2.0)
    far = robo.look_at("left", [0.0, 3.0, 0.8])
    assert not far.planned and far.steps_used == 0 and "no reachable pose" in far.reason


# ----------------------------------------------------------------------------------------------- not found


def test_not_found_cases_are_results(blocks: Scene) -> None:
    per = blocks.perception()
    absent = per.locate(blocks.plain_obs, "zebra")
    assert not absent.found and "no instance of 'zebra'" in absent.reason and absent.xyz == []
    assert per.locate_all(blocks.plain_obs, "zebra") == []
    # A server that is not there: the client's reason comes through, no exception.
    down = blocks.perception("http://127.0.0.1:9").locate(blocks.plain_obs, "block")
    assert not down.found and "segmentation unavailable" in down.reason and "unavailable" in down.reason
    none = Perception(STATION, KIN, None).locate(blocks.plain_obs, "block")
    assert not none.found and "no segmentation service" in none.reason


def test_object_at_the_image_border(blocks: Scene) -> None:
    env = TwinEnv(TwinConfig(segmentation=True))
    try:
        env.reset("stack_blocks", 0, 3)
        truth = env.truth(0)
        pose = truth.object_poses()["block_0"].copy()
        pose[:2] = (0.68, -0.05)  # at the table's right edge: cut by the head image's right border
        truth.set_object_pose("block_0", pose)
        server = serve_twin(truth.mask_oracle)
        try:
            obs = Observation.from_robodojo(env.get_obs(), 0)
            loc = Perception(STATION, KIN, SegmentationClient(server.url)).locate(obs, unique_prompt(
                "block_0", dict(truth.scene.objects)) or "")
        finally:
            server.close()
        assert not loc.found and "border" in loc.reason
    finally:
        env.close()


def test_cameras_restriction_and_locate_all(blocks: Scene) -> None:
    per = blocks.perception()
    head = per.locate(blocks.depth_obs, blocks.prompt("block_0"), cameras=["cam_head"])
    assert head.found and head.cameras == ["cam_head"] and head.method == "depth"
    wrist = per.locate(blocks.plain_obs, blocks.prompt("block_0"), cameras=["cam_right_wrist"])
    assert wrist.cameras == ["cam_right_wrist"] and (not wrist.found or wrist.method == "wrist")
    with pytest.raises(ValueError):
        per.locate(blocks.plain_obs, "block", cameras=["cam_top"])
    every = per.locate_all(blocks.plain_obs, "block", cameras=["cam_head"])
    assert len(every) == 3 and all(loc.found and loc.instances == 3 for loc in every)
    assert [loc.score for loc in every] == sorted((loc.score for loc in every), reverse=True)
    truths = [blocks.truth(f"block_{i}")[0] for i in range(3)]
    for loc in every:
        assert min(np.hypot(loc.xyz[0] - t[0], loc.xyz[1] - t[1]) for t in truths) < 0.01


def test_robo_locate_validates_and_delegates(blocks: Scene) -> None:
    bridge = EnvBridge(blocks.env)
    robo = Robo(bridge, blocks.raw, station=STATION, step_limit=550, perception=blocks.perception())
    with pytest.raises(ValueError):
        robo.locate("  ")
    with pytest.raises(ValueError):
        robo.locate("block", cameras=["cam_top"])
    loc = robo.locate(blocks.prompt("block_0"))
    assert loc.found and loc.method == "depth"


def test_robo_locate_near_picks_the_instance_nearest_the_point(blocks: Scene) -> None:
    # Trial N, hang_mugs: after look_at over one mug, locate("blue mug") returned the other one; `near` chooses.
    bridge = EnvBridge(blocks.env)
    robo = Robo(bridge, blocks.raw, station=STATION, step_limit=550, perception=blocks.perception())
    every = [b for b in robo.locate_all("block") if b.found]
    assert len(every) >= 2
    for b in every:
        chosen = robo.locate("block", near=b.xyz[:2])
        assert chosen.xyz == b.xyz
        assert robo.locate("block", near=[b.xyz[0] + 0.01, b.xyz[1], 0.9]).xyz == b.xyz
    with pytest.raises(ValueError):
        robo.locate("block", near=[0.1])
    assert not robo.locate("zebra", near=[0.0, 0.0]).found
    # Trial S: near=[-0.315, -0.076] returned a block at (0.019, -0.208) as found; far from every match is not found.
    far = [0.6, 0.3]
    nearest = min(every, key=lambda b: math.dist(b.xyz[:2], far))
    assert math.dist(nearest.xyz[:2], far) > 0.1
    missed = robo.locate("block", near=far)
    assert not missed.found and missed.xyz == [] and "cm away" in missed.reason, missed.reason
    assert str(round(nearest.xyz[0], 3)) in missed.reason


# ----------------------------------------------------------------------------------------------- bench


@pytest.mark.slow
def test_bench_locate_figures_hold_on_three_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    # The thresholds are the oracle's: exact masks and the agent's own station, said explicitly.
    results = bench_run(layouts=3, seed=0, wrist_objects=2, noises=("none",), station="exact")
    head, wrist, depth = (results[(m, "none")].summary() for m in ("head", "head+wrist", "depth"))
    assert head["n"] >= 15 and wrist["n"] >= 4 and depth["n"] >= 15
    assert head["xy_median"] < 10.0
    assert wrist["xy_median"] < 4.0 and wrist["z_median"] < 4.0
    assert depth["xy_median"] < 3.0 and depth["z_median"] < 3.0
    # The stated uncertainty covers the true error at twice its value (issue 17's 90 %); head-only was 14 of 17 here
    # (a lemon 23 mm off at 5 mm stated, a flat coaster's top 38 mm high at 10 mm) before round footprints said more.
    assert wrist["covered"] >= 0.9 and depth["covered"] >= 0.9 and head["covered"] >= 0.9, (head, wrist, depth)
    assert bench_main(layouts=1, seed=0, wrist_objects=1, noise="none", station="exact") in (0, 1)
    out = capsys.readouterr().out
    assert "head+wrist" in out and "xy median" in out and "covered" in out
