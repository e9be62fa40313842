"""A privileged, hand-written joint-space controller for the twin: tests and benchmarks only, never the agent.

It reads true object poses from `TwinEnv.truth`, solves top-down grasp poses with the twin's own IK (`ArmIk`,
MuJoCo Jacobians; no `primitives`), and sends plain `joint` actions through the public `take_action`, so what it
measures is the env's real action path: interpolation, PD, velocity limit, gripper rate limiter, contacts, scoring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from calibration.station import ARMS
from calibration.transforms import matrix_to_quat
from pyrua_dojo.twin.env import TwinEnv
from pyrua_dojo.twin.ik import ArmIk

OPEN, CLOSED = 1.0, 0.0


def top_down_ee_pose(tcp: np.ndarray, yaw: float, tcp_offset: float) -> np.ndarray:
    """ee pose [x, y, z, qw, qx, qy, qz] putting the grasp centre at `tcp`, approach straight down, fingers closing
    along the horizontal direction `yaw` (radians about world z)."""
    approach = np.array([0.0, 0.0, -1.0])
    fingers = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    r = np.column_stack([approach, fingers, np.cross(approach, fingers)])
    ee = np.asarray(tcp, dtype=float) - tcp_offset * approach
    return np.concatenate([ee, matrix_to_quat(r)])


class ScriptError(RuntimeError):
    """The scripted controller could not reach a pose (IK failed)."""


class EpisodeEnded(ScriptError):
    """The episode ended (success, failure or step limit) while the script was still acting."""


@dataclass
class JointScript:
    """Drives both arms of one twin env with joint actions (the other arm holds its command)."""

    env: TwinEnv
    max_joint_step: float = 0.15  # rad per action (the twin's limit is 5 rad/s = 0.2 rad per action)
    on_step: Callable[[JointScript], None] | None = None  # called after every action (tests record state here)

    def __post_init__(self) -> None:
        truth = self.env.truth(0)
        self.ik = ArmIk(truth.scene)
        self.quick_ik = ArmIk(truth.scene, restarts=0)
        obs_state = truth.data
        self.q = {a: obs_state.qpos[truth.scene.arms[a].qpos].copy() for a in ARMS}
        self.g = {a: OPEN for a in ARMS}
        self.steps = 0
        self.tcp_offset = self.env.station.x5.tcp_offset

    def _send(self) -> None:
        if self.env.is_episode_end():
            raise EpisodeEnded("the episode has ended")
        self.env.take_action(
            {
                "left_arm_joint_state": self.q["left"].copy(),
                "left_ee_joint_state": [self.g["left"]],
                "right_arm_joint_state": self.q["right"].copy(),
                "right_ee_joint_state": [self.g["right"]],
            }
        )
        self.steps += 1
        if self.on_step is not None:
            self.on_step(self)

    def joints_for(self, arm: str, tcp: np.ndarray, yaw: float) -> np.ndarray:
        """IK for a top-down grasp at `tcp`, trying yaw, yaw + pi and yaw +- pi/2 (the gripper is symmetric): first
        each from the current command only, then with the solver's restarts; the solution nearest the command wins."""
        yaws = (yaw, yaw + np.pi, yaw + np.pi / 2, yaw - np.pi / 2)
        for solver in (self.quick_ik, self.ik):
            best = None
            for y in yaws:
                sol = solver.solve(arm, top_down_ee_pose(tcp, y, self.tcp_offset), self.q[arm])
                if sol.success and (best is None or np.abs(sol.q - self.q[arm]).sum() < np.abs(best - self.q[arm]).sum()):
                    best = sol.q
            if best is not None:
                return best
        raise ScriptError(f"no IK solution for the {arm} arm at {np.round(tcp, 3).tolist()}")

    def move_joints(self, arm: str, target: np.ndarray, settle: int = 3) -> None:
        """Step the arm's joint command toward `target` in increments of max_joint_step, then hold `settle`."""
        target = np.asarray(target, dtype=float)
        while True:
            delta = target - self.q[arm]
            big = float(np.abs(delta).max())
            if big <= 1e-9:
                break
            self.q[arm] = self.q[arm] + delta * min(1.0, self.max_joint_step / big)
            self._send()
        for _ in range(settle):
            self._send()

    def move_tcp(self, arm: str, tcp: np.ndarray, yaw: float = 0.0, settle: int = 3) -> None:
        self.move_joints(arm, self.joints_for(arm, tcp, yaw), settle)

    def move_above(self, arm: str, tcp: np.ndarray, lifts: tuple[float, ...], yaw: float = 0.0, settle: int = 3) -> None:
        """Move to the first reachable of `tcp` raised by each of `lifts` (approach / retreat poses)."""
        for lift in lifts:
            try:
                target = self.joints_for(arm, np.asarray(tcp, dtype=float) + np.array([0.0, 0.0, lift]), yaw)
            except ScriptError:
                continue
            self.move_joints(arm, target, settle)
            return
        raise ScriptError(f"no IK solution for the {arm} arm above {np.round(tcp, 3).tolist()} (lifts {lifts})")

    def grip(self, arm: str, value: float, actions: int = 8) -> None:
        self.g[arm] = float(value)
        for _ in range(actions):
            self._send()

    def home(self, arm: str) -> None:
        self.move_joints(arm, np.asarray(self.env.station.x5.home, dtype=float))


