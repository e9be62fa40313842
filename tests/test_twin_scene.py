"""The twin scene: FK of the MuJoCo model against the X5 chain, MJCF facts, and the segmentation mask oracle."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from calibration import load_station
from calibration.transforms import rotation_angle
from primitives.kinematics import ArmKinematics
from pyrua_dojo.twin import TwinEnv
from pyrua_dojo.twin.masks import FINGER_PAD_WORDS
from pyrua_dojo.twin.scene import ARM_KP, FINGER_KP, TwinScene

STATION = load_station()


@pytest.mark.parametrize("arm", ["left", "right"])
def test_mujoco_fk_matches_primitives_kinematics(arm: str) -> None:
    """The twin's `<arm>_ee` site agrees with primitives.kinematics within 1e-6 m / 1e-6 rad (1,000 configs)."""
    scene = TwinScene(STATION)
    data = mujoco.MjData(scene.model)
    kin = ArmKinematics(STATION, arm)
    idx = scene.arms[arm]
    rng = np.random.default_rng(7)
    worst_p = worst_r = 0.0
    for _ in range(1000):
        q = rng.uniform(STATION.x5.lower, STATION.x5.upper)
        data.qpos[idx.qpos] = q
        mujoco.mj_kinematics(scene.model, data)
        t = kin.fk(q, "ee")
        worst_p = max(worst_p, float(np.abs(data.site_xpos[idx.ee_site] - t[:3, 3]).max()))
        worst_r = max(worst_r, rotation_angle(data.site_xmat[idx.ee_site].reshape(3, 3), t[:3, :3]))
    assert worst_p < 1e-6 and worst_r < 1e-6


def test_scene_carries_robodojo_drive_and_camera_facts() -> None:
    scene = TwinScene(STATION)
    m = scene.model
    assert m.opt.timestep * scene.options.substeps == pytest.approx(0.004)
    assert m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    for arm in ("left", "right"):
        idx = scene.arms[arm]
        assert np.allclose(m.actuator_gainprm[idx.actuators, 0], ARM_KP)
        assert np.allclose(m.actuator_forcerange[idx.actuators], [-100.0, 100.0])
        assert np.allclose(m.dof_armature[idx.dof], 0.01)
        assert np.allclose(m.actuator_gainprm[idx.finger_actuators, 0], FINGER_KP)
        assert np.allclose(m.jnt_range[m.dof_jntid[idx.finger_dof]], [0.0, 0.044])
        assert all(m.body_gravcomp[b] == 1.0 for b in idx.bodies)
        # The TCP site sits mid-pad, ee_offset + tcp_offset along link6 x.
        assert m.site_pos[idx.tcp_site][0] == pytest.approx(STATION.x5.ee_offset[0] + STATION.x5.tcp_offset)
    for name, cid in scene.cameras.items():
        k = STATION.cameras[name].intrinsics
        assert tuple(m.cam_resolution[cid]) == (k.width, k.height)
    assert m.vis.quality.offsamples == 0
    top = m.geom("table").pos[2] + m.geom("table").size[2]
    assert top == pytest.approx(0.765)


def test_segmentation_oracle_returns_instance_masks_with_words() -> None:
    with TwinEnv(segmentation=True, mask_capacity=4) as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        truth = env.truth(0)
        first = env.get_obs()
        head = first["vision"]["cam_head"]["color"]
        masks = truth.mask_oracle.lookup(head)
        assert masks is not None
        by_name = {m.name: m for m in masks}
        # The objects, and the gripper finger pads the head camera sees (segmentable for robo.fingertips).
        assert {n for n in by_name if not n.endswith("_pad")} == {"block_0", "block_1", "block_2"}
        assert all(m.words == FINGER_PAD_WORDS for n, m in by_name.items() if n.endswith("_pad"))
        by_name = {n: m for n, m in by_name.items() if not n.endswith("_pad")}
        cam = STATION.fixed_camera("cam_head")
        for label, pose in truth.object_poses().items():
            m = by_name[label]
            assert m.mask.dtype == bool and m.mask.shape == (480, 640) and m.mask.sum() > 100
            spec = truth.scene.objects[label].spec
            assert set(spec.words) | set(spec.descriptions) == set(m.words) and "block" in m.words
            (u, v), _ = cam.project(pose[:3])
            assert m.mask[int(v), int(u)]  # the block's centre projects inside its own mask
        # The segmentation service's twin backend answers a colour prompt from these masks.
        from pyrua_dojo.seg_service.twin_backend import TwinBackend

        colour = truth.scene.objects["block_1"].spec.words[0]
        dets = TwinBackend(truth.mask_oracle).segment(head, [f"{colour} block"], 0.5, 10, [])
        assert len(dets[0]) == 1 and np.array_equal(dets[0][0][1], by_name["block_1"].mask)
        # Unknown images give None; the LRU keeps only the last `mask_capacity` images.
        assert truth.mask_oracle.lookup(np.zeros_like(head)) is None
        action = {
            "left_arm_joint_state": np.array([0.4, 0.6, 0.5, 0.0, 0.0, 0.0]),
            "left_ee_joint_state": [1.0],
            "right_arm_joint_state": np.zeros(6),
            "right_ee_joint_state": [1.0],
        }
        for _ in range(2):
            env.take_action(action)  # the left arm moves: every camera sees a new image
            latest = env.get_obs()
        assert len(truth.mask_oracle) == 4
        assert truth.mask_oracle.lookup(head) is None  # evicted
        assert truth.mask_oracle.lookup(latest["vision"]["cam_left_wrist"]["color"]) is not None


def test_segmentation_off_keeps_no_masks() -> None:
    with TwinEnv() as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        env.get_obs()
        assert len(env.truth(0).mask_oracle) == 0
