"""The calibration routine on the twin: safe poses, recording, budget, cancellation, the fit and the file it writes.

The acceptance check runs `planner: calibrate` through the XPolicyLab Model on a twin whose true wrist mounts,
wrist intrinsics and ee link differ from the packaged defaults (given to the twin only), and requires the written
calibration file to recover the mounts within 1 mm and 0.2 deg and to make the wrist cameras project like the
station's own extrinsics and like rendered markers.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from calibration import Camera, Intrinsics, load_station
from calibration.transforms import quat_from_axis_angle, quat_multiply, rotation_angle
from primitives.errors import CancelToken
from primitives.kinematics import X5Kinematics
from primitives.robot import Robo
from pyrua_dojo.runtime.stepping import EnvBridge
from pyrua_dojo.runtime.calibration_routine import (
    DEFAULT_PLAN,
    CalibrationPose,
    CalibrationRoutine,
    RoutineConfig,
    mirror_joints,
)
from pyrua_dojo.runtime.calibration_files import fit_run, load_samples, write_calibration_file
from pyrua_dojo.evaluate.twin_calibration import mount_error, perturbed_station, run_on_twin
from pyrua_dojo.cli import main as cli_main
from pyrua_dojo.runtime.trace import RunTrace, read_jsonl
from pyrua_dojo.twin import TwinConfig, TwinEnv

DEFAULTS = load_station()


def _turned(quat, axis, deg):
    q = quat_multiply(np.array(quat), quat_from_axis_angle(axis, math.radians(deg)))
    return [float(v) for v in q / np.linalg.norm(q)]


#: The twin's truth: wrist mounts 1.6-1.8 cm and 3.5-4.5 deg away from the defaults, other wrist focal lengths,
#: and an ee link 6 mm further out and 4 mm up. Only the twin gets it; the agent starts from the defaults.
TRUTH_OVERLAY = {
    "x5": {"ee_offset": [0.151, 0.0, 0.004]},
    "cameras": {
        "cam_left_wrist": {
            "position": [0.052, 0.009, 0.058],
            "quat": _turned(DEFAULTS.cameras["cam_left_wrist"].quat, [0.3, 1.0, -0.2], 4.5),
            "fx": 385.0,
        },
        "cam_right_wrist": {
            "position": [0.031, -0.012, 0.075],
            "quat": _turned(DEFAULTS.cameras["cam_right_wrist"].quat, [-1.0, 0.2, 0.5], 3.5),
            "fx": 410.0,
        },
    },
}
TRUTH = load_station(TRUTH_OVERLAY)
WRIST = ("cam_left_wrist", "cam_right_wrist")


@pytest.fixture(scope="module")
def twin_run(tmp_path_factory):
    """One full calibration through the Model on the twin (camera matrices on), wrong defaults for the agent."""
    root = tmp_path_factory.mktemp("calib")
    tc = run_on_twin(root / "runs", truth=TRUTH)
    return tc


# --------------------------------------------------------------------------------------------- the plan


def _arm_points(kin, arm, q):
    """Joint origins from the elbow on, link6, and the corners of a box around gripper and wrist camera."""
    _, pts, r, p = kin.arm(arm)._chain(np.asarray(q, dtype=float))  # private: the chain's joint origins
    box = np.array([[x, y, z] for x in (0.0, 0.165) for y in (-0.055, 0.055) for z in (-0.03, 0.06)])
    return np.vstack([pts[2:], p[None], p + box @ r.T]), pts


def _segment_distance(points, a, b):
    ab = b - a
    t = np.clip(((points - a) @ ab) / (ab @ ab), 0.0, 1.0)
    return np.linalg.norm(points - (a + t[:, None] * ab), axis=1)


def test_default_plan_is_safe_along_every_path():
    kin = X5Kinematics(DEFAULTS)
    top = DEFAULTS.table.top_z
    home = np.zeros(6)
    seq = [home] + [p.joints("left") for p in DEFAULT_PLAN] + [home]
    for pose in DEFAULT_PLAN:
        for arm in ("left", "right"):
            assert kin.arm(arm).within_limits(pose.joints(arm)), pose.label
        tool, _ = _arm_points(kin, "left", pose.joints("left"))
        assert tool[:, 2].min() >= top + 0.15, pose.label  # clear of objects on the table
    for a, b in zip(seq[:-1], seq[1:], strict=True):
        for s in np.linspace(0.0, 1.0, 41):
            ql = a + s * (b - a)
            left, chain = _arm_points(kin, "left", ql)
            right, _ = _arm_points(kin, "right", np.array(mirror_joints(ql)))
            assert left[:, 2].min() >= top + 0.095
            assert left[:, 0].max() <= -0.06 and right[:, 0].min() >= 0.06  # each arm on its own side
            base = np.array(DEFAULTS.arms["left"].base_position)
            gripper = left[-8:]
            assert min(_segment_distance(gripper, base, chain[1]).min(),
                       _segment_distance(gripper, chain[1], chain[2]).min()) >= 0.08


def test_plan_spans_the_workspace_in_position_and_orientation():
    kin = X5Kinematics(DEFAULTS).arm("left")
    t = [kin.link6(p.joints("left")) for p in DEFAULT_PLAN]
    pos = np.array([x[:3, 3] for x in t])
    assert np.all(np.ptp(pos, axis=0) > [0.3, 0.35, 0.25])
    angles = [math.degrees(rotation_angle(a[:3, :3], b[:3, :3])) for i, a in enumerate(t) for b in t[i + 1:]]
    assert min(angles) > 5 and max(angles) > 120 and np.median(angles) > 60


def test_mirrored_right_pose_mirrors_the_left_arm():
    kin = X5Kinematics(DEFAULTS)
    for pose in DEFAULT_PLAN:
        left = kin.arm("left").link6(pose.joints("left"))[:3, 3]
        right = kin.arm("right").link6(pose.joints("right"))[:3, 3]
        assert np.allclose(right, left * [-1, 1, 1], atol=0.003), pose.label  # joint5's 1 mm y offset
    with pytest.raises(ValueError):
        mirror_joints([0.0] * 5)


def test_routine_config_and_plan_are_validated():
    with pytest.raises(ValueError):
        RoutineConfig(plan=())
    with pytest.raises(ValueError):
        RoutineConfig(settle_steps=0)
    with pytest.raises(ValueError):
        RoutineConfig(plan=(DEFAULT_PLAN[0], DEFAULT_PLAN[0]))
    bad = CalibrationPose("bad", (0.0, -1.0, 0.0, 0.0, 0.0, 0.0), (0.0,) * 6)  # joint2 below its lower limit
    with pytest.raises(ValueError, match="outside the joint limits"):
        CalibrationRoutine(object(), object(), object(), CancelToken(), config=RoutineConfig(plan=(bad,)))


# ---------------------------------------------------------------------------------- the routine, directly


class ContactWatch:
    """A RoboDojo-style env that records every contact involving a robot geom after each action."""

    def __init__(self, env: TwinEnv) -> None:
        self.env = env
        self.robot_contacts: set[tuple[str, str]] = set()
        self.actions = 0

    def get_obs(self):
        return self.env.get_obs()

    def is_episode_end(self):
        return self.env.is_episode_end()

    def take_action(self, action):
        self.env.take_action(action)
        self.actions += 1
        truth = self.env.truth(0)
        m, d = truth.model, truth.data
        robot = set().union(*(a.bodies for a in truth.scene.arms.values()))
        for c in d.contact[: d.ncon]:
            if m.geom_bodyid[c.geom1] in robot or m.geom_bodyid[c.geom2] in robot:
                self.robot_contacts.add((mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, c.geom1),
                                         mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, c.geom2)))


def direct_run(path: Path, *, task="stack_blocks", matrices=True, step_limit=550, config=RoutineConfig(),
               wrap=None, truth=TRUTH):
    """The routine with a Robo and an EnvBridge on a twin (no Model): (result, watch, routine)."""
    env = TwinEnv(TwinConfig(station=truth, intrinsic_matrix=matrices, extrinsic_matrix=matrices))
    env.reset(task, 0, 0)
    watch = ContactWatch(env)
    cancel = CancelToken()
    bridge = EnvBridge(watch, cancel)
    first = bridge.first_observation()
    robo = Robo(bridge, first, station=DEFAULTS, step_limit=step_limit, cancel=cancel)
    trace = RunTrace(path, meta={"task": task, "planner": "calibrate"})
    routine = CalibrationRoutine(robo, wrap(bridge) if wrap else bridge, trace, cancel, station=DEFAULTS,
                                 config=config)
    if wrap is not None and hasattr(wrap, "routine"):
        wrap.routine = routine
    try:
        result = routine.run()
    finally:
        env.close()
    return result, watch, routine


@pytest.mark.slow
def test_full_plan_on_the_twin_touches_nothing_and_ends_home(tmp_path):
    result, watch, routine = direct_run(tmp_path / "run")
    assert result.status == "complete" and result.returned_home and result.camera_matrices
    assert result.poses_recorded == len(DEFAULT_PLAN) + 2 and result.skipped == ()
    assert watch.robot_contacts == set()
    assert result.steps_used == watch.actions == routine.steps_used <= 350
    records = read_jsonl(tmp_path / "run" / "calibration.jsonl")
    kinds = [r["kind"] for r in records]
    assert kinds == ["header"] + ["pose"] * result.poses_recorded + ["end"]
    poses = [r for r in records if r["kind"] == "pose"]
    assert [p["label"] for p in poses] == ["start"] + [p.label for p in DEFAULT_PLAN] + ["home"]
    assert np.allclose(poses[-1]["joints"]["left"], 0.0, atol=1e-3)
    assert np.allclose(poses[-1]["joints"]["right"], 0.0, atol=1e-3)
    for p in poses[1:-1]:  # held still at the commanded pose
        assert max(p["lag_rad"].values()) < 2e-3
        assert np.allclose(p["commanded"]["left"], DEFAULT_PLAN[p["index"] - 1].left)
        assert set(p["cameras"]) == {"cam_head", "cam_left_wrist", "cam_right_wrist"}
        assert np.asarray(p["cameras"]["cam_left_wrist"]["extrinsic_matrix"]).shape == (4, 4)
    result_json = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result_json["status"] == "complete"
    assert result_json["calibration"]["poses_recorded"] == result.poses_recorded
    assert (tmp_path / "run" / "fit.json").exists() and result.calibration_file == tmp_path / "run" / "calibration.yml"


@pytest.mark.slow
def test_short_budget_skips_poses_and_still_returns_home(tmp_path):
    result, watch, _ = direct_run(tmp_path / "run", step_limit=120)
    assert result.status == "partial" and result.skipped and result.returned_home
    assert result.steps_used <= 120 and watch.actions == result.steps_used
    assert result.poses_recorded == 2 + len(DEFAULT_PLAN) - len(result.skipped)
    last = [r for r in read_jsonl(tmp_path / "run" / "calibration.jsonl") if r["kind"] == "pose"][-1]
    assert last["label"] == "home" and np.allclose(last["joints"]["right"], 0.0, atol=1e-3)


@pytest.mark.slow
def test_episode_ending_under_the_routine_keeps_what_was_recorded(tmp_path):
    # general_pickup ends at 200 steps; the routine was told it had 1000.
    result, watch, _ = direct_run(tmp_path / "run", task="general_pickup", step_limit=1000)
    assert result.status == "ended" and not result.returned_home
    assert watch.actions == 200 and 2 < result.poses_recorded < len(DEFAULT_PLAN)
    assert result.fit is not None and result.fit["poses"] == result.poses_recorded
    end = read_jsonl(tmp_path / "run" / "calibration.jsonl")[-1]
    assert end["kind"] == "end" and end["status"] == "ended"


class CancelAfter:
    """Wraps a bridge; after `n` exchanges another thread calls routine.cancel while the routine waits."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.routine = None
        self.exchanges = 0

    def __call__(self, bridge):
        self.bridge = bridge
        return self

    def exchange(self, chunk):
        obs = self.bridge.exchange(chunk)
        self.exchanges += 1
        if self.exchanges == self.n:
            t = threading.Thread(target=self.routine.cancel, args=("operator stop",))
            t.start()
            t.join()
        return obs


