"""`TwinEnv`: the env object RoboDojo hands to a policy's `deploy.py`, backed by MuJoCo instead of Isaac Sim.

Interface (RoboDojo `src/eval_client/eval_env.py`): `get_obs()`, `take_action(action)`, `is_episode_end()`,
`get_running_env_idx_list()`, `get_obs_batch(env_idx_list)`, `take_action_batch(actions, env_idx_list)`; plus
`reset(task, seed, layout_id)`, which RoboDojo's own loop does outside the policy's view.

Behaviour follows RoboDojo (numbers in `reference/robodojo.md` sections 1.5, 1.6, 4, 6, 7):
- reset: build the layout's scene, run RoboDojo's stability check (300 ticks; unstable layouts are dropped from the
  count, as RoboDojo drops unstable envs), 200 more ticks, then record the origin ee poses and the initial object
  poses and register the task's checks; the gripper command starts fully open (reported 1.0);
- one action = 10 ticks of 4 ms; arm joints interpolated from the measured joints over ticks 0..7, held over 8..9;
  the gripper target interpolated from the measured finger and rate-limited every tick to +-20 % of its range
  around the measured finger; `ee` actions through the twin's DLS IK (on failure that arm holds its command);
- after every action the reward program advances (stages, queries, transition score) and the end check runs:
  success ends at once; the step limit or a violated query ends as failure; later actions are dropped when every
  env they name has ended, and, as upstream (`take_action_batch` skips ended envs, then `ControlManager.push`
  asserts one control sequence per listed env), a batch call naming ended and running envs together raises
  AssertionError before anything moves;
- observations have the keys, dtypes, shapes and layout of RoboDojo's ObsManager; their content is the twin's:
  MuJoCo renders of stand-in assets (not Isaac's images), the ee pose of the twin's ee site with its quaternion as
  MuJoCo gives it (no sign convention imposed, as RoboDojo passes the simulator's on), the twin's physics;
  rendering happens only inside get_obs / get_obs_batch (one render of the three cameras per env per call).

The true station may differ from the agent's: `TwinConfig.station` and, per layout, `TwinConfig.station_spread`
(`pyrua_dojo.twin.station_draw`).

Privileged state (true object poses, MuJoCo model/data, the outcome record) is reachable only through
`TwinEnv.truth(env_idx)`, for tests and tools; nothing of it appears in an observation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import mujoco
import numpy as np

from calibration.station import ARMS, CAMERAS, Station
from calibration.transforms import quat_to_matrix
from pyrua_dojo.twin.control import (
    TICKS_PER_ACTION,
    check_action,
    gripper_sequence,
    interpolate,
    rate_limit,
)
from pyrua_dojo.twin.ik import ArmIk, IkSolution
from pyrua_dojo.twin.layouts import Layout
from pyrua_dojo.twin.render import CameraFrame, GLRenderer, SceneRenderer
from pyrua_dojo.twin.reward import ProgramSpec, ProgramStatus, RewardProgram, WorldState, quat_distance_deg
from pyrua_dojo.twin.scene import SceneOptions, TwinScene
from pyrua_dojo.twin.masks import FINGER_PAD_WORDS, InstanceInfo, TwinMaskOracle
from pyrua_dojo.twin.station_draw import StationSpread, draw_station
from pyrua_dojo.twin.station_truth import load_truth_station
from pyrua_dojo.twin.tasks import TwinTask, get_twin_task

DATA_FORMAT_VERSION = "v1.0"
COLLECT_FREQ = 25
STABILITY_TICKS = 300
STABILITY_WINDOW = 100
POST_SETTLE_TICKS = 200


class UnstableLayoutError(RuntimeError):
    """Every env's layout failed RoboDojo's stability check (RoboDojo's `UnStableError`): skip these layouts."""


@dataclass(frozen=True)
class TwinConfig:
    """How the twin is built. Observation flags mirror `arx_x5.yml`'s `observation.vision` (all off by default).

    station: the *true* station the twin simulates (default: its own `station_truth.yml`); it may differ from the agent's.
    station_spread: when set, each episode's true station is drawn around `station` by
        `pyrua_dojo.twin.station_draw.draw_station(seed, layout_id, station_spread)` (an unknown station); None
        simulates `station` itself.
    segmentation: render instance masks with every observation and keep them in a per-env MaskOracle.
    markers: visual-only mocap spheres (for camera tests), placed with `truth(i).set_marker`.
    """

    station: Station | None = None
    station_spread: StationSpread | None = None
    num_envs: int = 1
    depth: bool = False
    approximate_depth: bool = False
    intrinsic_matrix: bool = False
    extrinsic_matrix: bool = False
    shape: bool = True
    segmentation: bool = False
    mask_capacity: int = 64
    shadows: bool = False
    substeps: int = 2
    markers: int = 0
    stability_check: bool = True

    def __post_init__(self) -> None:
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if self.mask_capacity < 1:
            raise ValueError(f"mask_capacity must be >= 1, got {self.mask_capacity}")


@dataclass(frozen=True)
class EpisodeOutcome:
    """How one env's episode went (measured by the twin; never shown to the agent).

    score: RoboDojo's episode score in 0..1 (1.0 on success, else the gated process tier / 100).
    failure: None, "step limit", "query violated: ...", or "unstable layout".
    """

    task: str
    seed: int
    layout_id: int
    env_idx: int
    instruction: str
    finished: bool
    success: bool
    score: float
    process_score: float
    steps: int
    step_limit: int
    stages_done: int
    stages_total: int
    failure: str | None
    unstable: bool = False

    def record_into(self, writer: Any) -> Any:
        """Book this episode into a `pyrua_dojo.harness.result_files.ResultWriter` (one `details` entry)."""
        if self.unstable:
            raise ValueError("an unstable layout is not an episode; RoboDojo drops it from the count")
        if not self.finished:
            raise ValueError("the episode has not ended yet")
        return writer.record(self.layout_id, self.success, self.score)


@dataclass
class _Slot:
    """One env's episode state (mutable; owned by its TwinEnv)."""

    env_idx: int
    task: TwinTask
    layout: Layout
    station: Station
    scene: TwinScene
    data: mujoco.MjData
    ik: ArmIk
    renderer: SceneRenderer | None
    program: RewardProgram
    initial_objects: dict[str, np.ndarray]
    origin_ee: dict[str, np.ndarray]
    arm_cmd: dict[str, np.ndarray]
    finger_cmd: dict[str, float]
    oracle: TwinMaskOracle
    steps: int = 0
    end: bool = False
    success: bool = False
    failure: str | None = None
    unstable: bool = False
    last_ik: dict[str, IkSolution] = field(default_factory=dict)


class TwinEnv:
    """A MuJoCo stand-in for RoboDojo's `EvalEnv` (see module docstring). Not thread-safe: one caller at a time."""

    def __init__(self, config: TwinConfig | None = None, **overrides: Any) -> None:
        cfg = config or TwinConfig()
        if overrides:
            cfg = replace(cfg, **overrides)
        self.config = cfg
        self.station: Station = cfg.station if cfg.station is not None else load_truth_station()
        self._slots: list[_Slot | None] = [None] * cfg.num_envs
        self._gl: GLRenderer | None = None
        self._task: TwinTask | None = None
        self._seed: int | None = None
        g = self.station.x5.gripper
        self._scale = (float(g.scale[0]), float(g.scale[1]))
        self._cams = [self.station.cameras[c] for c in CAMERAS]

    # ----------------------------------------------------------------------------------------------- properties

    @property
    def num_envs(self) -> int:
        return self.config.num_envs

    @property
    def task(self) -> str | None:
        return None if self._task is None else self._task.name

    @property
    def step_lim(self) -> int:
        """RoboDojo's per-task step limit (what `EvalEnv.step_lim` holds)."""
        return self._require_task().step_limit

    def _require_task(self) -> TwinTask:
        if self._task is None:
            raise RuntimeError("no episode: call reset(task, seed, layout_id) first")
        return self._task

    def _slot(self, env_idx: int) -> _Slot:
        self._require_task()
        if isinstance(env_idx, bool) or not isinstance(env_idx, (int, np.integer)):
            raise TypeError(f"env_idx must be an int, got {type(env_idx)}")
        if not 0 <= int(env_idx) < self.num_envs:
            raise IndexError(f"env_idx {env_idx} out of range 0..{self.num_envs - 1}")
        slot = self._slots[int(env_idx)]
        if slot is None:
            raise RuntimeError(f"env {env_idx} has no layout in this batch")
        return slot

    # ------------------------------------------------------------------------------------------------ reset

    def reset(self, task: str, seed: int = 0, layout_id: int | Sequence[int | None] = 0) -> None:
        """Start episodes of `task`: layout `layout_id` of `seed` (a sequence gives one id per env; None leaves an
        env empty and ended). Raises UnstableLayoutError if every layout fails the stability check."""
        spec = get_twin_task(task)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        ids = [layout_id] if isinstance(layout_id, (int, np.integer)) else list(layout_id)
        if not ids or len(ids) > self.num_envs:
            raise ValueError(f"give 1..{self.num_envs} layout ids, got {len(ids)}")
        ids += [None] * (self.num_envs - len(ids))
        for lid in ids:
            if lid is not None and not 0 <= int(lid) < spec.episodes_per_seed:
                raise ValueError(f"{task}: layout_id must be in 0..{spec.episodes_per_seed - 1}, got {lid}")
        layouts = [None if lid is None else spec.layout(self.station, int(seed), int(lid)) for lid in ids]
        self._release_slots()
        self._task = spec
        self._seed = int(seed)
        for i, layout in enumerate(layouts):
            self._slots[i] = None if layout is None else self._start(i, spec, layout)
        live = [s for s in self._slots if s is not None]
        if live and all(s.unstable for s in live):
            raise UnstableLayoutError(
                f"{task} seed {seed}: unstable layout(s) {[s.layout.layout_id for s in live]}; RoboDojo skips them"
            )

    def _start(self, env_idx: int, spec: TwinTask, layout: Layout) -> _Slot:
        options = SceneOptions(substeps=self.config.substeps, markers=self.config.markers)
        spread = self.config.station_spread
        station = (
            self.station if spread is None else draw_station(layout.seed, layout.layout_id, spread, self.station)[0]
        )
        scene = TwinScene(station, layout.objects, options)
        data = scene.make_data()
        arm_cmd = {a: data.qpos[scene.arms[a].qpos].copy() for a in ARMS}
        finger_cmd = {a: self._scale[1] for a in ARMS}
        slot = _Slot(
            env_idx=env_idx,
            task=spec,
            layout=layout,
            station=station,
            scene=scene,
            data=data,
            ik=ArmIk(scene),
            renderer=None,
            program=RewardProgram(ProgramSpec(stages=())),
            initial_objects={},
            origin_ee={},
            arm_cmd=arm_cmd,
            finger_cmd=finger_cmd,
            oracle=TwinMaskOracle(self.config.mask_capacity),
        )
        unstable = self.config.stability_check and not self._stability_check(slot)
        for _ in range(POST_SETTLE_TICKS):
            self._tick(slot, arm_cmd, finger_cmd)
        mujoco.mj_forward(scene.model, data)
        slot.origin_ee = {a: self._ee_pose(slot, a) for a in ARMS}
        slot.initial_objects = self._object_poses(slot)
        slot.arm_cmd = {a: data.qpos[scene.arms[a].qpos].copy() for a in ARMS}
        slot.finger_cmd = {a: self._scale[1] for a in ARMS}
        slot.program = RewardProgram(spec.program(layout, self._world_state(slot)))
        if unstable:
            slot.unstable = True
            slot.end = True
            slot.failure = "unstable layout"
        return slot

    def _stability_check(self, slot: _Slot) -> bool:
        """RoboDojo's `check_layout_stability`: over 300 ticks no object moves > 4 cm on any axis or 30 deg from its
        first pose, nor > 4 cm / 10 deg over the last 100 ticks, nor sinks below the table top - 5 cm."""
        floor_z = self.station.table.top_z - 0.05
        first: dict[str, np.ndarray] = {}
        watched = [lb for lb, o in slot.scene.objects.items() if o.check_stable]  # fixtures never move
        history: dict[str, list[np.ndarray]] = {lb: [] for lb in watched}
        stable = set(watched)
        hold_arm = {a: slot.arm_cmd[a].copy() for a in ARMS}
        hold_finger = dict(slot.finger_cmd)

        def ok(prev: np.ndarray, cur: np.ndarray, angle: float) -> bool:
            if quat_distance_deg(prev[3:], cur[3:]) > angle:
                return False
            if np.any(np.abs(cur[:3] - prev[:3]) > 0.04):
                return False
            return bool(cur[2] >= floor_z)

        for step in range(STABILITY_TICKS):
            self._tick(slot, hold_arm, hold_finger)
            poses = self._object_poses(slot)
            for label in list(stable):
                pose = poses[label]
                if step == 0:
                    first[label] = pose
                    continue
                if not ok(first[label], pose, 30.0):
                    stable.discard(label)
                history[label].append(pose)
            if step >= STABILITY_TICKS - STABILITY_WINDOW:
                for label in list(stable):
                    hist = history[label]
                    if not ok(hist[STABILITY_TICKS - STABILITY_WINDOW - 1], hist[-1], 10.0):
                        stable.discard(label)
        return len(stable) == len(watched)

    def _release_slots(self) -> None:
        for i, slot in enumerate(self._slots):
            if slot is not None and slot.renderer is not None:
                slot.renderer.close()
            self._slots[i] = None

    def close(self) -> None:
        """Free the GL context and per-env render contexts."""
        self._release_slots()
        if self._gl is not None:
            self._gl.close()
            self._gl = None

    def __enter__(self) -> TwinEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------------- physics

    def _tick(self, slot: _Slot, arm_cmd: Mapping[str, np.ndarray], finger_cmd: Mapping[str, float]) -> None:
        """One 4 ms RoboDojo physics step: set the targets, run the MuJoCo substeps, enforce the velocity limit."""
        m, d, sc = slot.scene.model, slot.data, slot.scene
        for arm in ARMS:
            idx = sc.arms[arm]
            d.ctrl[idx.actuators] = arm_cmd[arm]
            d.ctrl[idx.finger_actuators] = finger_cmd[arm]
        dofs, qadr, vmax, dt = sc.arm_dofs, sc.arm_qpos, sc.velocity_limits, m.opt.timestep
        for _ in range(sc.options.substeps):
            mujoco.mj_step(m, d)
            v = d.qvel[dofs]
            if np.any(np.abs(v) > vmax):
                # Joint velocity limit (PhysX `max_joint_velocity`): redo the position update with the clamped
                # velocity (qpos += dt * qvel is the last thing mj_step integrates for hinge joints).
                clamped = np.clip(v, -vmax, vmax)
                d.qpos[qadr] -= (v - clamped) * dt
                d.qvel[dofs] = clamped

    def _measured_finger(self, slot: _Slot, arm: str) -> float:
        return float(slot.data.qpos[slot.scene.arms[arm].finger_qpos[0]])

    def _run_action(self, slot: _Slot, kind: str, values: Mapping[str, np.ndarray]) -> None:
        d, sc = slot.data, slot.scene
        s0, s1 = self._scale
        arm_seq: dict[str, np.ndarray | None] = {}
        grip_seq: dict[str, np.ndarray] = {}
        slot.last_ik = {}
        for arm in ARMS:
            measured = d.qpos[sc.arms[arm].qpos].copy()
            if kind == "joint":
                target: np.ndarray | None = values[f"{arm}_arm_joint_state"]
            else:
                sol = slot.ik.solve(arm, values[f"{arm}_ee_pose"], measured)
                slot.last_ik[arm] = sol
                target = sol.q if sol.success else None
            arm_seq[arm] = None if target is None else interpolate(measured, target, TICKS_PER_ACTION)
            g = float(np.clip(values[f"{arm}_ee_joint_state"][0], 0.0, 1.0))
            finger_target = g * (s1 - s0) + s0
            grip_seq[arm] = gripper_sequence(self._measured_finger(slot, arm), finger_target, self._scale)
        for i in range(TICKS_PER_ACTION):
            for arm in ARMS:
                seq = arm_seq[arm]
                if seq is not None:
                    slot.arm_cmd[arm] = seq[i]
                slot.finger_cmd[arm] = rate_limit(
                    float(grip_seq[arm][i]), self._measured_finger(slot, arm), self._scale,
                    self.station.x5.gripper.rate_limit,
                )
            self._tick(slot, slot.arm_cmd, slot.finger_cmd)
        mujoco.mj_forward(slot.scene.model, slot.data)

    # ---------------------------------------------------------------------------------------------- actions

    def take_action(self, action: Mapping[str, Any]) -> None:
        """Execute one action on env 0 (RoboDojo's `take_action`)."""
        self.take_action_batch([action], env_idx_list=[0])

    def take_action_batch(self, actions_list: Sequence[Mapping[str, Any]], env_idx_list: Sequence[int] | None = None) -> None:
        """Execute one action per listed env. Every action is validated before any runs. If every listed env has
        ended, the actions are dropped; if ended and running envs are listed together, AssertionError (upstream's
        `ControlManager.push` length check) and nothing runs."""
        self._require_task()
        idx = list(range(self.num_envs)) if env_idx_list is None else [int(i) for i in env_idx_list]
        if len(actions_list) != len(idx):
            raise ValueError(f"got {len(actions_list)} actions for {len(idx)} envs")
        if len(set(idx)) != len(idx):
            raise ValueError(f"env_idx_list has duplicates: {idx}")
        checked = [check_action(a) for a in actions_list]
        slots = [self._slot(i) for i in idx]
        live = [s for s in slots if not (s.end or s.steps >= s.task.step_limit)]
        if live and len(live) != len(slots):
            raise AssertionError(f"[ERROR] Mismatching Input List Len: {len(slots)} != {len(live)}")
        for slot, (kind, values) in zip(slots, checked):
            if slot.end or slot.steps >= slot.task.step_limit:
                continue
            slot.steps += 1
            self._run_action(slot, kind, values)
            slot.program.step(self._world_state(slot))
            self._end_check(slot)

    def _end_check(self, slot: _Slot) -> None:
        if slot.end:
            return
        if slot.program.reward > 1 - 1e-3:
            slot.end, slot.success = True, True
        elif slot.steps >= slot.task.step_limit:
            slot.end, slot.success, slot.failure = True, False, "step limit"
        elif slot.program.failed:
            slot.end, slot.success = True, False
            slot.failure = slot.program.status().failure

    def is_episode_end(self) -> bool:
        """True once every env has ended (RoboDojo's `is_episode_end`)."""
        self._require_task()
        return all(s is None or s.end for s in self._slots)

    def get_running_env_idx_list(self) -> list[int]:
        self._require_task()
        return [i for i, s in enumerate(self._slots) if s is not None and not s.end]

    # ----------------------------------------------------------------------------------------- observations

    def get_obs(self) -> dict[str, Any]:
        """The observation of env 0 (RoboDojo's `get_obs`)."""
        return self.get_obs_batch(env_idx_list=[0])[0]

    def get_obs_batch(self, env_idx_list: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """One observation per listed env, each with its `env_idx`; renders the three cameras of each."""
        self._require_task()
        idx = list(range(self.num_envs)) if env_idx_list is None else [int(i) for i in env_idx_list]
        return [self._observe(self._slot(i)) for i in idx]

    def _renderer(self, slot: _Slot) -> SceneRenderer:
        if self._gl is None:
            w = max(c.intrinsics.width for c in self._cams)
            h = max(c.intrinsics.height for c in self._cams)
            self._gl = GLRenderer(w, h)
        if slot.renderer is None:
            slot.renderer = self._gl.scene_renderer(slot.scene.model, shadows=self.config.shadows)
        return slot.renderer

    def _observe(self, slot: _Slot) -> dict[str, Any]:
        cfg = self.config
        sc, d = slot.scene, slot.data
        want_depth = cfg.depth or cfg.approximate_depth
        cams = [(sc.cameras[c.name], c.intrinsics.width, c.intrinsics.height) for c in self._cams]
        frames = self._renderer(slot).render(d, cams, depth=want_depth, segmentation=cfg.segmentation)
        vision: dict[str, Any] = {}
        for mount, frame in zip(self._cams, frames):
            cam: dict[str, Any] = {"color": frame.color}
            if cfg.shape:
                cam["shape"] = frame.color.shape
            if want_depth and frame.depth is not None:
                if cfg.approximate_depth:
                    cam["approximate_depth"] = np.clip(frame.depth * 1000, 0, 65535).astype(np.uint16)
                if cfg.depth:
                    cam["depth"] = frame.depth.astype(np.float32)
            if cfg.intrinsic_matrix:
                cam["intrinsic_matrix"] = mount.intrinsics.matrix.astype(np.float64)
            if cfg.extrinsic_matrix:
                cam["extrinsic_matrix"] = self._camera_extrinsic(slot, mount.name)
            vision[mount.name] = cam
            if cfg.segmentation and frame.segmentation is not None:
                self._store_masks(slot, frame, mount.name)
        state: dict[str, Any] = {}
        action: dict[str, Any] = {}
        for arm in ARMS:
            joints = d.qpos[sc.arms[arm].qpos].astype(np.float32)
            state[f"{arm}_arm_joint_state"] = joints
            action[f"{arm}_arm_joint_state"] = joints.copy()
            state[f"{arm}_ee_pose"] = self._ee_pose(slot, arm).astype(np.float32)
        s0, s1 = self._scale
        for arm in ARMS:
            g = (slot.finger_cmd[arm] - s0) / (s1 - s0)
            action[f"{arm}_ee_joint_state"] = [float(g)]
            state[f"{arm}_ee_joint_state"] = [float(g)]
        return {
            "vision": vision,
            "state": state,
            "action": action,
            "data_format_version": DATA_FORMAT_VERSION,
            "additional_info": {"frequency": COLLECT_FREQ},
            "instruction": slot.layout.instruction,
            "env_idx": slot.env_idx,
        }

    def _camera_extrinsic(self, slot: _Slot, name: str) -> np.ndarray:
        """Camera-to-world 4x4 in USD axes (MuJoCo cameras share them); the twin's env origin is the world origin."""
        cid = slot.scene.cameras[name]
        t = np.eye(4, dtype=np.float64)
        t[:3, :3] = slot.data.cam_xmat[cid].reshape(3, 3)
        t[:3, 3] = slot.data.cam_xpos[cid]
        return t

    def _store_masks(self, slot: _Slot, frame: CameraFrame, camera: str) -> None:
        assert frame.segmentation is not None
        seg = frame.segmentation
        n_geom = slot.scene.model.ngeom
        lut = np.zeros(n_geom + 1, dtype=np.uint16)
        infos: list[InstanceInfo] = []
        for k, obj in enumerate(slot.scene.objects.values(), start=1):
            lut[np.asarray(obj.geoms) + 1] = k
            # The instruction names objects by their description strings ("remote control"): their words count.
            infos.append(InstanceInfo(obj.label, frozenset(obj.spec.words) | frozenset(obj.spec.descriptions)))
        # The gripper finger pads are segmentable too ("gripper finger", "fingertip"), one instance per pad.
        pads = self._finger_pads(slot)
        for k, (name, gid) in enumerate(pads, start=len(infos) + 1):
            lut[gid + 1] = k
            infos.append(InstanceInfo(name, FINGER_PAD_WORDS))
        ids = lut[seg + 1]
        hw = frame.color.shape[:2]
        areas = self._silhouette_areas(slot, camera, hw) + self._pad_silhouette_areas(slot, camera, hw, pads)
        slot.oracle.add(frame.color, ids, infos, areas)

    @staticmethod
    def _finger_pads(slot: _Slot) -> list[tuple[str, int]]:
        """(instance name, geom id) of each arm's two finger pads."""
        model = slot.scene.model
        out = []
        for arm in ARMS:
            for side in ("a", "b"):
                name = f"{arm}_finger_{side}_pad"
                out.append((name, int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name))))
        return out

    def _pad_silhouette_areas(
        self, slot: _Slot, camera: str, hw: tuple[int, int], pads: Sequence[tuple[str, int]]
    ) -> list[float]:
        """Per finger pad, the pixel area its box would cover unoccluded (as `_silhouette_areas` for objects)."""
        d, m = slot.data, slot.scene.model
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
        return [
            self._hull_area(slot, camera, hw, (signs * m.geom_size[gid]) @ d.geom_xmat[gid].reshape(3, 3).T
                            + d.geom_xpos[gid])
            for _, gid in pads
        ]

    def _hull_area(self, slot: _Slot, camera: str, hw: tuple[int, int], corners: np.ndarray) -> float:
        """The image area (px, clipped to the image) of the convex hull of world points; 0 if one is behind."""
        cid = slot.scene.cameras[camera]
        rot, pos = slot.data.cam_xmat[cid].reshape(3, 3), slot.data.cam_xpos[cid]
        k = slot.station.cameras[camera].intrinsics
        h, w = hw
        local = (corners - pos) @ rot  # MuJoCo camera axes: x right, y up, looking along -z
        depth = -local[:, 2]
        if np.any(depth <= 1e-3):
            return 0.0
        uv = np.stack([k.cx + k.fx * local[:, 0] / depth, k.cy - k.fy * local[:, 1] / depth], axis=1)
        hull = cv2.convexHull(uv.astype(np.float32))
        frame = np.array([[0, 0], [w, 0], [w, h], [0, h]], dtype=np.float32)
        area, _ = cv2.intersectConvexConvex(hull, frame)
        return float(area)

    def _silhouette_areas(self, slot: _Slot, camera: str, hw: tuple[int, int]) -> list[float]:
        """Per object, the pixel area its bounding box would cover in `camera` with nothing in front of it (the
        convex hull of the 8 projected corners, clipped to the image); 0 when a corner is behind the camera.
        Visible pixels / this area is how much of the in-frame object is not hidden (for the segmentation noise);
        for shapes that do not fill their box the hull overstates the silhouette, so they read as partly hidden."""
        sc, d = slot.scene, slot.data
        cid = sc.cameras[camera]
        rot, pos = d.cam_xmat[cid].reshape(3, 3), d.cam_xpos[cid]
        k = slot.station.cameras[camera].intrinsics
        h, w = hw
        frame = np.array([[0, 0], [w, 0], [w, h], [0, h]], dtype=np.float32)
        out: list[float] = []
        poses = self._object_poses(slot)  # fixtures have no free joint: their pose is their body's
        for obj in sc.objects.values():
            pose = poses[obj.label]
            corners = obj.spec.bbox_vertices @ quat_to_matrix(pose[3:]).T + pose[:3]
            local = (corners - pos) @ rot  # MuJoCo camera axes: x right, y up, looking along -z
            depth = -local[:, 2]
            if np.any(depth <= 1e-3):
                out.append(0.0)
                continue
            uv = np.stack([k.cx + k.fx * local[:, 0] / depth, k.cy - k.fy * local[:, 1] / depth], axis=1)
            hull = cv2.convexHull(uv.astype(np.float32))
            area, _ = cv2.intersectConvexConvex(hull, frame)
            out.append(float(area))
        return out

    # ------------------------------------------------------------------------------------------ ground truth

    def _ee_pose(self, slot: _Slot, arm: str) -> np.ndarray:
        site = slot.scene.arms[arm].ee_site
        q = np.empty(4)
        mujoco.mju_mat2Quat(q, slot.data.site_xmat[site])  # as the simulator gives it: no sign convention imposed
        return np.concatenate([slot.data.site_xpos[site], q])

    def _object_poses(self, slot: _Slot) -> dict[str, np.ndarray]:
        d = slot.data
        out = {}
        for lb, o in slot.scene.objects.items():
            if o.static:  # a fixture's pose is its body's (fixed) world pose
                out[lb] = np.concatenate([d.xpos[o.body], d.xquat[o.body]])
            else:
                out[lb] = d.qpos[o.qpos : o.qpos + 7].copy()
        return out

    def _world_state(self, slot: _Slot) -> WorldState:
        s0, s1 = self._scale
        d, sc = slot.data, slot.scene
        grip = {a: (float(np.mean(d.qpos[sc.arms[a].finger_qpos])) - s0) / (s1 - s0) for a in ARMS}
        return WorldState(
            objects=self._object_poses(slot),
            initial_objects=slot.initial_objects,
            bboxes=sc.bboxes,
            ee={a: self._ee_pose(slot, a) for a in ARMS},
            origin_ee=slot.origin_ee,
            gripper_open=grip,
            points=sc.points,
            static=sc.static_labels,
        )

    def truth(self, env_idx: int = 0) -> TwinTruth:
        """Privileged access to env `env_idx` for tests and tools (never hand this to an agent)."""
        return TwinTruth(self, self._slot(env_idx))


