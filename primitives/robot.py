"""The `robo` object: the only interface the LLM's code has to the dual ARX X5 station.

Its docstrings are the API reference in the prompt, so they state units, frames and failure modes exactly. It plans;
the command engine behind it (`primitives.command_engine`) runs the chunks and owns the step count.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass, replace
from typing import Any, TypeVar

import numpy as np

from calibration import ARMS, CAMERAS, Station
from calibration.transforms import FloatArray, make_transform, quat_to_matrix, rotation_angle
from primitives.actions import Bridge, Observation
from primitives.command_engine import CommandEngine
from primitives.errors import CancelToken
from primitives.fingertips import measure_fingertips
from primitives.kinematics import X5Kinematics, tilted_rotation, top_down_rotation
from primitives.motion import Limits, joint_path, line_path
from primitives.perception import Perception
from primitives.results import (
    ArmState,
    CameraMeta,
    CapturedImage,
    Descent,
    Fingertips,
    Grip,
    Located,
    Motion,
    MoveCheck,
    RobotState,
)

CallRecorder = Callable[[dict[str, Any]], None]
MIN_TRANSIT_CLEARANCE_M = 0.03  # path="transit" travels at least this far above its goal (or `clearance`, if less)
NEAR_WITHIN_M = 0.06  # locate(near=...): the match must lie this close to the point (plus twice its uncertainty)
R = TypeVar("R", Motion, MoveCheck)
ImageSink = Callable[[CapturedImage], None]


@dataclass(frozen=True)
class RoboConfig:
    """Tuning of the primitives (host side; the LLM does not see or change it)."""

    joint_speed: float = 4.0  # rad/s peak joint speed at speed=1 (hardware limit 5)
    tcp_speed: float = 0.8  # m/s peak TCP speed on straight lines at speed=1
    reach_tolerance_m: float = 0.005
    reach_tolerance_deg: float = 3.0
    settle_steps: int = 3  # extra hold steps allowed after a motion to settle
    descent_chunk_steps: int = 2  # actions per chunk during a guarded descent
    contact_lag_m: float = 0.003  # measured TCP this far above its command = contact
    held_lag_rise_m: float = 0.0008  # holding: the TCP lag rising this much over its least in a descent = contact
    grip_steps: int = 3  # actions to swing the gripper
    grip_settle_steps: int = 6  # more actions at most, until the reported value stops changing
    held_threshold: float = 0.05
    press_lag_m: float = 0.001  # before closing: measured TCP this far above its command = pressing on something
    stalled_open_value: float = 0.7  # close() read at or above this: lift 2 mm and read again (pads dragging)


_FILLER_WORDS = frozenset("a an the and or of with on in at to".split())


def _not_found_hint(text: str) -> str:
    """What to try after a description matched nothing: fewer words, taken from the text itself (trial O: "red and
    white checkered block" matched nothing where "checkered block" did). Names nothing the caller did not write."""
    words = [w for w in re.findall(r"[\w-]+", text) if w.lower() not in _FILLER_WORDS]
    tries = ([repr(" ".join(words[-2:]))] if len(words) > 2 else []) + ([repr(words[-1])] if len(words) > 1 else [])
    if not tries:
        return " (hidden? look_at it with a wrist camera or move an arm out of the head camera's view; or other words)"
    return (f" (segmentation wants a short noun phrase; a word that does not fit the object loses the match: try "
            f"{' or '.join(tries)}, with near=[x, y] to pick one)")


def _turned_note(start: FloatArray, end: FloatArray, reason: str) -> str:
    """A move without yaw or quat that turned the grasp by pi about the fingers (where the wrist could not keep it)
    says so: the same grasp, but a held object's handle or spout now points the other way (trial T)."""
    if float(start[:, 1] @ end[:, 1]) > 0.0:
        return reason
    note = "turned by pi about the fingers to reach it (the same grasp; a held object turned with it)"
    return f"{reason}; {note}" if reason else note


def _nothing_matched(reason: str) -> bool:
    """Whether a NOT FOUND reason says that no camera segmented the text at all (then other words may help; trial P:
    not when an instance was found but could not be measured, such as a held block reaching the gripper's part)."""
    return all(part.startswith("no instance of") for part in reason.split("; "))


class Robo:
    """The dual ARX X5 station. Arms are "left" and "right"; positions are env-frame metres [x, y, z].

    Frame: z up (table top z = ${table_z}), the arms face +y; the left base is at ${left_base}, the right at
    ${right_base}. Angles are radians. Every action is one ${step_ms} ms step of the task's step limit, spent only
    while something moves; reading state and images costs no step. Measured failures come back as results
    (reached=False, held=False, found=False); bad arguments raise ValueError before anything moves; when the
    episode ends, any call that would move raises EpisodeFinished.
    """

    ARMS: tuple[str, str] = ARMS
    CAMERAS: tuple[str, str, str] = CAMERAS
    OPEN: float = 1.0
    CLOSED: float = 0.0

    def __init__(
        self,
        bridge: Bridge,
        first_observation: Mapping[str, Any],
        *,
        station: Station,
        step_limit: int,
        perception: Perception | None = None,
        cancel: CancelToken | None = None,
        on_image: ImageSink | None = None,
        record_call: CallRecorder | None = None,
        config: RoboConfig = RoboConfig(),
    ) -> None:
        self._station = station
        # One kinematics model per episode: the perception's, when it comes with one.
        self._kin = perception.kinematics if perception is not None else X5Kinematics(station)
        self._perception = perception if perception is not None else Perception(station, self._kin, None)
        self._on_image = on_image
        self._record = record_call
        self._config = config
        # The command engine runs the chunks and owns the step count. An engine passed as the bridge (the episode's,
        # shared with runners that drive the station themselves) is used as it is.
        self._commands = (
            bridge if isinstance(bridge, CommandEngine)
            else CommandEngine(bridge, first_observation, station=station, step_limit=step_limit, cancel=cancel)
        )
        self._limits = Limits(
            joint_speed=np.minimum(station.x5.velocity_limits * 0.95, config.joint_speed),
            tcp_speed=config.tcp_speed,
        )
        self._lower = station.x5.lower
        self._upper = station.x5.upper
        # Where the station reports the TCP, minus where the agent's model puts the commanded joints, last seen with
        # the arm free (its joints where commanded). On a station that differs a little from the model (a real one)
        # this is a few mm even at rest; contact tests compare changes against it, not the raw difference.
        self._free_offset = {arm: self._offset_now(arm) for arm in ARMS}

    # ------------------------------------------------------------------ state (no steps)
    @property
    def TABLE_Z(self) -> float:  # noqa: N802 (a constant of the station, named as one)
        """Height z of the table top in this station (m)."""
        return float(self._station.table.top_z)

    @property
    def steps_used(self) -> int:
        """Actions sent to the station so far in this episode (including a chunk the episode ended during)."""
        return self._commands.steps_used

    @property
    def steps_left(self) -> int:
        """Actions left before the task's step limit ends the episode."""
        return self._commands.steps_left

    @property
    def instruction(self) -> str:
        """The task instruction, verbatim."""
        return self._obs.instruction

    def state(self) -> RobotState:
        """Both arms as last observed, the step count and the instruction."""
        t0 = time.perf_counter()
        result = RobotState(self.steps_used, self.steps_left, self._arm_state("left"), self._arm_state("right"),
                            self._obs.instruction)
        self._log("state", {}, result, t0, 0, host=False)
        return result

    def arm(self, arm: str) -> ArmState:
        """One arm as last observed: joints, ee pose, TCP, approach, yaw, gripper value."""
        self._check_arm(arm)
        return self._arm_state(arm)

    # ------------------------------------------------------------------ motion
    def move_to(
        self,
        arm: str,
        xyz: Sequence[float],
        *,
        yaw: float | None = None,
        tilt: float = 0.0,
        quat: Sequence[float] | None = None,
        path: str = "line",
        speed: float = 1.0,
        clearance: float = 0.08,
    ) -> Motion:
        """Move the arm's TCP (grasp centre) to xyz.

        Orientation: yaw=a gives a top-down pose (fingers pointing straight down, closing along heading a; a and
        a + pi are the same grasp, the one nearer the current wrist is used, so arm().yaw may read a +- pi);
        with yaw, tilt=t (0 .. 1.0 rad) leans the fingers t from vertical about their closing line, away from the
        arm's base: it reaches farther and higher with that line across the direction from the base (a = that
        direction + pi/2), not along it;
        quat=[qw, qx, qy, qz] gives the full ee-link orientation; with neither, the current orientation is kept, or
        where the wrist cannot keep it the same grasp turned by pi about the fingers (the start pose is not top-down:
        give a yaw).
        path="line" moves the TCP along a straight line (fails without moving if the line leaves the reach);
        path="joint" interpolates the joints (faster, curved path: lift clear of objects first).
        path="transit" rises straight up, travels (joints, or a line where the joint path would dip) and comes
        straight down: the way to carry or leave something low. It travels `clearance` m above the higher of start
        and goal, or if that is out of reach as high as reachable, never under 3 cm (or `clearance`, if less) above
        the goal (travel_z says the height). Heights are the TCP's: the fingertips hang 25 mm lower, a held object
        lower still. speed in (0, 1] scales the peak speed (1 = near the joint velocity limits).
        check_move() plans the same motion without moving.
        """
        t0 = time.perf_counter()
        targets, args = self._move_request(arm, xyz, yaw, tilt, quat, path, speed, clearance)
        start = self._tcp_frame(arm, self._cmd_q[arm])[0]
        result = self._with_orientation_hint(self._move(targets, path, speed, clearance), yaw, quat)
        if yaw is None and quat is None:
            end = self._tcp_frame(arm, self._cmd_q[arm])[0]
            result = replace(result, reason=_turned_note(start, end, result.reason))
        result = self._with_tilt_hint(result, arm, xyz, yaw, tilt)
        self._log("move_to", args, result, t0, result.steps_used)
        return result

    def check_move(
        self,
        arm: str,
        xyz: Sequence[float],
        *,
        yaw: float | None = None,
        tilt: float = 0.0,
        quat: Sequence[float] | None = None,
        path: str = "line",
        speed: float = 1.0,
        clearance: float = 0.08,
    ) -> MoveCheck:
        """Plan move_to with the same arguments without moving (no step spent): whether it is feasible, why not,
        how many steps it would take, and the lowest and highest TCP z along the path (no collision check: a joint
        path that starts low also crosses low; carry a held object with path="transit")."""
        targets, args = self._move_request(arm, xyz, yaw, tilt, quat, path, speed, clearance)
        plans, _, reason, travel = self._plan(targets, path, speed, clearance)
        if reason:
            result = self._with_orientation_hint(MoveCheck(arm, False, reason, 0), yaw, quat)
        else:
            kin = self._kin.arm(arm)
            zs = [float(self._tcp_frame(arm, self._cmd_q[arm])[1][2])]
            zs += [float(kin.fk(q, "tcp")[2, 3]) for q in plans[arm]]
            note = "" if yaw is not None or quat is not None else _turned_note(
                self._tcp_frame(arm, self._cmd_q[arm])[0], kin.fk(plans[arm][-1], "tcp")[:3, :3], "")
            result = MoveCheck(arm, True, note, len(plans[arm]), round(min(zs), 4), round(max(zs), 4),
                               round(travel.get(arm, 0.0), 4))
        result = self._with_tilt_hint(result, arm, xyz, yaw, tilt)
        self._log("check_move", args, result, time.perf_counter(), 0)
        return result

    @staticmethod
    def _with_orientation_hint(result: R, yaw: float | None, quat: Sequence[float] | None) -> R:
        """A refused move that kept the current orientation (no yaw, no quat) says that a yaw may reach it."""
        if getattr(result, "planned", getattr(result, "feasible", True)) or yaw is not None or quat is not None or "out of reach" not in result.reason:
            return result
        return replace(result, reason=result.reason + " (no yaw given: it keeps the current orientation, which may"
                                                      " not reach there; a yaw gives a top-down pose)")

    def _with_tilt_hint(self, result: R, arm: str, xyz: Sequence[float], yaw: float | None, tilt: float) -> R:
        """A refused tilted pose whose closing line points within 60 deg of the arm's base names the yaw across
        (trial O: tilt leans about the closing line, so along the direction from the base it gains no reach)."""
        if getattr(result, "planned", getattr(result, "feasible", True)) or yaw is None or not tilt:
            return result
        if "reach" not in result.reason and "no IK solution" not in result.reason:
            return result
        base = self._station.arms[arm].base_position
        toward = math.atan2(float(xyz[1]) - base[1], float(xyz[0]) - base[0])
        off = (float(yaw) - toward) % math.pi  # a yaw and yaw + pi are the same closing line
        if min(off, math.pi - off) > math.radians(60):
            return result
        across = (toward + math.pi / 2 + math.pi / 2) % math.pi - math.pi / 2  # in [-pi/2, pi/2)
        return replace(result, reason=result.reason + f" (tilt leans about the closing line, which points near the"
                                                      f" arm's base at this yaw: try yaw={across:.2f}, across it)")

    def _move_request(
        self, arm: str, xyz: Sequence[float], yaw: float | None, tilt: float, quat: Sequence[float] | None,
        path: str, speed: float, clearance: float,
    ) -> tuple[dict[str, list[FloatArray]], dict[str, Any]]:
        """move_to / check_move: the arguments checked; the goal poses by arm, and the arguments as logged."""
        self._check_arm(arm)
        targets = self._target_poses(arm, xyz, yaw, quat, tilt)
        self._check_path(path)
        self._check_clearance(clearance)
        if not (isinstance(speed, (int, float)) and 0.0 < speed <= 1.0):
            raise ValueError(f"speed must be in (0, 1], got {speed!r}")
        args = {"arm": arm, "xyz": list(map(float, xyz)), "yaw": yaw, "tilt": tilt, "quat": quat, "path": path,
                "speed": speed, "clearance": clearance}
        return {arm: targets}, args

    def move_both(
        self,
        left_xyz: Sequence[float],
        right_xyz: Sequence[float],
        *,
        left_yaw: float | None = None,
        right_yaw: float | None = None,
        left_tilt: float = 0.0,
        right_tilt: float = 0.0,
        path: str = "joint",
        speed: float = 1.0,
        clearance: float = 0.08,
    ) -> Motion:
        """Move both TCPs in one motion (same duration); yaw, tilt, path and clearance as in move_to. Orientation
        kept if no yaw."""
        t0 = time.perf_counter()
        targets = {
            "left": self._target_poses("left", left_xyz, left_yaw, None, left_tilt),
            "right": self._target_poses("right", right_xyz, right_yaw, None, right_tilt),
        }
        self._check_path(path)
        self._check_clearance(clearance)
        result = self._move(targets, path, speed, clearance)
        self._log("move_both", {"left_xyz": list(map(float, left_xyz)), "right_xyz": list(map(float, right_xyz)),
                                "left_yaw": left_yaw, "right_yaw": right_yaw, "left_tilt": left_tilt,
                                "right_tilt": right_tilt, "path": path, "speed": speed, "clearance": clearance},
                  result, t0, result.steps_used)
        return result

    def move_joints(self, arm: str, joints: Sequence[float], *, speed: float = 1.0) -> Motion:
        """Move one arm to joint angles (6 values, rad, within the joint limits) along a joint-space path."""
        t0 = time.perf_counter()
        self._check_arm(arm)
        q = self._check_joints(joints)
        goal = make_transform(*self._tcp_frame(arm, q))
        result = self._run_joint_paths({arm: q}, {arm: goal}, speed)
        self._log("move_joints", {"arm": arm, "joints": q.tolist(), "speed": speed}, result, t0, result.steps_used)
        return result

    def home(self, arms: str | Sequence[str] = ("left", "right"), *, speed: float = 1.0) -> Motion:
        """Return arms to the start pose (all joints 0). Most tasks only succeed with both arms back home.

        Each arm first rises straight up as far as it can reach (up to 10 cm), so the joint-space path home does not
        sweep through what it just placed; near the reach ceiling (TCP about 0.95 m up, pointing down) that may be
        1 cm or nothing: there, slide the open fingers out sideways clear of the object first.
        """
        t0 = time.perf_counter()
        names = (arms,) if isinstance(arms, str) else tuple(arms)
        for a in names:
            self._check_arm(a)
        if not (isinstance(speed, (int, float)) and 0.0 < speed <= 1.0):
            raise ValueError(f"speed must be in (0, 1], got {speed!r}")
        home = np.array(self._station.x5.home)
        steps = sum(self._rise_before_home(a, home, speed) for a in names)
        goals = {a: home for a in names}
        result = self._run_joint_paths(goals, {a: make_transform(*self._tcp_frame(a, home)) for a in names}, speed)
        if steps:
            result = replace(result, steps_used=result.steps_used + steps)
        self._log("home", {"arms": list(names), "speed": speed}, result, t0, result.steps_used)
        return result

    def _rise_to(self, arm: str, z: float, speed: float) -> int:
        """Lift the TCP straight up to height z (or as far toward it as a line reaches) when it is below z - 1 cm."""
        rot, tcp = self._tcp_frame(arm, self._cmd_q[arm])
        if tcp[2] >= z - 0.01:
            return 0
        for frac in (1.0, 0.6, 0.3):
            zz = float(tcp[2]) + frac * (z - float(tcp[2]))
            plan = line_path(self._kin.arm(arm), self._cmd_q[arm], make_transform(rot, (tcp[0], tcp[1], zz)),
                             self._limits, speed)
            if plan.ok:
                return self._send({arm: plan.joints}, {}, len(plan.joints))
        return 0

    def _rise_before_home(self, arm: str, home: FloatArray, speed: float) -> int:
        """Lift the TCP straight up (the highest reachable of +10, +6, +3, +2, +1 cm) before going home, wherever it is:
        an arm above its home height can still have an object between its fingers (trial P: the top block of a stack,
        swept off by the joint path home from 1.4 cm above the home height)."""
        rot, tcp = self._tcp_frame(arm, self._cmd_q[arm])
        if float(np.max(np.abs(self._cmd_q[arm] - home))) < 0.05:
            return 0
        for dz in (0.10, 0.06, 0.03, 0.02, 0.01):
            plan = line_path(self._kin.arm(arm), self._cmd_q[arm], make_transform(rot, (tcp[0], tcp[1], tcp[2] + dz)),
                             self._limits, speed)
            if plan.ok:
                return self._send({arm: plan.joints}, {}, len(plan.joints))
        return 0

    def descend(self, arm: str, *, z: float | None = None, by: float | None = None, speed: float = 0.05) -> Descent:
        """Guarded descent: lower the TCP straight down until contact, or until it reaches z (or goes down `by` m).

        Contact = the measured TCP lags its command by more than ${contact_lag_mm} mm (something blocks the stiff arm),
        or, holding an object, its lag grows 0.8 mm (the object met something and slips up in the grip); the arm
        then stops pressing. To set a held object down, aim z a few mm below the expected contact (it is
        caught within speed x 0.08 s of travel: the object slips up that far). speed is in m/s (0.005 .. 0.2).
        """
        t0 = time.perf_counter()
        self._check_arm(arm)
        if (z is None) == (by is None):
            raise ValueError("give exactly one of z (target height) or by (distance down, metres)")
        if not (isinstance(speed, (int, float)) and 0.005 <= speed <= 0.2):
            raise ValueError(f"descent speed must be within [0.005, 0.2] m/s, got {speed!r}")
        rot, start = self._tcp_frame(arm, self._cmd_q[arm])
        z_goal = float(z) if z is not None else float(start[2] - float(by))  # type: ignore[arg-type]
        if not math.isfinite(z_goal):
            raise ValueError("descent target must be finite")
        if z_goal >= start[2]:
            raise ValueError(f"descent target z={z_goal:.3f} is not below the TCP (z={start[2]:.3f})")
        result = self._guarded_line(arm, rot, start, np.array([start[0], start[1], z_goal]), speed)
        self._log("descend", {"arm": arm, "z": z, "by": by, "speed": speed}, result, t0, result.steps_used)
        return result

    def guarded_move(self, arm: str, xyz: Sequence[float], *, speed: float = 0.05) -> Descent:
        """Guarded straight move, like descend in any direction: the TCP goes toward xyz at a constant `speed`
        (m/s, 0.005 .. 0.2), orientation kept, and stops at the first contact (the measured TCP lags its command
        by more than ${contact_lag_mm} mm along the motion; the arm then stops pressing). For pushing an object sideways without
        overshooting a stop, or feeling for a surface; a free object that slides along does not count as contact.
        Result: stopped_by "contact" / "target" / "no_ik", tcp, travelled_m along the motion.
        """
        t0 = time.perf_counter()
        self._check_arm(arm)
        goal = np.asarray(xyz, dtype=float)
        if goal.shape != (3,) or not np.all(np.isfinite(goal)):
            raise ValueError(f"xyz must be 3 finite numbers, got {xyz!r}")
        if not (isinstance(speed, (int, float)) and 0.005 <= speed <= 0.2):
            raise ValueError(f"guarded move speed must be within [0.005, 0.2] m/s, got {speed!r}")
        rot, start = self._tcp_frame(arm, self._cmd_q[arm])
        if float(np.linalg.norm(goal - start)) < 1e-4:
            raise ValueError(f"xyz {list(map(float, xyz))} is where the TCP already is")
        result = self._guarded_line(arm, rot, start, goal, float(speed))
        self._log("guarded_move", {"arm": arm, "xyz": list(map(float, xyz)), "speed": speed}, result, t0,
                  result.steps_used)
        return result

    def wait(self, steps: int = 5) -> RobotState:
        """Hold still for `steps` actions (1..50), e.g. to let objects settle; returns the new state."""
        t0 = time.perf_counter()
        if not isinstance(steps, int) or not 1 <= steps <= 50:
            raise ValueError(f"steps must be an int in 1..50, got {steps!r}")
        self._send({}, {}, steps)
        result = self.state()
        self._log("wait", {"steps": steps}, result, t0, steps)
        return result

    # ------------------------------------------------------------------ gripper
    def open(self, arm: str, fraction: float = 1.0) -> Grip:
        """Open the gripper (fraction 1.0 = fully open, ${max_opening_m} m between the pads).

        Returns when the value reaches the command or stops changing (at most 9 steps); after a tight grip it can
        still be opening (0.72 seen): under 0.8, wait(3) and read arm().gripper again before moving away.
        """
        t0 = time.perf_counter()
        self._check_arm(arm)
        if not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0):
            raise ValueError(f"fraction must be within [0, 1], got {fraction!r}")
        result = self._grip(arm, float(fraction))
        self._log("open", {"arm": arm, "fraction": fraction}, result, t0, result.steps_used)
        return result

    def close(self, arm: str) -> Grip:
        """Close the gripper. held=True when an object stopped the fingers (value stays ${held_threshold} above the command).

        An arm pressing down (fingertips on the table or on an object's top) is first eased 1 mm up (one step), so
        friction cannot stall the fingers and read as a grip.
        """
        t0 = time.perf_counter()
        self._check_arm(arm)
        result = self._grip(arm, 0.0)
        self._log("close", {"arm": arm}, result, t0, result.steps_used)
        return result

    # ------------------------------------------------------------------ perception
    def locate(
        self, text: str, *, cameras: Sequence[str] | None = None, min_score: float = 0.3,
        near: Sequence[float] | None = None,
    ) -> Located:
        """Find an object by a short description ("red block", "blue cup"; extra words can lose the match) in the
        latest images.

        Uses the head camera, plus any wrist camera that also sees the object, or depth when the station sends
        it. Returns its top centre, footprint, heading and height; `method` says how it was measured: "depth";
        "head+wrist" (a wrist camera saw it too: look_at(arm, xyz) first): a box or cylinder fitted to every
        view, resting wherever it rests (on the table, another object, in a gripper), a cup by its rim and body
        (not its handle), a bottle to its neck; "head" (head camera alone: assumes it stands on the table and its
        hidden back half mirrors the front). An object held in a gripper that no camera sees whole is measured
        from the parts they see, centred between the pads. `reason` names the assumption, the support and what
        was hidden; uncertainty_xy_m / uncertainty_z_m: the true error is within twice them 9 times in 10.
        A wrist camera whose fingertips show 3 px or more off the model is corrected by them (fingertips(); reason
        says so). `cameras` restricts which cameras to use. found=False with a reason when nothing usable is seen (no
        match, segmentation down, object cut by the image border).
        near=[x, y(, z)]: of several matching objects, the measured one nearest that point in xy; found=False
        when none is within 6 cm.
        """
        t0 = time.perf_counter()
        if not isinstance(text, str) or not text.strip():
            raise ValueError("locate needs a non-empty description")
        if cameras is not None:
            for c in cameras:
                self._check_camera(c)
        if near is None:
            result = self._perception.locate(self._obs, text.strip(), cameras=cameras, min_score=min_score)
        else:
            point = np.asarray(near, dtype=float)
            if point.shape not in ((2,), (3,)) or not np.all(np.isfinite(point)):
                raise ValueError(f"near must be [x, y] or [x, y, z], got {near!r}")
            every = self._perception.locate_all(self._obs, text.strip(), cameras=cameras, min_score=min_score,
                                                max_objects=20)
            measured = [r for r in every if r.found]
            if measured:
                result = min(measured, key=lambda r: math.dist(r.xyz[:2], point[:2]))
                away = math.dist(result.xyz[:2], point[:2])
                if away > NEAR_WITHIN_M + 2 * result.uncertainty_xy_m:
                    # Trial S: near=[-0.315, -0.076] returned a block at (0.019, -0.208), unremarked.
                    result = replace(
                        result, found=False, xyz=[], footprint=[], heading=0.0, height=0.0, outline=[], held_by="",
                        tcp_offset=[], uncertainty_xy_m=0.0, uncertainty_z_m=0.0,
                        reason=f"no {text.strip()!r} within {100 * NEAR_WITHIN_M:.0f} cm of near="
                        f"{[round(float(v), 3) for v in point[:2]]}: the nearest match is at "
                        f"{[round(v, 3) for v in result.xyz[:2]]}, {100 * away:.0f} cm away (locate without near "
                        "to take it)")
            else:
                result = self._perception.locate(self._obs, text.strip(), cameras=cameras, min_score=min_score)
        if not result.found and _nothing_matched(result.reason):
            result = replace(result, reason=result.reason + _not_found_hint(text))
        self._log("locate", {"text": text, "cameras": cameras, "min_score": min_score, "near": near}, result, t0, 0)
        return result

    def locate_all(
        self, text: str, *, cameras: Sequence[str] | None = None, min_score: float = 0.3, max_objects: int = 10
    ) -> list[Located]:
        """Every object matching the description ("block"), each measured as by locate; best score first.

        An instance that was segmented but could not be measured comes last, with found=False, xyz=[] and the
        reason; [] when nothing matched (locate(text) says what to try).
        """
        t0 = time.perf_counter()
        if not isinstance(text, str) or not text.strip():
            raise ValueError("locate_all needs a non-empty description")
        if not isinstance(max_objects, int) or not 1 <= max_objects <= 20:
            raise ValueError("max_objects must be an int in 1..20")
        if cameras is not None:
            for c in cameras:
                self._check_camera(c)
        result = self._perception.locate_all(
            self._obs, text.strip(), cameras=cameras, min_score=min_score, max_objects=max_objects
        )
        self._log("locate_all", {"text": text, "cameras": cameras, "min_score": min_score,
                                 "max_objects": max_objects}, [r.xyz for r in result], t0, 0)
        return result

    def look_at(self, arm: str, xyz: Sequence[float], *, distance: float = 0.25, speed: float = 1.0) -> Motion:
        """Point the arm's wrist camera at xyz from above, so the point is at the centre of its image.

        The camera goes `distance` m (0.12 .. 0.45) from the point, above it and a little toward the robot
        (the head camera's side, turned 35 deg), looking down at it at about 70 deg, the gripper leaning 40
        deg off vertical (TCP about 0.12 m above the point at the default distance; give the next move a yaw):
        empty fingers stay out of the image centre (a held object may not), and a following locate() measures the
        object with both cameras (method "head+wrist"). Else nearby viewing directions are tried. From below the
        viewing height the TCP first rises straight up, then a joint-space path; planned=False (nothing moved) when
        no viewing pose is reachable.
        """
        t0 = time.perf_counter()
        self._check_arm(arm)
        p = np.asarray(xyz, dtype=float)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ValueError(f"xyz must be 3 finite numbers, got {xyz!r}")
        if not (isinstance(distance, (int, float)) and 0.12 <= distance <= 0.45):
            raise ValueError(f"distance must be within [0.12, 0.45] m, got {distance!r}")
        if not (isinstance(speed, (int, float)) and 0.0 < speed <= 1.0):
            raise ValueError(f"speed must be in (0, 1], got {speed!r}")
        goal = self._look_at_pose(arm, p, float(distance))
        if goal is None:
            tcp_goal = make_transform(np.eye(3), p)
            why = f"no reachable pose of {arm} looks at {p.round(3).tolist()}"
            result = self._motion_result({arm: tcp_goal}, False, why, 0)
        else:
            q, tcp_goal = goal
            # Rise straight up first from a low pose, so the joint path does not sweep through what is below.
            rose = self._rise_to(arm, float(tcp_goal[2, 3]), speed)
            result = self._run_joint_paths({arm: q}, {arm: tcp_goal}, speed)
            if rose:
                result = replace(result, steps_used=result.steps_used + rose)
        self._log("look_at", {"arm": arm, "xyz": p.tolist(), "distance": distance, "speed": speed}, result, t0,
                  result.steps_used)
        return result

    def fingertips(self, arm: str) -> Fingertips:
        """Where the arm's two fingertips show in its wrist camera's latest image, against the camera model.

        Segments "gripper finger" there (no step spent); needs the fingers within 75 deg of straight down.
        tips_px / midpoint_px: the tip ends of the pads as seen; model_tips_px / model_midpoint_px: where the
        model projects them; offset_px = midpoint_px - model_midpoint_px. shift_m = [dx, dy]: add it to
        back_project(f"cam_{arm}_wrist", pixel, z=h) to get where that point really is: best at h = z (the
        fingertips' height). One pad seen: its offset stands for both (reason says so); found=False with a reason
        when neither is.
        """
        t0 = time.perf_counter()
        self._check_arm(arm)
        per = self._perception
        result = measure_fingertips(self._obs, arm, station=self._station, kinematics=self._kin,
                                    camera=per.camera(self._obs, f"cam_{arm}_wrist"), segmentation=per.segmentation)
        self._log("fingertips", {"arm": arm}, result, t0, 0)
        return result

    def back_project(self, camera: str, pixel: Sequence[float], *, z: float | None = None) -> list[float] | None:
        """World point seen at pixel (u = column, v = row) of a camera's latest image.

        With depth from the station, the depth at that pixel is used; otherwise the ray is cut by the
        horizontal plane at height z (default: the table top). None if the ray misses.
        """
        t0 = time.perf_counter()
        self._check_camera(camera)
        if len(pixel) != 2 or not all(math.isfinite(float(v)) for v in pixel):
            raise ValueError("pixel must be [u, v] (column, row)")
        result = self._perception.back_project(self._obs, camera, (float(pixel[0]), float(pixel[1])), z)
        self._log("back_project", {"camera": camera, "pixel": list(pixel), "z": z}, result, t0, 0)
        return result

    def project(self, camera: str, xyz: Sequence[float] | Sequence[Sequence[float]]
    ) -> list[float] | list[list[float] | None] | None:
        """Pixel [u, v] at which a world point appears in the camera's latest image (inverse of back_project).

        The pixel at image array index [row, col] spans u in [col, col + 1), v in [row, row + 1). xyz may be a
        list of points (returns a list). None for a point behind the camera; [u, v] may lie outside the image.
        """
        self._check_camera(camera)
        p = np.asarray(xyz, dtype=float)
        if p.ndim not in (1, 2) or p.shape[-1] != 3 or p.size == 0 or not np.all(np.isfinite(p)):
            raise ValueError(f"xyz must be [x, y, z] or a list of them, got {xyz!r}")
        uv, dist = self._perception.camera(self._obs, camera).project(p.reshape(-1, 3))
        out = [None if d <= 0 else [round(float(a), 3), round(float(b), 3)] for (a, b), d in zip(uv, dist)]
        return out if p.ndim == 2 else out[0]

    def image(self, camera: str, *, depth: bool = False) -> np.ndarray:
        """A copy of the camera's latest image: RGB uint8 (H, W, 3); depth=True gives the depth image instead
        (float32 metres along the optical axis, (H, W); ValueError when the station sends none). For OpenCV."""
        self._check_camera(camera)
        if depth:
            if camera not in self._obs.depth:
                raise ValueError(f"the station sends no depth for {camera}")
            return np.array(self._obs.depth[camera], dtype=np.float32)
        return np.array(self._obs.images[camera], dtype=np.uint8)

    def camera_meta(self, camera: str) -> CameraMeta:
        """A camera's intrinsics, current pose and whether depth comes with its images."""
        self._check_camera(camera)
        return self._perception.camera_meta(self._obs, camera)

    def show(self, camera: str, label: str = "") -> None:
        """Capture this camera's image as it is now; you see it after the cell's text output."""
        t0 = time.perf_counter()
        self._check_camera(camera)
        if self._on_image is not None:
            self._on_image(CapturedImage(camera, self._obs.step, self._obs.images[camera], str(label)))
        self._log("show", {"camera": camera, "label": label}, None, t0, 0)

    # ------------------------------------------------------------------ internals
    def _look_at_pose(self, arm: str, point: FloatArray, distance: float) -> tuple[FloatArray, FloatArray] | None:
        """Joints and TCP pose that put `arm`'s wrist camera `distance` from `point`, looking at it (see look_at)."""
        kin = self._kin.arm(arm)
        cam_name = f"cam_{arm}_wrist"
        mount = self._station.cameras[cam_name]
        link6_from_cam = mount.parent_from_camera
        cam_from_link6 = np.linalg.inv(link6_from_cam)
        link6_from_ee = self._station.x5.link6_from_ee
        head = self._station.cameras["cam_head"].posed().position
        # The camera looks about the way the head camera does (away from it; with the gripper down, the X5's
        # wrist, joints 5 and 6 within +-90 deg, keeps its camera on the robot's side of the point), turned
        # 35 deg so that it sees a side face the head camera may not see.
        away_from_head = math.atan2(float(point[1] - head[1]), float(point[0] - head[0]))
        seed = self._cmd_q[arm]
        for pitch_deg in (70.0, 60.0, 80.0, 50.0):
            pitch = math.radians(pitch_deg)
            for turn_deg in (-35, 35, 0, -60, 60, -90, 90, -120, 120, 180):
                az = away_from_head + math.radians(turn_deg)
                fwd = np.array([math.cos(pitch) * math.cos(az), math.cos(pitch) * math.sin(az), -math.sin(pitch)])
                right = np.array([math.sin(az), -math.cos(az), 0.0])  # image right, level
                down = np.cross(fwd, right)
                world_from_cam = make_transform(np.column_stack([right, down, fwd]), point - distance * fwd)
                ee = world_from_cam @ cam_from_link6 @ link6_from_ee
                r = kin.ik(ee, seed, point="ee")
                if r.converged:
                    return r.q, kin.fk(r.q, "tcp")
        return None

    def _arm_state(self, arm: str) -> ArmState:
        pose = self._obs.ee_pose[arm]
        rot = quat_to_matrix(pose[3:])
        approach = rot[:, 0]
        tcp = pose[:3] + self._station.x5.tcp_offset * approach
        closing = rot[:, 1]
        yaw = math.atan2(float(closing[1]), float(closing[0]))
        return ArmState(
            joints=[round(float(v), 5) for v in self._obs.joints[arm]],
            ee_pose=[round(float(v), 5) for v in pose],
            tcp=[round(float(v), 5) for v in tcp],
            approach=[round(float(v), 4) for v in approach],
            yaw=round(yaw, 4),
            gripper=round(float(self._obs.gripper[arm]), 4),
        )

    def _tcp_frame(self, arm: str, q: FloatArray) -> tuple[FloatArray, FloatArray]:
        t = self._kin.arm(arm).fk(q, "tcp")
        return t[:3, :3], t[:3, 3]

    def _measured_tcp(self, arm: str) -> tuple[FloatArray, FloatArray]:
        pose = self._obs.ee_pose[arm]
        rot = quat_to_matrix(pose[3:])
        return rot, pose[:3] + self._station.x5.tcp_offset * rot[:, 0]

    def _target_poses(
        self, arm: str, xyz: Sequence[float], yaw: float | None, quat: Sequence[float] | None, tilt: float = 0.0
    ) -> list[FloatArray]:
        """Goal TCP poses in order of preference (a top-down yaw has two: the fingers are symmetric)."""
        p = np.asarray(xyz, dtype=float)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ValueError(f"xyz must be 3 finite numbers, got {xyz!r}")
        if yaw is not None and quat is not None:
            raise ValueError("give yaw or quat, not both")
        current, _ = self._tcp_frame(arm, self._cmd_q[arm])
        if not isinstance(tilt, (int, float)) or not 0.0 <= float(tilt) <= 1.0:
            raise ValueError(f"tilt must be within [0, 1.0] rad, got {tilt!r}")
        if tilt and yaw is None:
            raise ValueError("tilt needs yaw (it leans a top-down grasp)")
        if yaw is not None:
            if not isinstance(yaw, (int, float)) or not math.isfinite(float(yaw)):
                raise ValueError("yaw must be a finite number (radians)")
            outward = p[:2] - np.asarray(self._station.arms[arm].base_position[:2])
            options = [
                tilted_rotation(float(yaw), float(tilt), [outward[0], outward[1], 0.0]),
                tilted_rotation(float(yaw) + math.pi, float(tilt), [outward[0], outward[1], 0.0]),
            ]
            options.sort(key=lambda r: rotation_angle(r, current))
            return [make_transform(r, p) for r in options]
        if quat is not None:
            qv = np.asarray(quat, dtype=float)
            if qv.shape != (4,) or not np.all(np.isfinite(qv)) or np.linalg.norm(qv) < 1e-6:
                raise ValueError("quat must be 4 finite numbers [qw, qx, qy, qz]")
            return [make_transform(quat_to_matrix(qv), p)]
        # Kept: the current orientation, else the same grasp turned by pi about the fingers (the wrist may not turn
        # further that way: trial R's holding arm was refused far goals a yaw reached); fingers within 3 deg of
        # vertical may also go exactly vertical.
        options = [current, current @ np.diag([1.0, -1.0, -1.0])]
        if current[2, 0] < -math.cos(math.radians(3.0)):
            heading = math.atan2(float(current[1, 1]), float(current[0, 1]))
            options += [top_down_rotation(heading), top_down_rotation(heading + math.pi)]
        return [make_transform(r, p) for r in options]

    def _move(self, targets: dict[str, list[FloatArray]], path: str, speed: float, clearance: float = 0.08) -> Motion:
        if not (isinstance(speed, (int, float)) and 0.0 < speed <= 1.0):
            raise ValueError(f"speed must be in (0, 1], got {speed!r}")
        plans, chosen, reason, travel = self._plan(targets, path, speed, clearance)
        if reason:
            return self._motion_result({a: o[0] for a, o in targets.items()}, False, reason, 0)
        result = self._execute(plans, chosen)
        return replace(result, travel_z=[round(travel[a], 4) for a in ARMS if a in travel]) if travel else result

    def _plan(
        self, targets: dict[str, list[FloatArray]], path: str, speed: float, clearance: float
    ) -> tuple[dict[str, FloatArray], dict[str, FloatArray], str, dict[str, float]]:
        """Joint paths per arm, the chosen goal poses and the transit travel heights, or the reason no motion is
        possible (nothing moves)."""
        chosen: dict[str, FloatArray] = {}
        plans: dict[str, FloatArray] = {}
        legs: dict[str, list[FloatArray]] = {}
        travel: dict[str, float] = {}
        for arm, options in targets.items():
            reason = ""
            for goal in options:
                if path == "line":
                    plan = line_path(self._kin.arm(arm), self._cmd_q[arm], goal, self._limits, speed)
                    if plan.ok:
                        chosen[arm], plans[arm] = goal, plan.joints
                        break
                    reason = f"{arm}: {plan.reason}"
                elif path == "transit":
                    got = self._transit(arm, goal, speed, clearance)
                    if isinstance(got, str):
                        reason = f"{arm}: {got}"
                        continue
                    chosen[arm], (legs[arm], travel[arm]) = goal, got
                    break
                else:
                    r = self._kin.arm(arm).ik(goal, self._cmd_q[arm], point="tcp")
                    if r.converged:
                        chosen[arm] = goal
                        plans[arm] = joint_path(self._cmd_q[arm], r.q, self._limits, speed)
                        break
                    reason = f"{arm} target is out of reach (no IK solution within the joint limits)"
            if arm not in chosen:
                return {}, {}, reason, {}
        if legs:
            # Both arms take each leg together: up, across, down (an arm already at its travel height holds).
            last = {arm: np.asarray(self._cmd_q[arm], dtype=float)[None, :] for arm in legs}
            parts: dict[str, list[FloatArray]] = {arm: [] for arm in legs}
            for i in range(3):
                n = max(len(leg[i]) for leg in legs.values())
                for arm, leg in legs.items():
                    if len(leg[i]):
                        last[arm] = leg[i][-1:]
                    parts[arm] += [leg[i], np.repeat(last[arm], n - len(leg[i]), axis=0)]
            for arm in legs:
                plans[arm] = np.vstack(parts[arm])
        return plans, chosen, "", travel

    def _transit(
        self, arm: str, goal: FloatArray, speed: float, clearance: float
    ) -> tuple[list[FloatArray], float] | str:
        """Up, across at a travel height, down: three joint paths and the height, or why not.

        The travel height is `clearance` above the higher of start and goal where that is reachable; otherwise the
        highest reachable one, in 1 cm steps, down to MIN_TRANSIT_CLEARANCE_M (or `clearance`, if smaller) above the
        goal (so heights at or above the start come first; a start well above the goal may travel lower than it,
        never rising). Trial O: raised goals 0.4 m from the base had no reachable pose `clearance` above them.
        """
        z0 = float(self._tcp_frame(arm, self._cmd_q[arm])[1][2])
        z_goal = float(goal[2, 3])
        high = max(z0, z_goal) + clearance
        low = z_goal + min(clearance, MIN_TRANSIT_CLEARANCE_M)
        heights = [high - 0.01 * i for i in range(int((high - low) / 0.01 + 1e-6) + 1)]
        if heights[-1] - low > 1e-4:
            heights.append(low)
        first = ""
        for z in heights:
            legs = self._transit_at(arm, goal, speed, z)
            if not isinstance(legs, str):
                return legs, z
            first = first or legs
        hint = '; path="joint" does not rise first and may still reach it (check_move says how low it dips)'
        if low - z_goal > 0.015:
            # Trial Q: a raised goal near the reach ceiling was reached with clearance=0.025; the reason did not say.
            hint = (f"; a smaller clearance travels lower (clearance={low - z_goal - 0.01:.2f}: down to "
                    f"{100 * (low - z_goal - 0.01):.0f} cm above the goal)") + hint
        if len(heights) > 1:
            above = f"{100 * (low - z_goal):.0f} cm above the goal"
            return f"{first}; nor at any lower height down to z={low:.3f} ({above}){hint}"
        return first + hint

    def _transit_at(self, arm: str, goal: FloatArray, speed: float, z: float) -> list[FloatArray] | str:
        """Transit at travel height z: up (none when already there), across, down, or why not."""
        kin = self._kin.arm(arm)
        q0 = self._cmd_q[arm]
        rot0, p0 = self._tcp_frame(arm, q0)
        if z - float(p0[2]) > 0.001:  # else: already at or above the travel height, the travel leg starts here
            up = line_path(kin, q0, make_transform(rot0, (p0[0], p0[1], z)), self._limits, speed)
            if not up.ok:
                return f"cannot rise to z={z:.3f} ({up.reason})"
            up_joints = up.joints
        else:
            up_joints = np.empty((0, 6))  # already at the travel height
        above = goal.copy()
        above[2, 3] = z
        q_up = up_joints[-1] if len(up_joints) else np.asarray(q0, dtype=float)
        r = kin.ik(above, q_up, point="tcp")
        if not r.converged:
            return f"no IK solution above the target at z={z:.3f}"
        across = joint_path(q_up, r.q, self._limits, speed)
        lowest = min(float(kin.fk(q, "tcp")[2, 3]) for q in across)
        if lowest < z - 0.005:  # the joint path sags: go straight across instead
            line = line_path(kin, q_up, above, self._limits, speed)
            if not line.ok:
                return f"the travel at z={z:.3f} is not feasible ({line.reason})"
            across = line.joints
        down = line_path(kin, across[-1], goal, self._limits, speed)
        if not down.ok:
            return f"cannot come down to the target ({down.reason})"
        return [up_joints, across, down.joints]

    def _run_joint_paths(self, goals: dict[str, FloatArray], targets: dict[str, FloatArray], speed: float) -> Motion:
        if not (isinstance(speed, (int, float)) and 0.0 < speed <= 1.0):
            raise ValueError(f"speed must be in (0, 1], got {speed!r}")
        paths = {arm: joint_path(self._cmd_q[arm], q, self._limits, speed) for arm, q in goals.items()}
        return self._execute(paths, targets)

    def _execute(self, paths: dict[str, FloatArray], targets: dict[str, FloatArray]) -> Motion:
        n = max(len(p) for p in paths.values())
        padded = {arm: np.vstack([p, np.repeat(p[-1:], n - len(p), axis=0)]) for arm, p in paths.items()}
        steps = self._send(padded, {}, n)
        finals = {arm: p[-1] for arm, p in padded.items()}
        for _ in range(self._config.settle_steps):
            lag = max(float(np.max(np.abs(self._obs.joints[a] - finals[a]))) for a in finals)
            if lag < 0.01:
                break
            steps += self._send({}, {}, 1)
        for arm in finals:
            self._note_free(arm)
        return self._motion_result(targets, True, "", steps)

    def _motion_result(self, targets: dict[str, FloatArray], planned: bool, reason: str, steps: int) -> Motion:
        pos_err = 0.0
        rot_err = 0.0
        target_xyz: list[float] = []
        tcp_xyz: list[float] = []
        for arm in ARMS:
            if arm not in targets:
                continue
            _, tcp = self._measured_tcp(arm)
            # Reached: where the measured joints put the TCP by the model. The station's own ee pose may differ by
            # its model error (trial V: 3-5 mm on drawn stations, every free move "blocked?"), which no motion fixes.
            rot, at = self._tcp_frame(arm, np.asarray(self._obs.joints[arm], dtype=float))
            goal = targets[arm]
            pos_err = max(pos_err, float(np.linalg.norm(at - goal[:3, 3])))
            rot_err = max(rot_err, math.degrees(rotation_angle(rot, goal[:3, :3])))
            target_xyz += [round(float(v), 4) for v in goal[:3, 3]]
            tcp_xyz += [round(float(v), 4) for v in tcp]
        reached = planned and pos_err <= self._config.reach_tolerance_m and rot_err <= self._config.reach_tolerance_deg
        if planned and not reached and not reason:
            reason = f"stopped {1000 * pos_err:.1f} mm / {rot_err:.1f} deg from the target (blocked?)"
        return Motion(
            arm="both" if len(targets) == 2 else next(iter(targets)),
            planned=planned,
            reached=reached,
            reason=reason,
            target=target_xyz,
            tcp=tcp_xyz,
            position_error_m=round(pos_err, 5),
            orientation_error_deg=round(rot_err, 3),
            steps_used=steps,
            steps_left=self.steps_left,
        )

    def _guarded_line(self, arm: str, rot: FloatArray, start: FloatArray, goal: FloatArray, speed: float) -> Descent:
        """Move the TCP from start to goal at constant speed in small chunks, stopping when it lags its command."""
        cfg = self._config
        kin = self._kin.arm(arm)
        length = float(np.linalg.norm(goal - start))
        direction = (goal - start) / length
        per_step = speed * 0.04
        steps = 0
        done = 0.0  # distance commanded so far
        stopped_by = "target"
        # A held object that meets something slips in the grip before the arm lags 3 mm: the lag rises to the grip's
        # friction, 1.2-1.6 mm set down on the table, 2.2-2.9 mm on a block (trial O; twin, 4-6 cm cubes). In free
        # air it is steady after the first chunk, 3.7 mm per m/s of speed (rises under 0.05 mm).
        # Downward only: a held tool pushing a free object sideways (guarded_move) must not stop on its friction.
        holding = float(self._obs.gripper[arm]) > self._cmd_g[arm] + cfg.held_threshold and direction[2] < -0.9
        least_lag = math.inf  # the rise counts, not the lag: the free offset may be a mm off (noted while settling)
        while True:
            ds = [min(length, done + per_step * (i + 1)) for i in range(cfg.descent_chunk_steps)]
            qs = []
            q_prev = self._cmd_q[arm]
            for d in ds:
                r = kin.ik(make_transform(rot, start + d * direction), q_prev, point="tcp")
                if not r.converged:
                    stopped_by = "no_ik"
                    break
                qs.append(r.q)
                q_prev = r.q
            if not qs:
                break
            steps += self._send({arm: np.array(qs)}, {}, len(qs))
            done = ds[len(qs) - 1]
            _, tcp = self._measured_tcp(arm)
            lag = float(np.dot(start + done * direction - (tcp - self._free_offset[arm]), direction))
            if lag > cfg.contact_lag_m or (holding and lag - least_lag > cfg.held_lag_rise_m):
                stopped_by = "contact"
                break
            least_lag = min(least_lag, lag)
            if stopped_by == "no_ik" or done >= length - 1e-9:
                break
        if stopped_by == "contact":
            # Stop pressing: command the pose where the TCP actually is.
            _, tcp = self._measured_tcp(arm)
            r = kin.ik(make_transform(rot, tcp - self._free_offset[arm]), self._cmd_q[arm], point="tcp")
            if r.converged:
                steps += self._send({arm: r.q[None, :]}, {}, 1)
        elif self._lag_along(arm, direction) < cfg.press_lag_m:  # not pressing on anything: a free pose
            self._note_free(arm)
        _, tcp = self._measured_tcp(arm)
        return Descent(
            arm=arm,
            stopped_by=stopped_by,
            contact=stopped_by == "contact",
            tcp=[round(float(v), 4) for v in tcp],
            travelled_m=round(float(np.dot(tcp - self._free_offset[arm] - start, direction)), 4),
            steps_used=steps,
            steps_left=self.steps_left,
        )

    def _grip(self, arm: str, command: float) -> Grip:
        cfg = self._config
        already = abs(self._cmd_g[arm] - command) < 1e-6 and abs(self._obs.gripper[arm] - command) < 1e-3
        # Fingertips pressed on the table or on an object's top stall the closing fingers by friction, which read
        # like a grip (issue 17: held=True at 0.79 with nothing inside): stop pressing first.
        steps = self._stop_pressing(arm) if command < self._obs.gripper[arm] - 1e-3 else 0
        closing = command < self._obs.gripper[arm] - 1e-3
        steps += 0 if already else self._send({}, {arm: command}, cfg.grip_steps)
        steps += self._settle_gripper(arm, command)
        if closing and self._obs.gripper[arm] >= cfg.stalled_open_value:
            # Fingers stalled nearly open: a wide object, or pads dragging on a surface the arm barely presses
            # (tips 1-2 mm into the table read 0.77, held, with nothing inside: LLM trial N). Lift 2 mm and let
            # them settle again: a held object stays held, pads freed from the table close.
            lifted = self._lift_commanded(arm, 0.002)
            if lifted:
                steps += lifted + self._settle_gripper(arm, command)
        value = float(self._obs.gripper[arm])
        g = self._station.x5.gripper
        span = g.scale[1] - g.scale[0]
        # Held: the fingers stopped well short of the commanded closure (something between them); a partial
        # open with nothing inside settles at its command (issue 17: it used to report held=True).
        held = value > command + cfg.held_threshold
        # Blocked fingers: RoboDojo's rate limiter keeps the command `rate_limit` below the measured opening.
        opening = value + g.rate_limit if held else value
        width = 2.0 * (g.scale[0] + min(1.0, opening) * span)
        return Grip(arm, command, round(value, 4), held, round(width, 4), steps, self.steps_left)

    def _settle_gripper(self, arm: str, command: float) -> int:
        """Hold until the reported gripper value reaches the command or stops changing (at most grip_settle_steps)."""
        steps = 0
        previous = self._obs.gripper[arm]
        for _ in range(self._config.grip_settle_steps):
            if abs(self._obs.gripper[arm] - command) < 1e-3:
                break
            steps += self._send({}, {}, 1)
            now = self._obs.gripper[arm]
            if abs(now - previous) < 2e-3:
                break
            previous = now
        return steps

    def _lift_commanded(self, arm: str, dz: float) -> int:
        """Raise the commanded TCP dz straight up in one action (0 when IK fails there)."""
        rot, cmd = self._tcp_frame(arm, self._cmd_q[arm])
        return self._step_tcp_to(arm, rot, cmd + np.array([0.0, 0.0, dz]))

    def _step_tcp_to(self, arm: str, rot: FloatArray, position: FloatArray) -> int:
        """Command the TCP pose (rot, position) in one action: 1, or 0 (nothing sent) when IK fails there."""
        r = self._kin.arm(arm).ik(make_transform(rot, position), self._cmd_q[arm], point="tcp")
        return self._send({arm: r.q[None, :]}, {}, 1) if r.converged else 0

    def _lag_along(self, arm: str, direction: FloatArray) -> float:
        """How far the measured TCP (less the free offset) trails its command along `direction` (m)."""
        _, tcp = self._measured_tcp(arm)
        cmd = self._tcp_frame(arm, self._cmd_q[arm])[1]
        return float(np.dot(cmd - (tcp - self._free_offset[arm]), direction))

    def _offset_now(self, arm: str) -> FloatArray:
        """The reported TCP minus the modelled TCP of the commanded joints, now."""
        return self._measured_tcp(arm)[1] - self._tcp_frame(arm, self._cmd_q[arm])[1]

    def _note_free(self, arm: str) -> None:
        """The arm's joints are where they were commanded (nothing blocks it): remember the model's offset."""
        if float(np.max(np.abs(self._obs.joints[arm] - self._cmd_q[arm]))) < 0.005:
            self._free_offset[arm] = self._offset_now(arm)

    def _stop_pressing(self, arm: str) -> int:
        """When the arm presses on something (its measured TCP over `press_lag_m` above the commanded one),
        command the measured position, 1 mm higher: one action, or none when it does not press."""
        rot, cmd = self._tcp_frame(arm, self._cmd_q[arm])
        _, tcp = self._measured_tcp(arm)
        if tcp[2] - self._free_offset[arm][2] - cmd[2] <= self._config.press_lag_m:
            return 0
        return self._step_tcp_to(arm, rot, tcp - self._free_offset[arm] + np.array([0.0, 0.0, 0.001]))

    def _send(self, joint_paths: dict[str, FloatArray], grippers: dict[str, float], n: int) -> int:
        """Send n actions: arms in joint_paths follow them, others hold; grippers set as given. Returns n."""
        return self._commands.send(joint_paths, grippers, n)

    @property
    def _obs(self) -> Observation:
        """The latest observation (the command engine's)."""
        return self._commands.observation

    @property
    def _cmd_q(self) -> dict[str, FloatArray]:
        """Commanded joint targets per arm (the command engine's)."""
        return self._commands.commanded_q

    @property
    def _cmd_g(self) -> dict[str, float]:
        """Commanded gripper values per arm (the command engine's)."""
        return self._commands.commanded_g

    def _check_arm(self, arm: str) -> None:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; use 'left' or 'right'")

    def _check_camera(self, camera: str) -> None:
        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; use one of {CAMERAS}")

    def _check_path(self, path: str) -> None:
        if path not in ("line", "joint", "transit"):
            raise ValueError(f"path must be 'line', 'joint' or 'transit', got {path!r}")

    def _check_clearance(self, clearance: float) -> None:
        if not (isinstance(clearance, (int, float)) and 0.0 <= clearance <= 0.3):
            raise ValueError(f"clearance must be within [0, 0.3] m, got {clearance!r}")

    def _check_joints(self, joints: Sequence[float]) -> FloatArray:
        q = np.asarray(joints, dtype=float)
        if q.shape != (6,) or not np.all(np.isfinite(q)):
            raise ValueError(f"joints must be 6 finite numbers, got {joints!r}")
        if np.any(q < self._lower - 1e-9) or np.any(q > self._upper + 1e-9):
            raise ValueError(
                f"joints outside the limits: lower {np.round(self._lower, 3).tolist()}, "
                f"upper {np.round(self._upper, 3).tolist()}"
            )
        return q

    def _log(self, name: str, args: dict[str, Any], result: Any, t0: float, steps: int, host: bool = False) -> None:
        if self._record is None:
            return
        summary: Any
        if is_dataclass(result) and not isinstance(result, type):
            summary = {k: v for k, v in asdict(result).items() if not isinstance(v, np.ndarray)}
        else:
            summary = result
        self._record({
            "call": name,
            "args": args,
            "result": summary,
            "steps": steps,
            "step": self.steps_used,
            "elapsed_s": round(time.perf_counter() - t0, 4),
            "host": host,
        })