def test_cancel_stops_at_the_next_chunk_and_keeps_the_records(tmp_path):
    wrap = CancelAfter(4)
    result, _, routine = direct_run(tmp_path / "run", wrap=wrap)
    assert result.status == "cancelled" and "operator stop" in result.reason
    assert wrap.exchanges == 4  # nothing was sent after the cancel
    records = read_jsonl(tmp_path / "run" / "calibration.jsonl")
    assert [r["kind"] for r in records][-1] == "end"
    assert result.poses_recorded == sum(r["kind"] == "pose" for r in records) == 2  # start + p01
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "cancelled"
    with pytest.raises(RuntimeError):
        routine.run()


class BreakObservation:
    """Wraps a bridge and sends a malformed observation on exchange `n`."""

    def __init__(self, n):
        self.n = n
        self.count = 0

    def __call__(self, bridge):
        self.bridge = bridge
        return self

    def exchange(self, chunk):
        obs = dict(self.bridge.exchange(chunk))
        self.count += 1
        if self.count == self.n:
            obs.pop("state")
        return obs


def test_a_malformed_observation_ends_the_run_as_error_with_the_records_kept(tmp_path):
    result, _, _ = direct_run(tmp_path / "run", wrap=BreakObservation(3))
    assert result.status == "error" and "state" in result.reason
    assert result.poses_recorded == 1
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert any(e["kind"] == "error" and "traceback" in e for e in events)