class TwinTruth:
    """Ground truth of one twin env: object poses, MuJoCo model/data, the outcome record, scene editing for tests."""

    def __init__(self, env: TwinEnv, slot: _Slot) -> None:
        self._env = env
        self._slot = slot

    @property
    def model(self) -> mujoco.MjModel:
        return self._slot.scene.model

    @property
    def data(self) -> mujoco.MjData:
        return self._slot.data

    @property
    def scene(self) -> TwinScene:
        return self._slot.scene

    @property
    def layout(self) -> Layout:
        return self._slot.layout

    @property
    def station(self) -> Station:
        """The station this episode's twin simulates (drawn per layout when `TwinConfig.station_spread` is set)."""
        return self._slot.station

    @property
    def mask_oracle(self) -> TwinMaskOracle:
        """This env's MaskOracle (filled only when the env renders with segmentation on)."""
        return self._slot.oracle

    @property
    def last_ik(self) -> Mapping[str, IkSolution]:
        """The IK solutions of the last `ee` action, per arm."""
        return dict(self._slot.last_ik)

    def object_poses(self) -> dict[str, np.ndarray]:
        """label -> true pose [x, y, z, qw, qx, qy, qz] in the env frame."""
        return self._env._object_poses(self._slot)

    def initial_object_poses(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self._slot.initial_objects.items()}

    def ee_pose(self, arm: str) -> np.ndarray:
        return self._env._ee_pose(self._slot, arm)

    def origin_ee_pose(self, arm: str) -> np.ndarray:
        return self._slot.origin_ee[arm].copy()

    def world_state(self) -> WorldState:
        return self._env._world_state(self._slot)

    def program_status(self) -> ProgramStatus:
        """Stages consumed, query counts, score tier and reward of the running reward program."""
        return self._slot.program.status()

    @property
    def program_spec(self) -> ProgramSpec:
        """The checks registered for this episode (stages, queries, score)."""
        return self._slot.program.spec

    def outcome(self) -> EpisodeOutcome:
        s = self._slot
        status = s.program.status()
        process = s.program.process_score(s.success)
        score = 1.0 if s.success else process / 100.0
        return EpisodeOutcome(
            task=s.task.name,
            seed=s.layout.seed,
            layout_id=s.layout.layout_id,
            env_idx=s.env_idx,
            instruction=s.layout.instruction,
            finished=s.end,
            success=s.success,
            score=score,
            process_score=process,
            steps=s.steps,
            step_limit=s.task.step_limit,
            stages_done=status.stages_done,
            stages_total=status.stages_total,
            failure=s.failure,
            unstable=s.unstable,
        )

    def set_object_pose(self, label: str, pose: Sequence[float]) -> None:
        """Teleport an object (zero velocity) - for constructed test scenes."""
        obj = self._slot.scene.objects[label]
        if obj.static:
            raise ValueError(f"{label} is a fixture (welded to the world); it cannot be moved")
        p = np.asarray(pose, dtype=float)
        if p.shape != (7,):
            raise ValueError(f"pose must be [x, y, z, qw, qx, qy, qz], got shape {p.shape}")
        d = self._slot.data
        d.qpos[obj.qpos : obj.qpos + 3] = p[:3]
        d.qpos[obj.qpos + 3 : obj.qpos + 7] = p[3:] / np.linalg.norm(p[3:])
        d.qvel[obj.dof : obj.dof + 6] = 0.0
        mujoco.mj_forward(self._slot.scene.model, d)

    def set_marker(self, index: int, position: Sequence[float]) -> None:
        """Move visual marker `index` (TwinConfig.markers) to a world point."""
        sc = self._slot.scene
        if not 0 <= index < len(sc.markers):
            raise IndexError(f"marker {index} out of range (the scene has {len(sc.markers)})")
        self._slot.data.mocap_pos[sc.markers[index]] = np.asarray(position, dtype=float)
        mujoco.mj_forward(sc.model, self._slot.data)

    def marker_geom(self, index: int) -> int:
        return self._slot.scene.marker_geoms[index]

