"""Calibration on the twin and the `pyrua-dojo calibrate` commands.

`run_on_twin` runs `planner: calibrate` through the XPolicyLab Model on a twin whose station may differ from the
agent's (`perturbed_station`, or a drawn one: `StationCalibrations`), then fits the run; `mount_error` compares a
fit with the twin's truth. CLI glue: `pyrua-dojo calibrate fit RUN_DIR --out FILE` and
`pyrua-dojo calibrate twin [--out FILE]`. The routine is `pyrua_dojo.runtime.calibration_routine`, the record
and the file `pyrua_dojo.runtime.calibration_files`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibration import Station, load_station
from calibration.fit import CalibrationFit
from calibration.transforms import quat_from_axis_angle, quat_multiply
from pyrua_dojo.runtime.calibration_routine import CalibrationRun
from pyrua_dojo.runtime.calibration_files import _numbers, fit_run, write_calibration_file
from pyrua_dojo.runtime.trace import write_json_atomic
from pyrua_dojo.twin.station_truth import load_truth_station

__all__ = [
    "StationCalibrations",
    "TwinCalibration",
    "mount_error",
    "perturbed_station",
    "run_fit_cli",
    "run_on_twin",
    "run_twin_cli",
]

# -------------------------------------------------------------------------------------------- on the twin


def perturbed_station(
    station: Station | None = None, *, seed: int = 0, shift_m: float = 0.015, turn_deg: float = 4.0
) -> tuple[Station, dict[str, Any]]:
    """A station whose wrist mounts are moved by `shift_m` and turned by `turn_deg` (random directions, `seed`)
    from `station`'s (default: the twin's station truth): a deliberately different truth for the twin. Returns the
    station and the calibration overlay that made it."""
    base = station if station is not None else load_truth_station()
    rng = np.random.default_rng(seed)
    cams: dict[str, Any] = {}
    for cam, mount in base.cameras.items():
        if mount.arm is None:
            continue
        d = rng.normal(size=3)
        axis = rng.normal(size=3)
        pos = np.array(mount.position) + shift_m * d / np.linalg.norm(d)
        quat = quat_multiply(np.array(mount.quat), quat_from_axis_angle(axis, math.radians(turn_deg)))
        quat = quat / np.linalg.norm(quat)
        cams[cam] = {"position": _numbers(pos, 9), "quat": _numbers(quat, 12)}
    overlay = {"cameras": cams}
    return (load_station(overlay) if station is not None else load_truth_station(overlay)), overlay


@dataclass(frozen=True)
class TwinCalibration:
    """A calibration run on the twin: the routine's outcome, the fit, and the twin's true station."""

    run: CalibrationRun
    fit: CalibrationFit
    truth: Station


def run_on_twin(
    run_root: Path | str,
    *,
    truth: Station | None = None,
    agent_calibration: Path | str | None = None,
    task: str = "stack_blocks",
    seed: int = 0,
    layout: int = 0,
    max_steps: int | None = None,
) -> TwinCalibration:
    """Run `planner: calibrate` through the XPolicyLab Model on a twin with camera matrices on, RoboDojo's way
    (get_obs -> update_obs -> get_action -> take_action), until the routine has finished; then fit the run.

    truth: the station the twin simulates (default: the twin's station truth); agent_calibration: the calibration file
    the policy starts from (default: none, the packaged defaults); max_steps: stop after this many actions.
    """
    from pyrua_dojo.plugin.model import Model
    from pyrua_dojo.twin import TwinConfig, TwinEnv

    true_station = truth if truth is not None else load_truth_station()
    cfg: dict[str, Any] = {"task_name": task, "seed": seed, "action_type": "joint", "planner": "calibrate",
                           "run_root": str(run_root)}
    if agent_calibration is not None:
        cfg["calibration_file"] = str(agent_calibration)
    model = Model(cfg)
    env = TwinEnv(TwinConfig(station=true_station, intrinsic_matrix=True, extrinsic_matrix=True))
    try:
        env.reset(task, seed, layout)
        model.reset()
        limit = max_steps if max_steps is not None else env.step_lim
        steps = 0
        episode = None
        while not env.is_episode_end() and steps < limit:
            obs = env.get_obs()
            model.update_obs(obs)
            chunk = model.get_action()
            episode = model.episode(int(obs.get("env_idx", 0)))
            if episode is None or episode.result is not None:
                break
            for action in chunk:
                env.take_action(action)
                steps += 1
                if env.is_episode_end() or steps >= limit:
                    break
        if episode is None:
            raise RuntimeError("the policy did not start an episode (see the model's error log in the run root)")
        model.reset()
        result = episode.result
        if not isinstance(result, CalibrationRun):
            raise RuntimeError(f"the calibration routine did not return a result (status in {episode.run_dir})")
    finally:
        model.close()
        env.close()
    fit = fit_run(result.run_dir, model.station)
    return TwinCalibration(result, fit, true_station)


class StationCalibrations:
    """One calibration file per drawn station (`pyrua_dojo.twin.station_draw`, keyed by seed and layout id), made
    on first use by the routine on the twin and shared by every task and benchmark that meets that station."""

    def __init__(self, root: Path | str, spread: Any) -> None:
        self.root = Path(root)
        self.spread = spread
        self._files: dict[tuple[int, int], Path] = {}

    def file_for(self, seed: int, layout_id: int) -> Path:
        """The calibration file of station (seed, layout_id); RuntimeError if its routine does not complete."""
        from pyrua_dojo.twin.station_draw import draw_station

        key = (int(seed), int(layout_id))
        if key not in self._files:
            truth, _ = draw_station(seed, layout_id, self.spread)
            where = self.root / f"seed{seed}_layout{layout_id:04d}"
            tc = run_on_twin(where, truth=truth)  # hosted by stack_blocks seed 0 layout 0; the station is what counts
            if tc.run.status != "complete":
                raise RuntimeError(f"calibration of station {key} ended {tc.run.status}: {tc.run.reason}")
            self._files[key] = write_calibration_file(tc.fit, where / "calibration.yml", source=str(tc.run.run_dir))
        return self._files[key]


# ------------------------------------------------------------------------------------------------- the CLI


def mount_error(fit: CalibrationFit, truth: Station, camera: str) -> tuple[float, float]:
    """Distance (mm) and angle (deg) between a fitted mount (a wrist mount, or the head camera's env-frame pose)
    and a station's mount of that camera."""
    rigid = fit.mounts[camera] if camera in fit.mounts else fit.head if camera == "cam_head" else None
    if rigid is None:
        raise KeyError(f"{camera} was not fitted")
    fitted = rigid.transform
    true = truth.cameras[camera].parent_from_camera
    dm = 1000.0 * float(np.linalg.norm(fitted[:3, 3] - true[:3, 3]))
    rel = fitted[:3, :3].T @ true[:3, :3]
    ddeg = math.degrees(math.acos(float(np.clip((np.trace(rel) - 1.0) / 2.0, -1.0, 1.0))))
    return dm, ddeg


def _report(fit: CalibrationFit, out: Any = None) -> None:
    def line(text: str = "") -> None:
        print(text, file=out if out is not None else sys.stdout)

    line(f"poses: {fit.poses}")
    if fit.ee is not None:
        e = fit.ee
        line(f"ee link (link6 -> ee): offset [{', '.join(f'{v:.5f}' for v in e.position)}] m, "
             f"rms {e.rms_mm:.4f} mm / {e.rms_deg:.4f} deg, worst {e.max_mm:.4f} mm / {e.max_deg:.4f} deg "
             f"({e.used}/{e.poses} poses); chain matches: {fit.chain_matches}")
    for cam, m in sorted(fit.mounts.items()):
        pos, quat = fit.mount_usd(cam)
        line(f"{cam} on {fit.mount_parents[cam]}: position [{', '.join(f'{v:.5f}' for v in pos)}] m, "
             f"quat [{', '.join(f'{v:.5f}' for v in quat)}]; rms {m.rms_mm:.4f} mm / {m.rms_deg:.4f} deg, "
             f"worst {m.max_mm:.4f} mm / {m.max_deg:.4f} deg ({m.used}/{m.poses} poses)")
        for r in m.residuals:
            line(f"    {r.label:>8}: {r.position_mm:8.4f} mm {r.angle_deg:8.4f} deg{'' if r.inlier else '  (outlier)'}")
    for cam, k in sorted(fit.intrinsics.items()):
        line(f"{cam} intrinsics: fx {k.fx:.4f} fy {k.fy:.4f} cx {k.cx:.3f} cy {k.cy:.3f} ({k.width}x{k.height})")
    for note in fit.notes:
        line(f"note: {note}")


def run_fit_cli(run_dir: str, out: str, *, station_file: str | None = None, json_path: str | None = None) -> int:
    """`pyrua-dojo calibrate fit RUN_DIR --out FILE`."""
    try:
        station = load_station(station_file) if station_file else load_station()
        fit = fit_run(run_dir, station)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _report(fit)
    path = write_calibration_file(fit, out, source=str(Path(run_dir).resolve()), station=station)
    if json_path:
        write_json_atomic(Path(json_path), fit.summary())
    print(f"wrote {path}")
    return 0


def run_twin_cli(
    out: str | None,
    *,
    run_root: str,
    task: str,
    seed: int,
    layout: int,
    truth_file: str | None,
    perturb: bool,
    perturb_seed: int,
    agent_calibration: str | None,
) -> int:
    """`pyrua-dojo calibrate twin [--out FILE]`: the routine on the twin, the fit, the file, the residuals."""
    if truth_file and perturb:
        print("error: give --truth or --perturb, not both", file=sys.stderr)
        return 2
    try:
        truth = load_truth_station(truth_file) if truth_file else (perturbed_station(seed=perturb_seed)[0] if perturb
                                                                   else load_truth_station())
        tc = run_on_twin(run_root, truth=truth, agent_calibration=agent_calibration, task=task, seed=seed,
                         layout=layout)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run = tc.run
    print(f"run: {run.run_dir} ({run.status}{': ' + run.reason if run.reason else ''}); "
          f"{run.poses_recorded} poses, {run.steps_used} steps, home: {run.returned_home}")
    _report(tc.fit)
    print("against the twin's truth:")
    for cam in sorted(tc.fit.mounts) + (["cam_head"] if tc.fit.head is not None else []):
        dm, ddeg = mount_error(tc.fit, tc.truth, cam)
        print(f"    {cam}: {dm:.4f} mm, {ddeg:.4f} deg")
    if tc.fit.ee is not None:
        true_ee = np.array(tc.truth.x5.ee_offset)
        print(f"    ee offset: {1000 * float(np.linalg.norm(tc.fit.ee.position - true_ee)):.4f} mm")
    target = Path(out) if out else run.run_dir / "calibration.yml"
    path = write_calibration_file(tc.fit, target, source=str(run.run_dir))
    print(f"wrote {path}")
    return 0 if run.status in ("complete", "partial") else 1
