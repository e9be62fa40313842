"""Where the twin must not flatter the agent: an unknown station (the drawn station differs from the agent's by the
drawn amounts, is reproducible from the seed, is what the twin simulates, and a calibration run on it recovers it),
the ee quaternion as the simulator gives it, and upstream's batch-mode assertion."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from calibration import load_station
from calibration.transforms import quat_to_matrix
from pyrua_dojo.evaluate.twin_calibration import mount_error, run_on_twin
from pyrua_dojo.twin import TwinConfig, TwinEnv
from pyrua_dojo.twin.station_draw import StationSpread, draw_station, station_for_layout

DEFAULTS = load_station()


def angle_deg(q_a, q_b) -> float:
    rel = quat_to_matrix(q_a).T @ quat_to_matrix(q_b)
    return math.degrees(math.acos(float(np.clip((np.trace(rel) - 1) / 2, -1, 1))))


def test_the_drawn_station_differs_by_the_drawn_amounts() -> None:
    spread = StationSpread()
    for layout in range(6):
        st, draw = draw_station(4, layout, spread)
        assert set(draw.cameras) == {"cam_head", "cam_left_wrist", "cam_right_wrist"}
        for cam, (shift, turn) in draw.cameras.items():
            mine, true = DEFAULTS.cameras[cam], st.cameras[cam]
            moved = float(np.linalg.norm(np.subtract(true.position, mine.position)))
            assert moved == pytest.approx(shift, abs=1e-12)
            assert angle_deg(mine.quat, true.quat) == pytest.approx(turn, abs=1e-6)
            m_shift, m_turn = ((spread.head_shift_m, spread.head_turn_deg) if cam == "cam_head"
                               else (spread.wrist_shift_m, spread.wrist_turn_deg))
            assert 0.5 * m_shift <= shift <= 1.5 * m_shift and 0.5 * m_turn <= turn <= 1.5 * m_turn
            assert true.intrinsics == mine.intrinsics and true.parent == mine.parent
        assert st.x5.ee_offset[0] - DEFAULTS.x5.ee_offset[0] == pytest.approx(draw.ee_shift_m, abs=1e-12)
        assert 0.5 * spread.ee_shift_m <= abs(draw.ee_shift_m) <= 1.5 * spread.ee_shift_m
        # The fingers do not move: the grasp centre stays where it was on link6.
        assert st.x5.ee_offset[0] + st.x5.tcp_offset == pytest.approx(
            DEFAULTS.x5.ee_offset[0] + DEFAULTS.x5.tcp_offset, abs=1e-12)
        assert st.table == DEFAULTS.table and st.arms == DEFAULTS.arms and st.x5.joints == DEFAULTS.x5.joints


def test_the_draw_is_reproducible_from_seed_and_layout_and_scales() -> None:
    a, da = draw_station(4, 7)
    b, db = draw_station(4, 7)
    assert da == db and a.cameras == b.cameras and a.x5 == b.x5
    assert draw_station(4, 8)[1].cameras != da.cameras and draw_station(5, 7)[1].cameras != da.cameras
    _, half = draw_station(4, 7, StationSpread().scaled(0.5))
    for cam, (shift, turn) in half.cameras.items():
        assert shift == pytest.approx(0.5 * da.cameras[cam][0]) and turn == pytest.approx(0.5 * da.cameras[cam][1])
    assert station_for_layout("exact", 4, 7).cameras == DEFAULTS.cameras
    assert station_for_layout("unknown", 4, 7).cameras == a.cameras
    with pytest.raises(ValueError):
        station_for_layout("guess", 4, 7)
    with pytest.raises(ValueError):
        StationSpread(wrist_shift_m=-0.01)


def test_the_twin_simulates_the_drawn_station_of_each_layout() -> None:
    env = TwinEnv(TwinConfig(station_spread=StationSpread()))
    try:
        for layout in (0, 1):
            env.reset("stack_blocks", 4, layout)
            truth = env.truth(0)
            drawn, _ = draw_station(4, layout)
            assert truth.station.cameras == drawn.cameras and truth.station.x5 == drawn.x5
            m, d = truth.model, truth.data
            head = truth.scene.cameras["cam_head"]
            np.testing.assert_allclose(d.cam_xpos[head], drawn.cameras["cam_head"].position, atol=1e-9)
            arm = truth.scene.arms["left"]
            link6 = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "left_link6")
            r6 = d.site_xmat[link6].reshape(3, 3)
            ee_local = r6.T @ (d.site_xpos[arm.ee_site] - d.site_xpos[link6])
            np.testing.assert_allclose(ee_local, drawn.x5.ee_offset, atol=1e-9)
            # The agent's station is untouched: the env's own station stays the packaged one.
            assert env.station.cameras == DEFAULTS.cameras
    finally:
        env.close()
    exact = TwinEnv()
    try:
        exact.reset("stack_blocks", 4, 0)
        assert exact.truth(0).station.cameras == DEFAULTS.cameras
    finally:
        exact.close()


@pytest.mark.slow
def test_the_ee_quaternion_is_reported_as_the_simulator_gives_it() -> None:
    env = TwinEnv()
    try:
        env.reset("stack_blocks", 4, 0)
        obs = env.get_obs()
        q = np.array([-0.16, 0.65, 0.95, 0.59, -0.81, -1.34])  # a pose whose ee quaternion has w < 0 in MuJoCo
        act = {"left_arm_joint_state": q, "left_ee_joint_state": [1.0],
               "right_arm_joint_state": np.asarray(obs["state"]["right_arm_joint_state"], float),
               "right_ee_joint_state": [1.0]}
        for _ in range(30):
            env.take_action(act)
        obs = env.get_obs()
        truth = env.truth(0)
        raw = np.empty(4)
        mujoco.mju_mat2Quat(raw, truth.data.site_xmat[truth.scene.arms["left"].ee_site])
        np.testing.assert_array_equal(obs["state"]["left_ee_pose"][3:], raw.astype(np.float32))
        assert raw[0] < 0  # the pose was chosen so that a qw >= 0 flip would show
    finally:
        env.close()


@pytest.mark.slow
def test_calibration_on_a_drawn_station_recovers_it(tmp_path) -> None:
    truth, draw = draw_station(4, 3)
    tc = run_on_twin(tmp_path, truth=truth)
    assert tc.run.status == "complete"
    for cam in ("cam_left_wrist", "cam_right_wrist", "cam_head"):
        mm, deg = mount_error(tc.fit, truth, cam)
        assert mm < 1.0 and deg < 0.2, (cam, mm, deg)
        # ...and the drawn error it corrects was far larger.
        assert draw.cameras[cam][0] * 1000 > 1.0 or draw.cameras[cam][1] > 0.2
    assert 1000 * abs(tc.fit.ee.position[0] - truth.x5.ee_offset[0]) < 1.0
    assert tc.fit.env_origin_from == "wrist cameras"
    from pyrua_dojo.runtime.calibration_files import write_calibration_file

    agent = load_station(write_calibration_file(tc.fit, tmp_path / "cal.yml", source="test"))
    for cam in truth.cameras:
        assert np.linalg.norm(np.subtract(agent.cameras[cam].position, truth.cameras[cam].position)) < 1e-3
        assert angle_deg(agent.cameras[cam].quat, truth.cameras[cam].quat) < 0.2
    assert agent.x5.ee_offset[0] + agent.x5.tcp_offset == pytest.approx(
        truth.x5.ee_offset[0] + truth.x5.tcp_offset, abs=1e-5)


@pytest.mark.slow
def test_batch_actions_naming_ended_and_running_envs_raise_as_upstream() -> None:
    with TwinEnv(TwinConfig(num_envs=2)) as env:
        env.reset("align_blocks", seed=0, layout_id=[0, 1])  # step limit 200
        obs = env.get_obs_batch([0, 1])
        acts = []
        for o in obs:
            a = {k: np.asarray(v, dtype=float) for k, v in o["action"].items()}
            a["left_arm_joint_state"] = np.array([0.0, 0.3, 0.3, 0.0, 0.0, 0.0])  # away from home: no success
            acts.append(a)
        for _ in range(200):
            env.take_action_batch([acts[0]], [0])
        assert env.get_running_env_idx_list() == [1]
        t1 = env.truth(1).data.time
        with pytest.raises(AssertionError, match="Mismatching Input List Len: 2 != 1"):
            env.take_action_batch(acts, [0, 1])
        assert env.truth(1).data.time == t1  # nothing ran
        env.take_action_batch([acts[0]], [0])  # only ended envs: dropped
        env.take_action_batch([acts[1]], [1])
        assert env.truth(1).outcome().steps == 1
