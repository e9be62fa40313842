"""Calibration: a routine that moves both arms through fixed poses and records them, the fit, the calibration file.

The wrist-camera mounts and RoboDojo's exact ee link live only in RoboDojo's downloaded assets. This module
measures them instead:

1. `CalibrationRoutine` (the Episode runs it for `planner: calibrate`, instead of the LLM agent) moves both arms
   together through `DEFAULT_PLAN` (fixed joint poses above the table, each arm on its own side), holds still at
   each, and appends what the station reported (measured joints, ee poses, every camera's intrinsic and extrinsic
   matrices when sent) to `calibration.jsonl` in the run directory as it goes; then it returns both arms home and
   fits the run (`fit.json`, `calibration.yml` next to it).
2. `fit_run(run_dir)` reads a recorded run back and fits it with `calibration.fit.fit_station` (the maths).
3. `write_calibration_file(fit, path)` writes the station-schema YAML that `load_station(path)` and the policy's
   `calibration_file` setting layer over the packaged defaults, with a provenance comment.

The routine on the twin and the `pyrua-dojo calibrate` commands are `pyrua_dojo.calibrate_twin` (they drive the
XPolicyLab Model, a layer above this one).
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from calibration import ARMS, CAMERAS, Station, load_station
from calibration.fit import CalibrationFit, PoseSample, fit_station
from calibration.transforms import FloatArray, pose_to_transform
from primitives.actions import Action, Bridge, Observation, make_action, validate_chunk
from primitives.errors import CancelToken, EpisodeFinished
from primitives.kinematics import X5Kinematics
from primitives.motion import Limits, joint_path
from pyrua_dojo.trace import RunTrace, jsonable, read_jsonl, write_json_atomic
from pyrua_dojo.files import replacing

if TYPE_CHECKING:
    from primitives.robot import Robo

__all__ = [
    "DEFAULT_PLAN",
    "RECORD_SCHEMA",
    "CalibrationPose",
    "CalibrationRoutine",
    "CalibrationRun",
    "RoutineConfig",
    "calibration_document",
    "fit_run",
    "load_samples",
    "mirror_joints",
    "write_calibration_file",
]

RECORD_SCHEMA = "pyrua-dojo-calibration-v1"
RECORD_FILE = "calibration.jsonl"
#: Fitted ee-offset components smaller than this (10 um) are written as 0: `primitives.kinematics` solves IK in
#: closed form only for an ee link straight along link6 x.
EE_SNAP_M = 1e-5

# ------------------------------------------------------------------------------------------------ the poses

#: Left-arm joint poses (rad), chosen offline from 60 000 random in-limit samples for spread in link6 position and
#: orientation, then ordered for short joint travel. Every pose and the joint-space path between neighbours keep the
#: gripper >= 15 cm (home: >= 10 cm) above the table, the whole arm at x <= -6 cm (so the mirrored right arm stays
#: >= 12 cm away), the gripper >= 8 cm from the arm's own base and upper arm, and the approach axis within 70 deg of
#: forward-down. `tests/test_calibrate.py` re-checks these and runs the plan on the twin without a single contact.
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


# -------------------------------------------------------------------------------------- reading a run back


def _record_path(run: Path | str) -> Path:
    path = Path(run)
    if path.is_dir():
        path = path / RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no calibration record at {path} (expected a run directory with {RECORD_FILE})")
    return path


def load_samples(run: Path | str, station: Station | None = None) -> tuple[dict[str, Any], list[PoseSample]]:
    """The header and the recorded poses of a calibration run (a run directory or its calibration.jsonl), with
    link6 poses from forward kinematics of the measured joints on `station`'s chain (default: the packaged one)."""
    path = _record_path(run)
    records = read_jsonl(path)
    headers = [r for r in records if r.get("kind") == "header"]
    if not headers:
        raise ValueError(f"{path}: no header record; not a calibration run")
    header = headers[0]
    if header.get("schema") != RECORD_SCHEMA:
        raise ValueError(f"{path}: schema {header.get('schema')!r}, expected {RECORD_SCHEMA!r}")
    kin = X5Kinematics(station if station is not None else load_station())
    samples: list[PoseSample] = []
    for rec in records:
        if rec.get("kind") != "pose":
            continue
        label = str(rec.get("label", f"pose{len(samples)}"))
        try:
            link6 = {arm: kin.arm(arm).link6(np.asarray(rec["joints"][arm], dtype=float)) for arm in ARMS}
            ee = {arm: pose_to_transform(np.asarray(rec["ee_pose"][arm], dtype=float)) for arm in ARMS}
            extr: dict[str, FloatArray] = {}
            intr: dict[str, FloatArray] = {}
            sizes: dict[str, tuple[int, int]] = {}
            for cam, entry in (rec.get("cameras") or {}).items():
                if "extrinsic_matrix" in entry:
                    extr[cam] = np.asarray(entry["extrinsic_matrix"], dtype=float).reshape(4, 4)
                if "intrinsic_matrix" in entry:
                    intr[cam] = np.asarray(entry["intrinsic_matrix"], dtype=float).reshape(3, 3)
                if "size" in entry:
                    w, h = entry["size"]
                    sizes[cam] = (int(w), int(h))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: pose {label!r} is malformed: {exc}") from None
        samples.append(PoseSample(label, link6, ee, extr, intr, sizes))
    if not samples:
        raise ValueError(f"{path}: the run recorded no poses")
    return header, samples