def arm_for(x: float) -> str:
    """The arm on the object's side of the table."""
    return "left" if x < 0 else "right"


def park_joints(arm: str) -> np.ndarray:
    """A pose clear of the table centre but away from home (joint1 yawed 0.8 rad outward: the ee moves ~0.17 m)."""
    return np.array([0.8 if arm == "left" else -0.8, 0.2, 0.2, 0.0, 0.0, 0.0])


STACK_SITE = (0.0, -0.25)  # next to stack_blocks' ProhibitedArea: kept free of blocks, reachable by both arms
LIFTS = (0.05, 0.03, 0.015)  # approach / retreat heights above a grasp or place pose, first reachable wins (m)


def stack_blocks(
    env: TwinEnv,
    offset: tuple[float, float] = (0.0, 0.0),
    go_home: bool = True,
    on_step: Callable[[JointScript], None] | None = None,
) -> JointScript:
    """Stack the three blocks of a stack_blocks layout, each placed `offset` (xy, m; alternating in sign, so the tower
    zigzags and stays balanced) from the one below, then bring
    both arms home (unless go_home is False: then each arm parks away from home, see `park_joints`). The base is the
    block nearest x = 0 if every other block's arm can reach above it, else it is first carried to STACK_SITE.
    Returns the script (its `steps`)."""
    script = JointScript(env, on_step=on_step)
    truth = env.truth(0)
    poses = truth.object_poses()
    labels = sorted((lb for lb in poses if lb.startswith("block_")), key=lambda lb: abs(poses[lb][0]))
    base, others = labels[0], labels[1:]
    half = {lb: truth.scene.objects[lb].spec.half_extents[2] for lb in labels}

    def reachable(arm: str, xy: np.ndarray, z: float) -> bool:
        try:
            script.joints_for(arm, np.array([xy[0], xy[1], z]), 0.0)
            return True
        except ScriptError:
            return False

    def pick_place(label: str, xy: np.ndarray, bottom_z: float) -> None:
        pose = truth.object_poses()[label]
        h = half[label]
        arm = arm_for(pose[0])
        grasp = np.array([pose[0], pose[1], pose[2] + 0.25 * h])
        script.move_above(arm, grasp, LIFTS)
        script.move_tcp(arm, grasp)
        script.grip(arm, CLOSED)
        script.move_above(arm, grasp, LIFTS)
        place = np.array([xy[0], xy[1], bottom_z + h + 0.25 * h + 0.004])
        script.move_above(arm, place, LIFTS)
        script.move_tcp(arm, place)
        script.grip(arm, OPEN)
        script.move_above(arm, place, LIFTS, settle=0)
        # Clear the tower sideways (toward the arm's own side) before the joint-space move home.
        side = -1.0 if arm == "left" else 1.0
        try:
            script.move_above(arm, place + np.array([0.1 * side, 0.0, 0.0]), LIFTS, settle=0)
        except ScriptError:
            pass
        if go_home:
            script.home(arm)
        else:
            script.move_joints(arm, park_joints(arm))

    table_z = env.station.table.top_z
    base_xy = poses[base][:2].copy()
    high = table_z + sum(2 * half[lb] for lb in labels) + LIFTS[-1]
    if not all(reachable(arm_for(poses[lb][0]), base_xy, high) for lb in others):
        base_xy = np.array(STACK_SITE)
        pick_place(base, base_xy, table_z)
    top_z = table_z + 2 * half[base]
    below_xy = base_xy
    try:
        for level, label in enumerate(others):
            target_xy = below_xy + (-1) ** level * np.asarray(offset, dtype=float)
            pick_place(label, target_xy, top_z)
            below_xy = target_xy
            top_z += 2 * half[label]
    except EpisodeEnded:
        pass
    return script
