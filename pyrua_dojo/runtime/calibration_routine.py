"""The calibration routine: it moves both arms through fixed poses and records what the station reports.

The wrist-camera mounts and RoboDojo's exact ee link live only in RoboDojo's downloaded assets. The routine
measures them instead: `CalibrationRoutine` (the Episode runs it for `planner: calibrate`, instead of the LLM agent)
moves both arms together through `DEFAULT_PLAN` (fixed joint poses above the table, each arm on its own side), holds
still at each, and appends what the station reported (measured joints, ee poses, every camera's intrinsic and
extrinsic matrices when sent) to `calibration.jsonl` in the run directory as it goes; then it returns both arms home
and fits the run (`fit.json`, `calibration.yml` next to it).

Reading a record back, fitting it (`fit_run`) and writing the calibration file (`write_calibration_file`) are
`pyrua_dojo.runtime.calibration_files`. The routine on the twin and the `pyrua-dojo calibrate` commands are
`pyrua_dojo.evaluate.twin_calibration` (they drive the XPolicyLab Model, a layer above this one).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from calibration import ARMS, CAMERAS, Station, load_station
from calibration.transforms import FloatArray
from primitives.actions import Action, Bridge, Observation, make_action, validate_chunk
from primitives.errors import CancelToken, EpisodeFinished
from primitives.motion import Limits, joint_path
from pyrua_dojo.runtime.trace import RunTrace, jsonable, write_json_atomic
from pyrua_dojo.runtime.calibration_files import RECORD_SCHEMA, fit_run, write_calibration_file

if TYPE_CHECKING:
    from primitives.robot import Robo

__all__ = [
    "DEFAULT_PLAN",
    "CalibrationPose",
    "CalibrationRoutine",
    "CalibrationRun",
    "RoutineConfig",
    "mirror_joints",
]

# ------------------------------------------------------------------------------------------------ the poses

#: Left-arm joint poses (rad), chosen offline from 60 000 random in-limit samples for spread in link6 position and
#: orientation, then ordered for short joint travel. Every pose and the joint-space path between neighbours keep the
#: gripper >= 15 cm (home: >= 10 cm) above the table, the whole arm at x <= -6 cm (so the mirrored right arm stays
#: >= 12 cm away), the gripper >= 8 cm from the arm's own base and upper arm, and the approach axis within 70 deg of
#: forward-down. `tests/test_calibration_routine.py` re-checks these and runs the plan on the twin without a single contact.
_LEFT_POSES: tuple[tuple[float, ...], ...] = (
    (0.52, 0.83, 1.12, -1.16, -0.85, -1.18),
    (0.13, 1.13, 1.24, -0.16, 0.00, -0.08),
    (0.59, 2.15, 2.06, 0.52, 0.67, 0.73),
    (-0.06, 2.11, 1.70, 0.20, 0.95, 1.04),
    (0.54, 1.57, 1.55, -1.28, -0.41, 0.67),
    (0.19, 1.00, 2.03, -1.21, -0.89, 1.00),
    (-0.35, 1.75, 1.69, -1.30, -0.96, 0.96),
    (-0.38, 0.89, 2.12, -1.33, 0.46, 0.95),
    (-0.12, 0.92, 1.08, -1.35, 0.49, 0.93),
    (-0.38, 0.83, 1.85, -1.33, 0.62, -1.05),
    (0.43, 1.83, 1.80, -1.28, 0.97, -1.07),
    (-0.34, 1.81, 1.42, 0.79, -0.77, -1.14),
)


def mirror_joints(q: Sequence[float]) -> tuple[float, ...]:
    """The right arm's joints that mirror the left arm's pose `q` through the plane x = 0.

    Both bases face +y, so the mirror flips the arm's local y: joints about z (1, 5) and x (6) change sign, the
    pitch joints about y (2, 3, 4) do not.
    """
    if len(q) != 6:
        raise ValueError(f"expected 6 joint values, got {len(q)}")
    return (-q[0], q[1], q[2], q[3], -q[4], -q[5])


@dataclass(frozen=True)
class CalibrationPose:
    """One pose of the plan: both arms' joint targets (rad)."""

    label: str
    left: tuple[float, ...]
    right: tuple[float, ...]

    def joints(self, arm: str) -> FloatArray:
        return np.array(self.left if arm == "left" else self.right, dtype=float)


