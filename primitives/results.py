"""Frozen result dataclasses returned by `robo`: measured outcomes, never exceptions.

Positions are env-frame metres (list [x, y, z]); angles radians unless a field name says `_deg`. Every result
of a motion reports `steps_used` (40 ms actions spent by that call) and `steps_left` (of the task's step limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ArmState:
    """One arm as last observed."""

    joints: list[float]  # joint1..6, rad (measured)
    ee_pose: list[float]  # ee link [x, y, z, qw, qx, qy, qz] as RoboDojo reports it
    tcp: list[float]  # grasp centre between the finger pads [x, y, z]
    approach: list[float]  # unit vector the fingers point along ([0, 0, -1] = straight down)
    yaw: float  # heading (rad, about world z) of the line the fingers close along
    gripper: float  # last commanded gripper value, 0 closed .. 1 open (stays > 0 when an object blocks the fingers)


@dataclass(frozen=True)
class RobotState:
    """Both arms, the step count and the instruction."""

    step: int  # actions executed so far in this episode
    steps_left: int  # of the task's step limit
    left: ArmState
    right: ArmState
    instruction: str


@dataclass(frozen=True)
class Motion:
    """Outcome of a move. planned=False means nothing moved (no IK solution, or the line is not feasible)."""

    arm: str  # "left", "right" or "both"
    planned: bool
    reached: bool  # planned, and the measured joints put the TCP within ${reach_mm} mm and ${reach_deg} deg of target
    reason: str  # why not planned / not reached; else "" or a note
    target: list[float]  # commanded TCP [x, y, z] (for "both": left then right, 6 values)
    tcp: list[float]  # measured TCP [x, y, z] at the end (for "both": left then right)
    position_error_m: float  # largest over the moved arms
    orientation_error_deg: float
    steps_used: int  # actions this call spent
    steps_left: int  # of the episode's step limit, after this call
    travel_z: list[float] = field(default_factory=list)  # path="transit": the TCP height it travelled at (per arm)


@dataclass(frozen=True)
class MoveCheck:
    """Outcome of check_move: the motion planned, nothing moved. No collision check: see lowest_z."""

    arm: str
    feasible: bool
    reason: str  # why not feasible; else "" or a note
    steps: int  # actions the motion would take (0 when not feasible)
    lowest_z: float = 0.0  # lowest TCP z along the planned path, its start included (a joint path can dip below both ends)
    highest_z: float = 0.0  # highest TCP z along it
    travel_z: float = 0.0  # path="transit": the height it would travel at


@dataclass(frozen=True)
class Descent:
    """Outcome of a guarded descent or guarded move."""

    arm: str
    stopped_by: str  # "contact" (the arm lagged its command, or a held object slipped), "target" (reached it), "no_ik"
    contact: bool
    tcp: list[float]  # measured TCP [x, y, z] where it stopped
    travelled_m: float  # how far the TCP went (down, for a descent; along the motion, for guarded_move)
    steps_used: int  # actions this call spent
    steps_left: int  # of the episode's step limit, after this call


@dataclass(frozen=True)
class Grip:
    """Outcome of open / close: the reported gripper value is the width check."""

    arm: str
    command: float  # what was asked: 1.0 open, 0.0 close (or a width fraction)
    value: float  # gripper value RoboDojo reports after settling; held: object width / ${max_opening_mm} mm - 0.2
    held: bool  # the fingers stopped on an object (value stayed over 0.05 above the command)
    width_m: float  # estimated distance between the finger pads (held: the object's width, a few mm)
    steps_used: int  # actions this call spent
    steps_left: int  # of the episode's step limit, after this call


@dataclass(frozen=True)
class Located:
    """Where an object is, measured from segmentation masks (and depth when the station sends it).

    `xyz` is the centre of the object's top; `footprint` is its extent (length >= width) along `heading` (the
    long side's direction, in [0, pi): a symmetric object's yaw is only defined mod pi, and a round one's is 0);
    `height` is its top above the table. found=False means nothing usable was seen (see reason).
    """

    found: bool
    text: str  # the description that was searched for
    xyz: list[float]  # top centre [x, y, z]
    footprint: list[float]  # [length, width] in metres
    heading: float  # rad in [0, pi), direction of the footprint's long side
    height: float  # top above the table, metres
    score: float  # segmentation confidence of the chosen instance
    cameras: list[str]  # cameras whose masks were used
    method: str  # "depth", "head+wrist" (fit to every view), "head" (assumes the table), "wrist" (no head view)
    instances: int  # how many instances matched in the head camera
    reason: str  # why not found, or notes on the estimate
    step: int  # observation step it was measured at
    uncertainty_xy_m: float = 0.0  # one sigma of xyz's x, y: the true error is within twice it 9 times in 10
    uncertainty_z_m: float = 0.0  # the same for the top's height
    outline: list[list[float]] = field(default_factory=list)  # [[x, y], ...] its shape at its top's height
    held_by: str = ""  # "left"/"right" when that gripper's TCP lies inside it (between the fingers)
    tcp_offset: list[float] = field(default_factory=list)  # held: top centre minus that arm's TCP [dx, dy, dz]


@dataclass(frozen=True)
class CameraMeta:
    """What a camera is and whether depth comes with it."""

    name: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    position: list[float]  # optical centre now, env frame
    forward: list[float]  # unit optical axis now (world frame)
    right: list[float]  # unit world direction of the image's +u (pixel column grows to the right)
    down: list[float]  # unit world direction of the image's +v (pixel row grows downwards)
    moves_with: str | None  # arm carrying it, None for the head camera
    has_depth: bool  # the station sends depth for this camera
    from_matrices: bool  # pose from RoboDojo's camera matrices (else from calibration + joints)


@dataclass(frozen=True, eq=False)
class CapturedImage:
    """An image captured for the LLM: which camera, at which episode step, and why (the label)."""

    source: str  # a camera name ("cam_head", ...) or "display" for display(array)
    step: int  # episode step (actions executed so far) when it was captured; -1 if unknown
    image: np.ndarray = field(repr=False)  # uint8 HxWx3 RGB
    label: str = ""


@dataclass(frozen=True)
class Fingertips:
    """Where an arm's two fingertips show in its wrist camera's latest image, against where the model puts them.

    Pixels are [u, v]; pad "a" is the finger on the closing axis' + side (arm().yaw), "b" the other. `shift_m` is
    the model's error near the grasp: a point at height `z` back-projected through this camera with the model,
    plus shift_m, is where it really is relative to the TCP. found=False (lists empty) when the fingers are not seen.
    """

    arm: str
    camera: str
    found: bool
    reason: str  # why not found, or notes
    tips_px: list[list[float]]  # seen: the tip end of pad a, of pad b
    midpoint_px: list[float]  # seen: their midpoint
    model_tips_px: list[list[float]]  # the same where the camera model projects the pads
    model_midpoint_px: list[float]
    offset_px: list[float]  # midpoint_px - model_midpoint_px
    shift_m: list[float]  # [dx, dy] world correction at height z
    z: float  # height of the fingertips (m), where shift_m holds
    step: int  # observation step the image is from
