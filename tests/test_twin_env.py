"""TwinEnv: the observation contract, action validation, step accounting, gripper semantics, ee actions, batches."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from pyrua_dojo.twin import TwinConfig, TwinEnv
from pyrua_dojo.twin.env import UnstableLayoutError

CAMS = ("cam_head", "cam_left_wrist", "cam_right_wrist")


def hold_action(obs: dict, g_left: float = 1.0, g_right: float = 1.0) -> dict:
    return {
        "left_arm_joint_state": np.asarray(obs["state"]["left_arm_joint_state"], dtype=float),
        "left_ee_joint_state": [g_left],
        "right_arm_joint_state": np.asarray(obs["state"]["right_arm_joint_state"], dtype=float),
        "right_ee_joint_state": [g_right],
    }


@pytest.fixture(scope="module")
def env() -> TwinEnv:
    e = TwinEnv()
    e.reset("stack_blocks", seed=0, layout_id=2)
    yield e
    e.close()


def test_observation_contract(env: TwinEnv) -> None:
    obs = env.get_obs()
    assert list(obs) == ["vision", "state", "action", "data_format_version", "additional_info", "instruction", "env_idx"]
    assert list(obs["vision"]) == list(CAMS)
    for cam in CAMS:
        v = obs["vision"][cam]
        assert set(v) == {"color", "shape"}
        assert v["color"].dtype == np.uint8 and v["color"].shape == (480, 640, 3)
        assert v["shape"] == (480, 640, 3) and isinstance(v["shape"], tuple)
        assert v["color"].std() > 5  # a real image, not a blank buffer
    st = obs["state"]
    assert list(st) == [
        "left_arm_joint_state",
        "left_ee_pose",
        "right_arm_joint_state",
        "right_ee_pose",
        "left_ee_joint_state",
        "right_ee_joint_state",
    ]
    for arm in ("left", "right"):
        assert st[f"{arm}_arm_joint_state"].dtype == np.float32 and st[f"{arm}_arm_joint_state"].shape == (6,)
        assert st[f"{arm}_ee_pose"].dtype == np.float32 and st[f"{arm}_ee_pose"].shape == (7,)
        assert abs(float(np.linalg.norm(st[f"{arm}_ee_pose"][3:])) - 1.0) < 1e-5
        g = st[f"{arm}_ee_joint_state"]
        assert isinstance(g, list) and len(g) == 1 and isinstance(g[0], float) and g[0] == 1.0
        np.testing.assert_array_equal(obs["action"][f"{arm}_arm_joint_state"], st[f"{arm}_arm_joint_state"])
        assert obs["action"][f"{arm}_ee_joint_state"] == g
    assert list(obs["action"]) == [
        "left_arm_joint_state",
        "right_arm_joint_state",
        "left_ee_joint_state",
        "right_ee_joint_state",
    ]
    assert obs["data_format_version"] == "v1.0"
    assert obs["additional_info"] == {"frequency": 25}
    assert obs["instruction"] == "Stack the three blocks with different textures."
    assert obs["env_idx"] == 0
    # The ee pose is the ee site at home: x = base x - 0.001, y = base y + 0.2402, z = top + 0.1565 (URDF FK).
    np.testing.assert_allclose(st["left_ee_pose"][:3], [-0.301, -0.2098, 0.9215], atol=2e-4)


def test_depth_and_camera_matrices_when_enabled() -> None:
    with TwinEnv(depth=True, approximate_depth=True, intrinsic_matrix=True, extrinsic_matrix=True) as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        obs = env.get_obs()
        station = env.station
        for cam in CAMS:
            v = obs["vision"][cam]
            assert list(v) == ["color", "shape", "approximate_depth", "depth", "intrinsic_matrix", "extrinsic_matrix"]
            assert v["depth"].dtype == np.float32 and v["depth"].shape == (480, 640)
            assert v["approximate_depth"].dtype == np.uint16 and v["approximate_depth"].shape == (480, 640)
            np.testing.assert_array_equal(
                v["approximate_depth"], np.clip(v["depth"] * 1000, 0, 65535).astype(np.uint16)
            )
            assert v["intrinsic_matrix"].dtype == np.float64 and v["intrinsic_matrix"].shape == (3, 3)
            np.testing.assert_allclose(v["intrinsic_matrix"], station.cameras[cam].intrinsics.matrix)
            assert v["extrinsic_matrix"].dtype == np.float64 and v["extrinsic_matrix"].shape == (4, 4)
        # Head camera: the extrinsic is the USD mount pose; the centre pixel's depth is the distance to the table
        # along the optical axis (distance to the image plane).
        head = station.fixed_camera("cam_head")
        np.testing.assert_allclose(obs["vision"]["cam_head"]["extrinsic_matrix"], head.usd_extrinsic, atol=1e-6)
        origin, ray = head.pixel_rays(np.array([320.0, 240.0]))
        t = (station.table.top_z - origin[2]) / ray[2]
        assert obs["vision"]["cam_head"]["depth"][240, 320] == pytest.approx(t, abs=2e-3)


@pytest.mark.parametrize(
    "mutate, exc, message",
    [
        (lambda a: a.pop("right_ee_joint_state"), KeyError, "right_ee_joint_state"),
        (lambda a: a.pop("left_arm_joint_state"), KeyError, "left_arm_joint_state"),
        (lambda a: a.update(left_arm_joint_state=[0.0] * 5), ValueError,
         "action_dict['left_arm_joint_state'] dim mismatch: expected 6, got shape (5,)"),
        (lambda a: a.update(left_ee_pose=[0, 0, 0, 1, 0, 0, 0]), ValueError, "Multiple action types found in action dict keys"),
        (lambda a: a.update(left_arm_joint_state=[0.0, np.nan, 0, 0, 0, 0]), ValueError, "must be finite"),
        (lambda a: a.update(bogus=[1.0]), ValueError, "Unexpected state keys: ['bogus']"),
        (lambda a: a.update(right_ee_joint_state=0.5), TypeError, "action_dict['right_ee_joint_state'] must be array-like"),
        (lambda a: a.update(left_arm_joint_state=np.zeros((2, 3))), ValueError, "must be 1D, got shape (2, 3)"),
        (lambda a: [a.pop(k) for k in ("left_arm_joint_state", "right_arm_joint_state")], ValueError,
         "Cannot infer action type from action dict keys"),
    ],
)
def test_malformed_actions_raise_robodojo_errors_and_execute_nothing(env: TwinEnv, mutate, exc, message) -> None:
    truth = env.truth(0)
    before_q = truth.data.qpos.copy()
    before_t = truth.data.time
    before_steps = truth.outcome().steps
    action = hold_action(env.get_obs(), g_left=0.0)
    mutate(action)
    with pytest.raises(exc) as info:
        env.take_action(action)
    assert message in (info.value.args[0] if exc is KeyError else str(info.value))
    assert truth.data.time == before_t
    np.testing.assert_array_equal(truth.data.qpos, before_q)
    assert truth.outcome().steps == before_steps


def test_one_action_is_ten_ticks_and_tracks_joint_targets() -> None:
    with TwinEnv() as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        truth = env.truth(0)
        t0 = truth.data.time
        obs = env.get_obs()
        target = np.array([0.1, 0.4, 0.4, 0.0, 0.0, 0.0])
        act = hold_action(obs)
        act["left_arm_joint_state"] = target
        env.take_action(act)
        assert truth.data.time - t0 == pytest.approx(0.040, abs=1e-9)
        q1 = np.asarray(env.get_obs()["state"]["left_arm_joint_state"], dtype=float)
        # The 5 rad/s velocity limit caps one action at 0.2 rad per joint.
        assert np.abs(q1 - obs["state"]["left_arm_joint_state"]).max() <= 0.2 + 1e-3
        for _ in range(15):
            env.take_action(act)
        q = env.get_obs()["state"]["left_arm_joint_state"]
        np.testing.assert_allclose(q, target, atol=2e-3)
        assert truth.outcome().steps == 16


def test_gripper_semantics_closing_on_nothing_and_opening() -> None:
    with TwinEnv() as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        obs = env.get_obs()
        env.take_action(hold_action(obs, g_left=0.0))
        g1 = env.get_obs()["state"]["left_ee_joint_state"][0]
        # One action = 10 ticks, each moving the command at most 20 % of the range from the measured finger: the
        # fingers are still travelling, so the command reads between closed and open.
        assert 0.0 < g1 < 1.0
        for _ in range(10):
            env.take_action(hold_action(obs, g_left=0.0))
        closed = env.get_obs()
        assert closed["state"]["left_ee_joint_state"] == [0.0]
        assert closed["state"]["right_ee_joint_state"] == [1.0]
        for _ in range(12):
            env.take_action(hold_action(obs, g_left=1.0))
        assert env.get_obs()["state"]["left_ee_joint_state"] == [1.0]


@pytest.mark.slow
def test_actions_after_the_step_limit_are_dropped(tmp_path) -> None:
    with TwinEnv() as env:
        env.reset("align_blocks", seed=0, layout_id=0)  # step limit 200
        assert env.step_lim == 200
        obs = env.get_obs()
        act = hold_action(obs)
        act["left_arm_joint_state"] = np.array([0.0, 0.3, 0.3, 0.0, 0.0, 0.0])  # away from home: no success
        for _ in range(200):
            assert not env.is_episode_end()
            env.take_action(act)
        assert env.is_episode_end()
        assert env.get_running_env_idx_list() == []
        truth = env.truth(0)
        t = truth.data.time
        env.take_action(act)
        assert truth.data.time == t
        out = truth.outcome()
        assert (out.finished, out.success, out.steps, out.failure, out.score) == (True, False, 200, "step limit", 0.0)
    # The outcome books into RoboDojo's _result.json as one `details` entry.
    from pyrua_dojo.harness.result_files import ResultWriter, RunLocation, read_result_file

    loc = RunLocation(tmp_path, "align_blocks", "twin_test", "arx_x5", 0, "ckpt_name=x,action_type=joint", "run")
    booked = out.record_into(ResultWriter(loc))
    run = read_result_file(loc.result_path)
    assert booked.index == 0 and run.episodes[0].layout_id == 0 and run.episodes[0].success is False


def test_ee_actions_use_ik_and_keep_the_command_on_failure() -> None:
    with TwinEnv() as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        truth = env.truth(0)
        obs = env.get_obs()
        right = np.asarray(obs["state"]["right_ee_pose"], dtype=float)
        # A reachable target: MuJoCo FK of a known configuration on a scratch MjData.
        scratch = mujoco.MjData(truth.model)
        idx = truth.scene.arms["left"]
        scratch.qpos[idx.qpos] = [0.2, 0.9, 0.8, 0.1, 0.2, 0.3]
        mujoco.mj_kinematics(truth.model, scratch)
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, scratch.site_xmat[idx.ee_site])
        target = np.concatenate([scratch.site_xpos[idx.ee_site], quat])
        unreachable = right.copy()
        unreachable[:3] = [2.0, 2.0, 2.0]
        act = {"left_ee_pose": target, "left_ee_joint_state": [1.0], "right_ee_pose": unreachable,
               "right_ee_joint_state": [0.0]}
        for _ in range(25):
            env.take_action(act)
        assert truth.last_ik["left"].success and not truth.last_ik["right"].success
        obs = env.get_obs()
        np.testing.assert_allclose(obs["state"]["left_ee_pose"][:3], target[:3], atol=2e-3)
        # The right arm held its previous command (home) but its gripper was applied.
        np.testing.assert_allclose(obs["state"]["right_arm_joint_state"], np.zeros(6), atol=1e-3)
        assert obs["state"]["right_ee_joint_state"] == [0.0]


def test_batch_envs_are_independent() -> None:
    with TwinEnv(TwinConfig(num_envs=2)) as env:
        env.reset("stack_blocks", seed=0, layout_id=[2, 3])
        obs = env.get_obs_batch([0, 1])
        assert [o["env_idx"] for o in obs] == [0, 1]
        assert env.get_running_env_idx_list() == [0, 1]
        a0 = hold_action(obs[0])
        a0["left_arm_joint_state"] = np.array([0.3, 0.3, 0.3, 0.0, 0.0, 0.0])
        env.take_action_batch([a0], [0])
        q0 = env.get_obs_batch([0])[0]["state"]["left_arm_joint_state"]
        q1 = env.get_obs_batch([1])[0]["state"]["left_arm_joint_state"]
        assert np.abs(q0).max() > 0.1 and np.abs(q1).max() < 1e-3
        assert env.truth(0).outcome().steps == 1 and env.truth(1).outcome().steps == 0
        poses0, poses1 = env.truth(0).object_poses(), env.truth(1).object_poses()
        assert not np.allclose(poses0["block_0"][:3], poses1["block_0"][:3])
        with pytest.raises(ValueError, match="got 1 actions for 2 envs"):
            env.take_action_batch([a0])


def test_reset_rejects_bad_arguments() -> None:
    env = TwinEnv()
    with pytest.raises(RuntimeError, match="call reset"):
        env.get_obs()
    with pytest.raises(ValueError, match="unknown twin task"):
        env.reset("no_such_task", 0, 0)
    with pytest.raises(ValueError, match="layout_id must be in 0..24"):
        env.reset("stack_blocks", 0, 25)
    with pytest.raises(ValueError, match="seed"):
        env.reset("stack_blocks", -1, 0)
    assert issubclass(UnstableLayoutError, RuntimeError)


def test_env_renders_from_another_thread() -> None:
    """The GL context is released after every render, so a deploy loop may run in a different thread."""
    import threading

    with TwinEnv() as env:
        env.reset("stack_blocks", seed=0, layout_id=2)
        here = env.get_obs()["vision"]["cam_head"]["color"]
        there: dict[str, np.ndarray] = {}
        worker = threading.Thread(target=lambda: there.update(img=env.get_obs()["vision"]["cam_head"]["color"]))
        worker.start()
        worker.join()
        np.testing.assert_array_equal(here, there["img"])
        np.testing.assert_array_equal(here, env.get_obs()["vision"]["cam_head"]["color"])