def fit_run(run: Path | str, station: Station | None = None) -> CalibrationFit:
    """Fit a recorded calibration run (see `calibration.fit.fit_station`) on `station`'s chain and head camera."""
    st = station if station is not None else load_station()
    header, samples = load_samples(run, st)
    recorded = header.get("wrist_parents") or {}
    wrist = {c: m.parent for c, m in st.cameras.items() if m.arm is not None}
    for cam, parent in recorded.items():
        if cam in wrist and wrist[cam] != parent:
            raise ValueError(f"{cam}: the run says it is mounted on {parent}, the station on {wrist[cam]}")
    head = st.fixed_camera("cam_head")
    return fit_station(samples, wrist_parents=wrist, head_camera="cam_head", head_pose=head.usd_extrinsic)


# ---------------------------------------------------------------------------------------- the calibration file


def _numbers(values: Sequence[float] | FloatArray, digits: int) -> list[float]:
    return [round(float(v), digits) + 0.0 for v in values]


def calibration_document(fit: CalibrationFit, station: Station | None = None) -> dict[str, Any]:
    """The station-schema overlay of a fit: x5.ee_offset (with tcp_offset moved so the grasp centre stays put on
    link6), each fitted wrist mount and, when the env origin came from the wrist cameras, the head camera's pose
    (position, USD quaternion), and each camera's sent intrinsics (width, height, fx, and fy when not square).
    Only what was fitted appears."""
    st = station if station is not None else load_station()
    doc: dict[str, Any] = {"schema": 1}
    if fit.ee is not None:
        # Components below EE_SNAP_M are written as exact zeros: the closed-form IK needs an offset along link6 x.
        offset = [0.0 if abs(v) < EE_SNAP_M else v for v in fit.ee.position]
        # The grasp centre is a property of the fingers (fixed on link6), not of the reported ee frame: keep it
        # where the station put it, ee_offset.x + tcp_offset along link6 x, whatever the ee link turns out to be.
        grasp_x = st.x5.ee_offset[0] + st.x5.tcp_offset
        doc["x5"] = {"ee_offset": _numbers(offset, 7), "tcp_offset": round(float(grasp_x - offset[0]), 7) + 0.0}
    cams: dict[str, dict[str, Any]] = {}
    for cam, k in sorted(fit.intrinsics.items()):
        if cam not in st.cameras:
            continue
        entry: dict[str, Any] = {"width": k.width, "height": k.height, "fx": round(k.fx, 6)}
        if not k.square:
            entry["fy"] = round(k.fy, 6)
        cams[cam] = entry
    fitted = sorted(fit.mounts) + (["cam_head"] if fit.head is not None and "cam_head" in st.cameras else [])
    for cam in fitted:
        position, quat = fit.mount_usd(cam)
        cams.setdefault(cam, {}).update({"position": _numbers(position, 7), "quat": _numbers(quat, 10)})
    if cams:
        doc["cameras"] = cams
    return doc


def _provenance(fit: CalibrationFit, source: str, when: str) -> list[str]:
    lines = [
        "pyrua-dojo calibration file: fitted station parameters, layered over calibration/station.yml by",
        "calibration.load_station(path) and by the policy setting `calibration_file`.",
        f"fitted: {when}",
        f"source run: {source} ({fit.poses} poses)",
    ]
    if fit.ee is not None:
        e = fit.ee
        lines.append(f"ee offset components below {EE_SNAP_M * 1e6:.0f} um are written as 0")
        lines.append(
            f"ee link (link6 -> ee, both arms, {e.used}/{e.poses} poses): rms {e.rms_mm:.4f} mm / {e.rms_deg:.4f} deg, "
            f"worst {e.max_mm:.4f} mm / {e.max_deg:.4f} deg"
        )
    for cam, m in sorted(fit.mounts.items()):
        lines.append(
            f"{cam} on {fit.mount_parents[cam]} ({m.used}/{m.poses} poses): rms {m.rms_mm:.4f} mm / "
            f"{m.rms_deg:.4f} deg, worst {m.max_mm:.4f} mm / {m.max_deg:.4f} deg"
        )
    if fit.head is not None:
        h = fit.head
        lines.append(f"cam_head in the env frame, origin from the wrist cameras ({h.used}/{h.poses} poses): rms "
                     f"{h.rms_mm:.4f} mm / {h.rms_deg:.4f} deg")
    for cam, k in sorted(fit.intrinsics.items()):
        lines.append(f"{cam} intrinsics as sent: fx {k.fx:.4f} fy {k.fy:.4f} cx {k.cx:.3f} cy {k.cy:.3f}")
    if fit.env_origin is not None:
        lines.append(f"env origin (from the {fit.env_origin_from or 'head camera'}): "
                     f"{[round(float(v), 6) for v in fit.env_origin]}")
    for note in fit.notes:
        lines.append(f"note: {note}")
    return lines


class _CalibrationDumper(yaml.SafeDumper):
    """Block mappings with one-line number lists, as station.yml is written."""


_CalibrationDumper.add_representer(
    list, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)
)


def write_calibration_file(
    fit: CalibrationFit,
    path: Path | str,
    *,
    source: str,
    station: Station | None = None,
    when: str | None = None,
) -> Path:
    """Write the fit as a calibration YAML (provenance comment + `calibration_document`), atomically.

    The text is loaded back with `load_station` before it replaces `path`, so a file that would not load is never
    written. Returns the path.
    """
    out = Path(path)
    stamp = when or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = calibration_document(fit, station)
    comment = "".join(f"# {line}\n" for line in _provenance(fit, source, stamp))
    body = yaml.dump(doc, Dumper=_CalibrationDumper, sort_keys=False, default_flow_style=False, width=120)
    text = comment + body
    out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
        load_station(tmp)  # refuses anything the station loader would refuse
    return out