def test_run_without_camera_matrices_fits_the_ee_link_only(tmp_path):
    config = RoutineConfig(plan=DEFAULT_PLAN[:3])
    result, _, _ = direct_run(tmp_path / "run", matrices=False, config=config)
    assert result.status == "complete" and not result.camera_matrices
    fit = fit_run(tmp_path / "run", DEFAULTS)
    assert fit.mounts == {} and fit.intrinsics == {}
    assert any("ee link only" in n for n in fit.notes)
    assert np.allclose(fit.ee.position, TRUTH.x5.ee_offset, atol=1e-6)
    text = result.calibration_file.read_text()
    doc = yaml.safe_load(text)
    assert set(doc) == {"schema", "x5"} and "ee link only" in text
    station = load_station(result.calibration_file)
    assert station.x5.ee_offset == pytest.approx(TRUTH.x5.ee_offset, abs=1e-7)
    assert station.cameras["cam_left_wrist"] == DEFAULTS.cameras["cam_left_wrist"]


# ------------------------------------------------------------------------------- acceptance: the Model path


def test_twin_calibration_recovers_the_true_mounts(twin_run, tmp_path):
    run = twin_run.run
    assert run.status == "complete" and run.returned_home and run.camera_matrices
    for cam in WRIST:  # the defaults really were wrong
        dm, ddeg = mount_error(twin_run.fit, DEFAULTS, cam)
        assert dm > 10 and ddeg > 3
    # The file the routine wrote, loaded as the agent would load it.
    station = load_station(run.calibration_file)
    for cam in WRIST:
        fitted, true = station.cameras[cam], TRUTH.cameras[cam]
        dm = 1000 * np.linalg.norm(np.subtract(fitted.position, true.position))
        ddeg = math.degrees(rotation_angle(fitted.parent_from_camera[:3, :3], true.parent_from_camera[:3, :3]))
        assert dm < 1.0 and ddeg < 0.2, (cam, dm, ddeg)
        assert fitted.intrinsics == true.intrinsics
        m = twin_run.fit.mounts[cam]
        assert m.used == m.poses == run.poses_recorded and m.max_mm < 0.01 and m.max_deg < 0.01
    assert station.x5.ee_offset == pytest.approx(TRUTH.x5.ee_offset, abs=1e-6)
    assert twin_run.fit.chain_matches and twin_run.fit.notes == ()
    # The twin's env origin is the world origin; fitted with the wrist mounts, to float precision.
    assert twin_run.fit.env_origin_from == "wrist cameras" and np.allclose(twin_run.fit.env_origin, 0.0, atol=1e-6)
    # The run directory holds the record, the fit and the file; result.json says how it went.
    result = json.loads((run.run_dir / "result.json").read_text())
    assert result["status"] == "complete" and result["meta"]["planner"] == "calibrate"
    assert result["calibration"]["fit"]["mounts"]["cam_left_wrist"]["used"] == run.poses_recorded
    text = run.calibration_file.read_text()
    assert text.startswith("# pyrua-dojo calibration file") and str(run.run_dir) in text and "rms" in text