DEFAULT_PLAN: tuple[CalibrationPose, ...] = tuple(
    CalibrationPose(f"p{i + 1:02d}", q, tuple(float(v) + 0.0 for v in mirror_joints(q)))
    for i, q in enumerate(_LEFT_POSES)
)


@dataclass(frozen=True)
class RoutineConfig:
    """How the routine moves. joint_speed: peak rad/s of the min-jerk moves; settle_steps: hold actions per pose."""

    plan: tuple[CalibrationPose, ...] = DEFAULT_PLAN
    joint_speed: float = 3.5
    settle_steps: int = 4

    def __post_init__(self) -> None:
        if not self.plan:
            raise ValueError("a calibration plan needs at least one pose")
        if not 0.0 < self.joint_speed <= 5.0:
            raise ValueError(f"joint_speed must be in (0, 5] rad/s, got {self.joint_speed}")
        if not 1 <= self.settle_steps <= 50:
            raise ValueError(f"settle_steps must be in 1..50, got {self.settle_steps}")
        labels = [p.label for p in self.plan]
        if len(set(labels)) != len(labels):
            raise ValueError(f"pose labels must be unique, got {labels}")
        for p in self.plan:
            for arm in ARMS:
                q = p.joints(arm)
                if q.shape != (6,) or not np.all(np.isfinite(q)):
                    raise ValueError(f"pose {p.label}: {arm} needs 6 finite joint values")


# ----------------------------------------------------------------------------------------------- the routine


@dataclass(frozen=True)
class CalibrationRun:
    """How a calibration run went.

    status: "complete" (every pose), "partial" (poses skipped for lack of steps), "cancelled", "ended" (the episode
    ended under it), or "error". fit: the fit's summary when at least one pose was recorded and the fit ran.
    """

    status: str
    reason: str
    poses_planned: int
    poses_recorded: int
    skipped: tuple[str, ...]
    steps_used: int
    returned_home: bool
    camera_matrices: bool
    run_dir: Path
    fit: Mapping[str, Any] | None = field(default=None, repr=False)
    calibration_file: Path | None = None


