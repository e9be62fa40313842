"""Trajectory planning: timing near the velocity limits, straight lines, infeasible lines."""

import numpy as np
import pytest

from primitives.kinematics import X5Kinematics, top_down_rotation  # noqa: F401
from primitives.motion import STEP_S, Limits, joint_path, line_path, min_jerk
from calibration.transforms import make_transform

LIMITS = Limits(joint_speed=np.full(6, 4.0))


def test_min_jerk_profile_endpoints_and_peak_speed():
    t = np.linspace(0, 1, 10001)
    s = min_jerk(t)
    assert s[0] == 0 and s[-1] == pytest.approx(1)
    assert np.max(np.gradient(s, t)) == pytest.approx(1.875, abs=1e-3)


def test_joint_path_respects_speed_and_ends_on_goal():
    q0 = np.zeros(6)
    q1 = np.array([1.0, 1.5, 1.2, -0.5, 0.3, 0.0])
    path = joint_path(q0, q1, LIMITS)
    assert np.allclose(path[-1], q1)
    speeds = np.abs(np.diff(np.vstack([q0, path]), axis=0)) / STEP_S
    assert speeds.max() <= 4.0 * 1.02
    assert speeds.max() >= 4.0 * 0.8  # near the limit, not needlessly slow
    slow = joint_path(q0, q1, LIMITS, speed=0.5)
    assert len(slow) >= 2 * len(path) - 1


def test_line_path_keeps_tcp_on_the_line():
    arm = X5Kinematics().arm("left")
    q0 = arm.ik_top_down((-0.3, -0.2, 0.9), 0.0).q
    # Same orientation as the start (ik_top_down may have chosen the half-turned grasp).
    goal = make_transform(arm.fk(q0, "tcp")[:3, :3], (-0.25, -0.1, 0.82))
    plan = line_path(arm, q0, goal, LIMITS)
    assert plan.ok, plan.reason
    start = arm.fk(q0, "tcp")[:3, 3]
    end = goal[:3, 3]
    d = (end - start) / np.linalg.norm(end - start)
    for q in plan.joints:
        p = arm.fk(q, "tcp")[:3, 3] - start
        off_line = np.linalg.norm(p - (p @ d) * d)
        assert off_line < 1.5e-3
    assert np.allclose(arm.fk(plan.joints[-1], "tcp")[:3, 3], end, atol=1e-5)


def test_line_out_of_reach_is_not_planned():
    arm = X5Kinematics().arm("left")
    q0 = arm.ik_top_down((-0.3, -0.2, 0.9), 0.0).q
    plan = line_path(arm, q0, make_transform(top_down_rotation(0.0), (-0.3, 0.6, 0.8)), LIMITS)
    assert not plan.ok and plan.reason == "the target pose is out of reach (no IK solution there)"


def test_line_whose_target_is_reachable_says_the_path_is_not():
    arm = X5Kinematics().arm("left")
    goal = make_transform(top_down_rotation(np.pi), (-0.3, -0.36, 0.8))  # 9 cm in front of the base
    assert arm.ik(goal, np.zeros(6), point="tcp").converged  # the target itself is reachable
    plan = line_path(arm, np.zeros(6), goal, LIMITS)  # from the start pose
    assert not plan.ok and "along the line: the target is reachable, the straight path is not" in plan.reason


def test_speed_must_be_in_range():
    with pytest.raises(ValueError):
        joint_path(np.zeros(6), np.ones(6), LIMITS, speed=0)
    with pytest.raises(ValueError):
        joint_path(np.zeros(6), np.ones(6), LIMITS, speed=1.5)