def test_calibrated_wrist_cameras_project_like_the_station_extrinsics(twin_run):
    station = load_station(twin_run.run.calibration_file)
    kin = {"calibrated": X5Kinematics(station), "defaults": X5Kinematics(DEFAULTS)}
    _, samples = load_samples(twin_run.run.run_dir, DEFAULTS)
    records = [r for r in read_jsonl(twin_run.run.run_dir / "calibration.jsonl") if r["kind"] == "pose"]
    worst = {"calibrated": 0.0, "defaults": 0.0}
    assert len(records) == len(samples)
    for rec, sample in zip(records, samples, strict=True):
        for cam in WRIST:
            arm = cam.split("_")[1]
            k = np.asarray(rec["cameras"][cam]["intrinsic_matrix"])
            intr = Intrinsics(640, 480, k[0, 0], k[1, 1], k[0, 2], k[1, 2])
            seen = Camera.from_usd_extrinsic(cam, intr, sample.extrinsics[cam])
            # Points spread over the image at 0.2 .. 1.0 m in front of the camera the station reports.
            uv = np.array([[u, v] for u in (40, 320, 600) for v in (40, 240, 440)], dtype=float)
            pts = np.concatenate([seen.deproject(uv, np.full(len(uv), d)) for d in (0.2, 0.5, 1.0)])
            ref, _ = seen.project(pts)
            for name, kk in kin.items():
                ours = kk.arm(arm).wrist_camera(cam, rec["joints"][arm])
                px, _ = ours.project(pts)
                worst[name] = max(worst[name], float(np.max(np.linalg.norm(px - ref, axis=1))))
    assert worst["calibrated"] < 0.05
    assert worst["defaults"] > 20


