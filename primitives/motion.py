"""Trajectories -> per-step joint targets (one row per 40 ms action), planned before anything moves.

Motions run near the joint velocity limits with minimum-jerk timing: the peak joint speed of a minimum-jerk
profile is 1.875 x its mean, so a move of largest joint displacement D takes 1.875 D / v seconds at peak speed v.
Straight lines are planned densely in Cartesian space (IK seeded point to point) and then timed the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calibration.transforms import FloatArray, quat_from_axis_angle, quat_multiply, quat_to_matrix
from calibration.transforms import matrix_to_quat
from primitives.kinematics import ArmKinematics, Point

STEP_S = 0.04  # one RoboDojo action
_MIN_JERK_PEAK = 1.875


def min_jerk(tau: FloatArray) -> FloatArray:
    """Minimum-jerk position profile s(tau) on [0, 1]."""
    t = np.clip(tau, 0.0, 1.0)
    return t**3 * (10.0 - 15.0 * t + 6.0 * t * t)


def _steps_for(displacement_rate: float, peak_speed: float, extra: float = 0.0) -> int:
    """Number of 40 ms steps for a min-jerk move whose path needs `displacement_rate` (units of travel)."""
    if peak_speed <= 0:
        raise ValueError("speed must be positive")
    duration = _MIN_JERK_PEAK * displacement_rate / peak_speed + extra
    return max(1, math.ceil(duration / STEP_S - 1e-9))


@dataclass(frozen=True)
class Limits:
    """Speed limits used for timing; `speed` in (0, 1] scales them."""

    joint_speed: FloatArray  # rad/s per joint at speed 1.0 (below the 5 rad/s hardware limit)
    tcp_speed: float = 0.5  # m/s on straight lines at speed 1.0
    turn_speed: float = 2.0  # rad/s of tool rotation on straight lines at speed 1.0


def joint_path(q_start: FloatArray, q_goal: FloatArray, limits: Limits, speed: float = 1.0) -> FloatArray:
    """Per-step joint targets (n, 6) from q_start (exclusive) to q_goal (inclusive)."""
    _check_speed(speed)
    delta = np.asarray(q_goal, dtype=float) - np.asarray(q_start, dtype=float)
    rate = float(np.max(np.abs(delta) / (limits.joint_speed * speed)))
    n = _steps_for(rate, 1.0) if rate > 0 else 1
    s = min_jerk(np.arange(1, n + 1) / n)
    return q_start + s[:, None] * delta


@dataclass(frozen=True, eq=False)
class LinePlan:
    """A planned straight-line motion: per-step joints, or why it cannot be done."""

    ok: bool
    joints: FloatArray  # (n, 6); empty when not ok
    reason: str = ""


def line_path(
    arm: ArmKinematics,
    q_start: FloatArray,
    goal: FloatArray,
    limits: Limits,
    speed: float = 1.0,
    point: Point = "tcp",
    resolution_m: float = 0.005,
    resolution_rad: float = 0.05,
) -> LinePlan:
    """Straight line of `point` from its pose at q_start to `goal` (4x4), orientation slerped along the way."""
    _check_speed(speed)
    start = arm.fk(q_start, point)
    p0, p1 = start[:3, 3], goal[:3, 3]
    q0 = matrix_to_quat(start[:3, :3])
    q1 = matrix_to_quat(goal[:3, :3])
    if float(np.dot(q0, q1)) < 0:
        q1 = -q1
    angle = 2.0 * math.acos(min(1.0, abs(float(np.dot(q0, q1)))))
    dist = float(np.linalg.norm(p1 - p0))
    n_dense = max(2, math.ceil(max(dist / resolution_m, angle / resolution_rad)) + 1)
    s_dense = np.linspace(0.0, 1.0, n_dense)
    qs = [np.asarray(q_start, dtype=float)]
    for s in s_dense[1:]:
        t = np.eye(4)
        t[:3, :3] = quat_to_matrix(_slerp(q0, q1, s))
        t[:3, 3] = p0 + s * (p1 - p0)
        r = arm.ik(t, qs[-1], point=point)
        if not r.converged:
            if s >= 1.0 or not arm.ik(goal, qs[-1], point=point).converged:
                return LinePlan(False, np.empty((0, 6)), "the target pose is out of reach (no IK solution there)")
            return LinePlan(
                False, np.empty((0, 6)),
                f"no IK solution {100 * s:.0f}% along the line: the target is reachable, the straight path is not",
            )
        if float(np.max(np.abs(r.q - qs[-1]))) > 0.35:
            return LinePlan(False, np.empty((0, 6)), f"the line crosses a wrist or elbow flip {100 * s:.0f}% along")
        qs.append(r.q)
    dense = np.array(qs)
    # Time it: the path parameter s runs along a min-jerk profile; joint speed = |dq/ds| ds/dt.
    dq_ds = np.max(np.abs(np.diff(dense, axis=0)) / np.diff(s_dense)[:, None] / (limits.joint_speed * speed))
    rate = max(float(dq_ds), dist / (limits.tcp_speed * speed), angle / (limits.turn_speed * speed))
    n = _steps_for(rate, 1.0) if rate > 0 else 1
    s_steps = min_jerk(np.arange(1, n + 1) / n)
    joints = np.stack([np.interp(s_steps, s_dense, dense[:, j]) for j in range(6)], axis=1)
    return LinePlan(True, joints)


def _slerp(q0: FloatArray, q1: FloatArray, s: float) -> FloatArray:
    d = float(np.clip(np.dot(q0, q1), -1.0, 1.0))
    if d > 0.9995:
        q = q0 + s * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = math.acos(d)
    return (math.sin((1 - s) * theta) * q0 + math.sin(s * theta) * q1) / math.sin(theta)


def rotate_about_z(r: FloatArray, angle: float) -> FloatArray:
    """Rotation r turned by `angle` about the world z axis."""
    q = quat_multiply(quat_from_axis_angle([0, 0, 1], angle), matrix_to_quat(r))
    return quat_to_matrix(q)


def _check_speed(speed: float) -> None:
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and 0.0 < speed <= 1.0):
        raise ValueError(f"speed must be in (0, 1], got {speed!r}")