class CalibrationRoutine:
    """Moves both arms through the plan, recording every pose into the run directory (see the module docstring).

    It drives the bridge itself (both arms in one joint-space move, then `settle_steps` hold actions; the
    observation after the hold is the record), so it needs the raw observations with their camera matrices. `robo`
    is read once for the start state and the steps left. `run()` is called once, in the episode's agent thread;
    `cancel(reason)` may come from any thread and stops it at the next chunk boundary.
    """

    def __init__(
        self,
        robo: Robo,
        bridge: Bridge,
        trace: RunTrace,
        cancel: CancelToken,
        *,
        station: Station | None = None,
        config: RoutineConfig = RoutineConfig(),
    ) -> None:
        self._robo = robo
        self._bridge = bridge
        self._trace = trace
        self._token = cancel
        self.station = station if station is not None else load_station()
        self.config = config
        self._lower = self.station.x5.lower
        self._upper = self.station.x5.upper
        for pose in config.plan:
            for arm in ARMS:
                q = pose.joints(arm)
                if np.any(q < self._lower - 1e-9) or np.any(q > self._upper + 1e-9):
                    raise ValueError(f"pose {pose.label}: {arm} joints {q.tolist()} are outside the joint limits")
        self._limits = Limits(joint_speed=np.tile(np.minimum(self.station.x5.velocity_limits, config.joint_speed), 2))
        self._lock = threading.Lock()
        self._cancel_reason: str | None = None
        self._started = False
        self._steps = 0
        self._budget = 0
        self._cmd: dict[str, FloatArray] = {}
        self._grip: dict[str, float] = {}
        self._recorded = 0
        self._matrices = False

    @property
    def steps_used(self) -> int:
        """Actions this routine has sent."""
        return self._steps

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run from any thread (at the next chunk boundary, or a waiting exchange)."""
        with self._lock:
            if self._cancel_reason is None:
                self._cancel_reason = reason
        self._token.cancel(EpisodeFinished(reason))

    def run(self) -> CalibrationRun:
        """Record every pose that fits the step budget, return home, fit; the outcome also lands in result.json."""
        if self._started:
            raise RuntimeError("a CalibrationRoutine runs once; make a new one")
        self._started = True
        plan = self.config.plan
        skipped: list[str] = []
        status, reason, returned = "error", "the routine did not finish", False
        home = np.array(self.station.x5.home, dtype=float)
        try:
            state = self._robo.state()
            self._budget = int(self._robo.steps_left)
            for arm in ARMS:
                arm_state = getattr(state, arm)
                self._cmd[arm] = np.array(arm_state.joints, dtype=float)
                self._grip[arm] = float(arm_state.gripper)
            self._write_header(plan, home)
            self._trace.event("calibration_start", poses=len(plan), steps_left=self._budget)
            settle = self.config.settle_steps
            if self._budget >= settle:
                self._record("start", self._hold())
            for k, pose in enumerate(plan):
                target = {arm: pose.joints(arm) for arm in ARMS}
                there = self._path(self._cmd, target)
                back = self._path(target, {arm: home for arm in ARMS})
                if len(there) + settle + len(back) + settle > self._budget - self._steps:
                    skipped = [p.label for p in plan[k:]]
                    self._trace.event("calibration_budget", skipped=skipped, steps_left=self._budget - self._steps)
                    break
                self._move(there, target)
                self._record(pose.label, self._hold())
            back = self._path(self._cmd, {arm: home for arm in ARMS})
            if len(back) <= self._budget - self._steps:
                self._move(back, {arm: home for arm in ARMS})
                returned = True
                if settle <= self._budget - self._steps:
                    self._record("home", self._hold())
            status = "partial" if skipped or not returned else "complete"
            reason = (
                f"{len(skipped)} poses skipped for lack of steps" if skipped
                else ("" if returned else "no steps left to return home")
            )
        except EpisodeFinished as ef:
            with self._lock:
                cancelled = self._cancel_reason is not None
            status, reason = ("cancelled" if cancelled else "ended"), str(ef)
        except Exception as exc:  # noqa: BLE001 - the routine's own failure becomes the run's status
            status, reason = "error", f"{type(exc).__name__}: {exc}"
            self._trace.event("error", where="calibration", traceback=traceback.format_exc())
        return self._finish(status, reason, plan, skipped, returned)

    # ---------------------------------------------------------------- internals
    def _path(self, start: Mapping[str, FloatArray], goal: Mapping[str, FloatArray]) -> FloatArray:
        """Both arms in one min-jerk joint move: (n, 12) rows [left q, right q]."""
        a = np.concatenate([start["left"], start["right"]])
        b = np.concatenate([goal["left"], goal["right"]])
        if np.allclose(a, b, atol=1e-9):
            return np.empty((0, 12))
        return joint_path(a, b, self._limits)

    def _move(self, path: FloatArray, target: Mapping[str, FloatArray]) -> Observation | None:
        if len(path) == 0:
            return None
        g = self._grip
        chunk = [make_action(row[:6].tolist(), g["left"], row[6:].tolist(), g["right"]) for row in path]
        obs = self._exchange(chunk)
        self._cmd = {arm: np.array(target[arm], dtype=float) for arm in ARMS}
        return obs

    def _hold(self) -> Observation:
        q, g = self._cmd, self._grip
        hold = make_action(q["left"].tolist(), g["left"], q["right"].tolist(), g["right"])
        copies = [{k: v.copy() for k, v in hold.items()} for _ in range(self.config.settle_steps - 1)]
        return self._exchange([hold, *copies])

    def _exchange(self, chunk: list[Action]) -> Observation:
        self._token.check()
        if self._steps + len(chunk) > self._budget:
            raise EpisodeFinished("step_limit", "the calibration plan ran out of steps")
        validate_chunk(chunk, self._lower, self._upper)
        raw = self._bridge.exchange(chunk)
        self._steps += len(chunk)
        obs = Observation.from_robodojo(raw, self._steps)
        self._token.check()
        return obs

    def _write_header(self, plan: Sequence[CalibrationPose], home: FloatArray) -> None:
        wrist = {c: m.parent for c, m in self.station.cameras.items() if m.arm is not None}
        self._trace.append("calibration", {
            "kind": "header",
            "schema": RECORD_SCHEMA,
            "time": time.time(),
            "station": self.station.source,
            "plan": [{"label": p.label, "left": list(p.left), "right": list(p.right)} for p in plan],
            "home": home.tolist(),
            "settle_steps": self.config.settle_steps,
            "joint_speed": self.config.joint_speed,
            "steps_left": self._budget,
            "wrist_parents": wrist,
        })

    def _record(self, label: str, obs: Observation) -> None:
        cameras: dict[str, Any] = {}
        for cam in CAMERAS:
            entry: dict[str, Any] = {}
            image = obs.images.get(cam)
            if image is not None:
                entry["size"] = [int(image.shape[1]), int(image.shape[0])]
            if cam in obs.intrinsics:
                entry["intrinsic_matrix"] = obs.intrinsics[cam]
            if cam in obs.extrinsics:
                entry["extrinsic_matrix"] = obs.extrinsics[cam]
                self._matrices = True
            cameras[cam] = entry
        lag = {arm: float(np.max(np.abs(obs.joints[arm] - self._cmd[arm]))) for arm in ARMS}
        self._trace.append("calibration", {
            "kind": "pose",
            "index": self._recorded,
            "label": label,
            "step": self._steps,
            "commanded": {arm: self._cmd[arm] for arm in ARMS},
            "joints": {arm: obs.joints[arm] for arm in ARMS},
            "ee_pose": {arm: obs.ee_pose[arm] for arm in ARMS},
            "lag_rad": lag,
            "cameras": cameras,
        })
        self._recorded += 1
        self._trace.event("calibration_pose", label=label, step=self._steps, lag_rad=lag)

    def _finish(
        self, status: str, reason: str, plan: Sequence[CalibrationPose], skipped: list[str], returned: bool
    ) -> CalibrationRun:
        run_dir = self._trace.path
        summary: dict[str, Any] | None = None
        written: Path | None = None
        try:
            self._trace.append("calibration", {"kind": "end", "status": status, "reason": reason,
                                               "poses": self._recorded, "steps_used": self._steps,
                                               "skipped": skipped})
            if self._recorded:
                fit = fit_run(run_dir, self.station)
                summary = fit.summary()
                write_json_atomic(run_dir / "fit.json", summary)
                written = write_calibration_file(fit, run_dir / "calibration.yml", source=str(run_dir))
        except Exception as exc:  # noqa: BLE001 - a failed fit must not hide the recorded run
            self._trace.event("error", where="calibration fit", error=f"{type(exc).__name__}: {exc}",
                              traceback=traceback.format_exc())
            reason = (reason + "; " if reason else "") + f"fit failed: {type(exc).__name__}: {exc}"
        result = CalibrationRun(
            status=status,
            reason=reason,
            poses_planned=len(plan),
            poses_recorded=self._recorded,
            skipped=tuple(skipped),
            steps_used=self._steps,
            returned_home=returned,
            camera_matrices=self._matrices,
            run_dir=run_dir,
            fit=summary,
            calibration_file=written,
        )
        try:
            self._trace.finish(status, calibration=jsonable(result))
        except Exception:  # noqa: BLE001 - a broken disk must not hide the outcome from the caller
            pass
        return result