def _marker_pixels(env, index, point, far=(0.0, 0.0, -1.0)):
    """Centroid (u, v) of the marker in each wrist image, from the difference of renders with and without it."""
    truth = env.truth(0)
    truth.set_marker(index, point)
    with_marker = env.get_obs()
    truth.set_marker(index, far)
    without = env.get_obs()
    out = {}
    for cam in WRIST:
        diff = np.abs(with_marker["vision"][cam]["color"].astype(int) - without["vision"][cam]["color"].astype(int))
        rows, cols = np.nonzero(diff.max(axis=2) > 25)
        out[cam] = None if len(rows) < 20 else np.array([cols.mean() + 0.5, rows.mean() + 0.5])
    return out, with_marker


def test_calibrated_wrist_cameras_project_rendered_markers(twin_run):
    station = load_station(twin_run.run.calibration_file)
    env = TwinEnv(TwinConfig(station=TRUTH, markers=1))
    try:
        env.reset("stack_blocks", 0, 0)
        obs = env.get_obs()
        cal, dflt = X5Kinematics(station), X5Kinematics(DEFAULTS)
        true_kin = X5Kinematics(TRUTH)
        errors = {"calibrated": [], "defaults": []}
        for cam in WRIST:
            arm = cam.split("_")[1]
            q = np.asarray(obs["state"][f"{arm}_arm_joint_state"], dtype=float)
            true_cam = true_kin.arm(arm).wrist_camera(cam, q)
            for uv in ((420.0, 150.0), (210.0, 120.0)):  # upper image: clear of the fingers
                point = true_cam.deproject(np.array(uv), 0.3)
                seen, _ = _marker_pixels(env, 0, point)
                assert seen[cam] is not None, f"marker not visible in {cam}"
                for name, kk in (("calibrated", cal), ("defaults", dflt)):
                    px, _ = kk.arm(arm).wrist_camera(cam, q).project(point)
                    errors[name].append(float(np.linalg.norm(px - seen[cam])))
        assert max(errors["calibrated"]) < 1.0, errors
        assert min(errors["defaults"]) > 10.0, errors
    finally:
        env.close()


