"""Actions and observations: RoboDojo joint-mode actions out, observations in, through a bridge.

The one module that builds, checks and holds actions and parses RoboDojo's observation dict. Primitives never talk
to a simulator. They build action chunks (one action per 40 ms step, both arms and both grippers in every action)
and call `bridge.exchange(chunk)`, which blocks until the chunk has run and returns the next observation. A
finished episode raises `EpisodeFinished` from the bridge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from calibration import ARMS, CAMERAS, Camera, Intrinsics
from calibration.transforms import FloatArray

Action = dict[str, np.ndarray]

ACTION_KEYS: tuple[str, ...] = (
    "left_arm_joint_state",
    "left_ee_joint_state",
    "right_arm_joint_state",
    "right_ee_joint_state",
)


class Bridge(Protocol):
    """Carries action chunks to the station and observations back."""

    def exchange(self, chunk: Sequence[Action]) -> Mapping[str, Any]:
        """Run `chunk` (>= 1 actions) and return the observation taken after it; raises EpisodeFinished."""
        ...


def make_action(
    left_q: Sequence[float], left_g: float, right_q: Sequence[float], right_g: float
) -> Action:
    """One joint-mode action: absolute joint targets (rad) and gripper values (0 closed .. 1 open)."""
    return {
        "left_arm_joint_state": np.asarray(left_q, dtype=np.float64).copy(),
        "left_ee_joint_state": np.array([float(left_g)]),
        "right_arm_joint_state": np.asarray(right_q, dtype=np.float64).copy(),
        "right_ee_joint_state": np.array([float(right_g)]),
    }


def validate_chunk(chunk: Sequence[Action], lower: FloatArray, upper: FloatArray) -> None:
    """Raise ValueError unless every action has exactly the four keys, right lengths, finite, in-limit values."""
    if len(chunk) == 0:
        raise ValueError("an action chunk must hold at least one action")
    for i, action in enumerate(chunk):
        if set(action) != set(ACTION_KEYS):
            raise ValueError(f"action {i}: keys must be {ACTION_KEYS}, got {sorted(action)}")
        for key in ACTION_KEYS:
            v = np.asarray(action[key], dtype=float)
            n = 6 if key.endswith("arm_joint_state") else 1
            if v.shape != (n,):
                raise ValueError(f"action {i}: {key} must have shape ({n},), got {v.shape}")
            if not np.all(np.isfinite(v)):
                raise ValueError(f"action {i}: {key} is not finite: {v}")
            if n == 6 and (np.any(v < lower - 1e-9) or np.any(v > upper + 1e-9)):
                raise ValueError(f"action {i}: {key} outside the joint limits: {np.round(v, 4)}")
            if n == 1 and not 0.0 <= v[0] <= 1.0:
                raise ValueError(f"action {i}: {key} must be within [0, 1], got {v[0]}")


def _parse_arms(
    obs: Mapping[str, Any], *, ee_pose: bool = True
) -> tuple[dict[str, FloatArray], dict[str, FloatArray], dict[str, float]]:
    """Joints, ee poses (unless `ee_pose` is False) and gripper values per arm from an observation's `state`;
    ValueError when malformed."""
    try:
        state = obs["state"]
    except (KeyError, TypeError):
        raise ValueError("observation must hold 'state'") from None
    joints, ee, grip = {}, {}, {}
    for arm in ARMS:
        try:
            joints[arm] = np.asarray(state[f"{arm}_arm_joint_state"], dtype=float).reshape(6)
            if ee_pose:
                ee[arm] = np.asarray(state[f"{arm}_ee_pose"], dtype=float).reshape(7)
            grip[arm] = float(np.asarray(state[f"{arm}_ee_joint_state"], dtype=float).reshape(-1)[0])
        except (KeyError, ValueError, IndexError) as exc:
            raise ValueError(f"observation state for the {arm} arm is missing or malformed: {exc}") from None
    return joints, ee, grip


@dataclass(frozen=True, eq=False)
class Observation:
    """One RoboDojo observation, parsed. `step` = actions executed before it was taken."""

    step: int
    joints: Mapping[str, FloatArray]  # measured joint1..6, rad
    ee_pose: Mapping[str, FloatArray]  # measured ee link pose [x, y, z, qw, qx, qy, qz], env frame
    gripper: Mapping[str, float]  # last commanded gripper value, 0 closed .. 1 open
    images: Mapping[str, np.ndarray] = field(repr=False)  # RGB uint8 HxWx3 per camera
    depth: Mapping[str, np.ndarray] = field(repr=False)  # metres (distance to image plane), when sent
    intrinsics: Mapping[str, FloatArray] = field(repr=False)  # 3x3, when sent
    extrinsics: Mapping[str, FloatArray] = field(repr=False)  # camera-to-world 4x4 USD axes, when sent
    instruction: str

    @classmethod
    def from_robodojo(cls, obs: Mapping[str, Any], step: int) -> Observation:
        """Parse RoboDojo's observation dict; raises ValueError naming what is missing or malformed."""
        try:
            obs["state"]
            vision = obs["vision"]
        except (KeyError, TypeError):
            raise ValueError("observation must hold 'state' and 'vision'") from None
        joints, ee, grip = _parse_arms(obs)
        images, depth, intr, extr = {}, {}, {}, {}
        for cam in CAMERAS:
            view = vision.get(cam)
            if not isinstance(view, Mapping) or "color" not in view:
                raise ValueError(f"observation has no colour image for {cam}")
            images[cam] = np.asarray(view["color"])
            if "depth" in view and np.asarray(view["depth"]).ndim == 2:
                depth[cam] = np.asarray(view["depth"], dtype=np.float32)
            elif "approximate_depth" in view:
                depth[cam] = np.asarray(view["approximate_depth"], dtype=np.float32) / 1000.0
            if "intrinsic_matrix" in view:
                intr[cam] = np.asarray(view["intrinsic_matrix"], dtype=float).reshape(3, 3)
            for key in ("extrinsic_matrix", "extrinsics_matrix"):
                if key in view:
                    extr[cam] = np.asarray(view[key], dtype=float).reshape(4, 4)
        return cls(
            step=step,
            joints=joints,
            ee_pose=ee,
            gripper=grip,
            images=images,
            depth=depth,
            intrinsics=intr,
            extrinsics=extr,
            instruction=str(obs.get("instruction", "")),
        )

    def camera_from_matrices(self, name: str, world_from_env: FloatArray | None = None) -> Camera | None:
        """The camera as RoboDojo's matrices describe it (when sent), in the env frame."""
        if name not in self.intrinsics or name not in self.extrinsics:
            return None
        k = self.intrinsics[name]
        h, w = self.images[name].shape[:2]
        intr = Intrinsics(w, h, float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2]))
        e = self.extrinsics[name]
        if world_from_env is not None:
            e = np.linalg.inv(world_from_env) @ e
        return Camera.from_usd_extrinsic(name, intr, e)


def hold_action(observed: Observation | Mapping[str, Any] | None, last: Action | None = None) -> Action:
    """An action that keeps everything where it is: the last commanded targets, else the measured state.

    `observed` is an `Observation` or RoboDojo's raw dict, of which only the joints and gripper values are read (a
    hold must not fail for a missing camera).
    """
    if last is not None:
        return {k: np.array(v, dtype=np.float64, copy=True) for k, v in last.items()}
    if observed is None:
        raise ValueError("no observation and no previous action to hold")
    if isinstance(observed, Observation):
        joints, grip = observed.joints, observed.gripper
    else:
        joints, _, grip = _parse_arms(observed, ee_pose=False)
    return make_action(joints["left"], grip["left"], joints["right"], grip["right"])