# ------------------------------------------------------------------------------ reading runs, files, the CLI


def test_load_samples_refuses_what_is_not_a_calibration_run(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_samples(tmp_path / "missing")
    (tmp_path / "calibration.jsonl").write_text(json.dumps({"kind": "header", "schema": "other"}) + "\n")
    with pytest.raises(ValueError, match="schema"):
        load_samples(tmp_path)
    header = {"kind": "header", "schema": "pyrua-dojo-calibration-v1"}
    (tmp_path / "calibration.jsonl").write_text(json.dumps(header) + "\n")
    with pytest.raises(ValueError, match="no poses"):
        load_samples(tmp_path)
    bad = {"kind": "pose", "label": "p01", "joints": {"left": [0.0] * 6}, "ee_pose": {}}
    (tmp_path / "calibration.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match="p01"):
        load_samples(tmp_path)


def test_written_file_snaps_tiny_ee_components_and_keeps_closed_form_ik(twin_run, tmp_path):
    out = write_calibration_file(twin_run.fit, tmp_path / "deep" / "cal.yml", source="test", when="2026-01-01")
    station = load_station(out)
    assert station.x5.ee_offset[1] == 0.0  # fitted ~1e-9: written as an exact zero
    assert station.x5.ee_offset[2] == pytest.approx(0.004, abs=1e-6)  # a real component stays
    assert "# fitted: 2026-01-01" in out.read_text()
    assert not list((tmp_path / "deep").glob(".*tmp"))


def test_perturbed_station_moves_only_the_wrist_mounts():
    st, overlay = perturbed_station(seed=5, shift_m=0.02, turn_deg=3.0)
    assert set(overlay["cameras"]) == set(WRIST)
    for cam in WRIST:
        a, b = st.cameras[cam], DEFAULTS.cameras[cam]
        assert 1000 * np.linalg.norm(np.subtract(a.position, b.position)) == pytest.approx(20.0, abs=1e-3)
        assert math.degrees(rotation_angle(a.parent_from_camera[:3, :3], b.parent_from_camera[:3, :3])) == \
            pytest.approx(3.0, abs=1e-6)
    assert st.cameras["cam_head"] == DEFAULTS.cameras["cam_head"] and st.x5 == DEFAULTS.x5


def test_cli_fit_writes_a_loadable_file(twin_run, tmp_path, capsys):
    out = tmp_path / "cal.yml"
    report = tmp_path / "fit.json"
    code = cli_main(["calibrate", "fit", str(twin_run.run.run_dir), "--out", str(out), "--json", str(report)])
    text = capsys.readouterr().out
    assert code == 0 and "cam_left_wrist on left_link6" in text and "p07" in text
    assert load_station(out).cameras["cam_left_wrist"].position == \
        load_station(twin_run.run.calibration_file).cameras["cam_left_wrist"].position
    assert json.loads(report.read_text())["poses"] == twin_run.run.poses_recorded


def test_cli_fit_reports_a_bad_run_directory(tmp_path, capsys):
    code = cli_main(["calibrate", "fit", str(tmp_path / "nope"), "--out", str(tmp_path / "cal.yml")])
    assert code == 2 and "error:" in capsys.readouterr().err
    assert not (tmp_path / "cal.yml").exists()


@pytest.mark.slow
def test_cli_twin_perturbed_recovers_and_prints_errors(tmp_path, capsys):
    out = tmp_path / "cal.yml"
    code = cli_main(["calibrate", "twin", "--perturb", "--run-root", str(tmp_path / "runs"), "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "against the twin's truth" in text
    truth, _ = perturbed_station(seed=0)
    station = load_station(out)
    for cam in WRIST:
        assert 1000 * np.linalg.norm(np.subtract(station.cameras[cam].position, truth.cameras[cam].position)) < 1.0
