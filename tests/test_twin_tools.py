"""sweep_blocks (+ `_random`) and store_tools_in_toolbox on the twin.

sweep: a truth-driven script (tests only) sweeps for real. Two "ghost hands" stand in for the arms: one holds the
dustpan still, the other steers the broom, each by a wrench (a force at the centre of mass and a torque) recomputed
before every action; the broom is put down behind a block (the only teleport, of the broom alone), then driven
along the table, and MuJoCo's contacts push the blocks, over the pan's lip and onto its floor. The check must fire
with score 1 with every block resting on the pan's floor; near misses, one per predicate kind, must not fire.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import mujoco
import numpy as np
import pytest

from calibration.transforms import quat_multiply, quat_to_matrix
from pyrua_dojo.twin import TwinEnv, get_twin_task
from pyrua_dojo.twin import objects_tools as T
from pyrua_dojo.twin.reward import WorldState
from pyrua_dojo.twin.tasks_tools import TOOLS_ROWS, sweep_labels
from tests.support.twin_tasks import (
    STATION,
    TOP,
    eval_trivial_program,
    stated_facts,
    sweep_layouts,
    with_pose,
)
from tests.support.twin_tasks import hold as hold_action

SWEEP = ("sweep_blocks", "sweep_blocks_random")
DT = 0.04  # one action: 10 ticks of 4 ms


def yaw_of(q: Any) -> float:
    r = quat_to_matrix(np.asarray(q, dtype=float))
    return math.atan2(r[1, 0], r[0, 0])


def yq(angle: float) -> np.ndarray:
    return np.array([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)])


def stage_holds(env: TwinEnv, state: WorldState) -> bool:
    return all(p(state) for p in env.truth().program_spec.stages[0])


def touching_table(truth: Any, label: str) -> bool:
    """Whether any geom of the object is in contact with the table now."""
    m, d = truth.model, truth.data
    table = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table")
    body = truth.scene.objects[label].body
    return any(table in (c.geom1, c.geom2) and body in (m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2])
               for c in d.contact[: d.ncon])


# --------------------------------------------------------------------------------------------- the ghost hands


class GhostHands:
    """Hands standing in for the arms: each holds one free object with a wrench recomputed before every action,
    steering it in x, y and yaw and keeping it level; its height is left to gravity and contact."""

    def __init__(self, env: TwinEnv) -> None:
        self.env, self.truth = env, env.truth()
        self.targets: dict[str, tuple[np.ndarray, float, np.ndarray]] = {}  # label -> (xy, yaw, velocity)
        self.hold = hold_action(env)

    def grip(self, label: str) -> None:
        p = self.truth.object_poses()[label]
        self.targets[label] = (p[:2].copy(), yaw_of(p[3:]), np.zeros(2))

    def release(self, label: str) -> None:
        self.targets.pop(label, None)
        self.truth.data.xfrc_applied[self.truth.scene.objects[label].body] = 0.0

    def _wrench(self, label: str) -> None:
        m, d = self.truth.model, self.truth.data
        o = self.truth.scene.objects[label]
        xy, yaw, vd = self.targets[label]
        mass, inertia = float(m.body_mass[o.body]), m.body_inertia[o.body]
        p, v = d.qpos[o.qpos : o.qpos + 7], d.qvel[o.dof : o.dof + 6]
        rot = quat_to_matrix(p[3:])
        f = np.zeros(3)
        f[:2] = mass * (150.0 * (xy - p[:2]) + 20.0 * (vd - v[:2]))
        if np.linalg.norm(vd) > 1e-9:  # feed-forward: the sliding friction of the broom itself
            f[:2] += mass * 9.81 * vd / np.linalg.norm(vd)
        q_err = np.asarray(quat_multiply(yq(yaw), [p[3], -p[4], -p[5], -p[6]]))
        if q_err[0] < 0:
            q_err = -q_err
        tau = inertia * (80.0 * (rot.T @ (2.0 * q_err[1:])) - 15.0 * v[3:])  # body frame (free joint: local omega)
        d.xfrc_applied[o.body, :3] = f
        d.xfrc_applied[o.body, 3:] = rot @ tau

    def step(self) -> bool:
        for label in self.targets:
            self._wrench(label)
        if self.env.is_episode_end():
            return False
        self.env.take_action(self.hold)
        return True

    def move(self, label: str, xy_to: np.ndarray, yaw: float, speed: float) -> None:
        xy0 = self.truth.object_poses()[label][:2].copy()
        n = max(1, math.ceil(float(np.linalg.norm(xy_to - xy0)) / (speed * DT)))
        vd = (xy_to - xy0) / (n * DT)
        for k in range(1, n + 1):
            self.targets[label] = (xy0 + (xy_to - xy0) * k / n, yaw, vd)
            if not self.step():
                return
        self.targets[label] = (xy_to, yaw, np.zeros(2))
        for _ in range(3):
            if not self.step():
                return


class Sweeper:
    """Sweeps every listed object into the dustpan: the farthest one still outside is pushed to a staging point
    7 cm in front of the lip (collecting whatever lies on the way), then the broom pushes along the pan's axis over
    the lip to the floor's centre; repeated until nothing is outside."""

    def __init__(self, env: TwinEnv, labels: tuple[str, ...], speed: float = 0.25) -> None:
        self.env, self.truth, self.labels, self.speed = env, env.truth(), labels, speed
        self.hands = GhostHands(env)
        broom = T.broom()
        self.face = broom.half_extents[0]  # root -> the head's front face, along local -x
        self.z = TOP + broom.half_extents[2] + 0.0005
        pan = self.truth.scene.objects["broom_shovel"].spec
        self.centre = next(q for q in pan.points if q.tag == "broom_shovel/0").pos
        self.table = mujoco.mj_name2id(self.truth.model, mujoco.mjtObj.mjOBJ_GEOM, "table")
        self.hands.grip("broom_shovel")  # the left hand holds the pan still

    def pan(self) -> tuple[np.ndarray, np.ndarray]:
        """The floor centre (xy) and the unit vector out of the mouth."""
        p = self.truth.object_poses()["broom_shovel"]
        rot = quat_to_matrix(p[3:])
        return (rot @ np.asarray(self.centre) + p[:3])[:2], -rot[:2, 0] / np.linalg.norm(rot[:2, 0])

    def local(self, xy: np.ndarray) -> tuple[float, float]:
        """(depth into the pan from the floor centre, sideways offset)."""
        c, u = self.pan()
        r = np.asarray(xy) - c
        return float(np.dot(r, -u)), float(-u[0] * r[1] + u[1] * r[0])

    def put_broom(self, face_xy: np.ndarray, d: np.ndarray) -> None:
        """Put the broom down with its head's face at face_xy, pushing along d; 1 cm further back at a time while
        it would overlap anything but the table."""
        yaw = math.atan2(-d[1], -d[0])
        body = self.truth.scene.objects["broom"].body
        m, data = self.truth.model, self.truth.data
        for k in range(30):
            root = np.asarray(face_xy) - d * (0.01 * k + self.face)
            self.truth.set_object_pose("broom", [root[0], root[1], self.z, *yq(yaw)])
            if not any(body in (m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]) and self.table not in (c.geom1, c.geom2)
                       and c.dist < 0.0 for c in data.contact[: data.ncon]):
                return
        raise RuntimeError("no free place for the broom")

    def push(self, face_from: np.ndarray, face_to: np.ndarray) -> None:
        d = (face_to - face_from) / np.linalg.norm(face_to - face_from)
        yaw = math.atan2(-d[1], -d[0])
        self.put_broom(face_from, d)
        self.hands.grip("broom")
        self.hands.move("broom", face_to - d * self.face, yaw, self.speed)
        self.hands.move("broom", self.truth.object_poses()["broom"][:2] - d * 0.04, yaw, self.speed)  # back off
        self.hands.release("broom")

    def outside(self) -> list[str]:
        ix, iy = T.PAN_INNER
        poses = self.truth.object_poses()
        out = []
        for lb in self.labels:
            depth, side = self.local(poses[lb][:2])
            if not (-ix + 0.02 <= depth <= ix and abs(side) <= iy - 0.01):
                out.append(lb)
        return out

    def run(self, rounds: int = 15) -> None:
        ix = T.PAN_INNER[0]
        for _ in range(rounds):
            out = self.outside()
            if self.env.is_episode_end() or not out:
                break
            c, u = self.pan()
            stage = c + u * (ix + T.PAN_LIP + 0.07)
            poses = self.truth.object_poses()
            far = [lb for lb in out if np.linalg.norm(poses[lb][:2] - stage) > 0.045]
            for lb in sorted(far, key=lambda lb: -float(np.linalg.norm(poses[lb][:2] - stage))):
                d = (stage - poses[lb][:2]) / np.linalg.norm(stage - poses[lb][:2])
                try:
                    self.push(poses[lb][:2] - d * 0.025, stage - d * 0.02)
                except RuntimeError:  # no room behind it now: another one first
                    continue
                break
            c, u = self.pan()
            self.push(stage + u * 0.07, c + u * 0.005)
        self.hands.release("broom_shovel")


# ------------------------------------------------------------------------------------------------- task table


@pytest.mark.parametrize("task", [row[0] for row in TOOLS_ROWS])
def test_facts_come_from_the_catalogue_and_the_card_is_right(task: str) -> None:
    twin, cat, card = stated_facts(task)
    assert twin == cat
    assert (card.step_limit, card.back_to_origin, card.instruction) == (cat.step_limit, cat.back_to_origin, twin.instruction)


def test_sweep_instructions_and_no_score_no_query() -> None:
    assert get_twin_task("sweep_blocks").layout(STATION, 0, 0).instruction.endswith("sweep the blocks.")
    assert get_twin_task("sweep_blocks_random").layout(STATION, 0, 0).instruction.endswith("sweep the objects.")
    with TwinEnv() as env:
        for task in SWEEP:
            env.reset(task, seed=0, layout_id=1)
            spec = env.truth().program_spec
            assert spec.queries == () and spec.score is None and len(spec.stages) == 1
            assert not get_twin_task(task).has_score


# --------------------------------------------------------------------------------------------- layout ranges


def _yaw_deg(q: Any) -> float:
    return math.degrees(yaw_of(q))


def check_sweep_layout(task: str, lay: Any) -> None:
    pan, broom = lay.object("broom_shovel"), lay.object("broom")
    assert pan.spec.model_id in (0, 1, 4) and not pan.static and not broom.static
    for o in (pan, broom):
        assert -0.35 <= o.pose[0] <= 0.0 and -0.2 <= o.pose[1] <= 0.1, o.label
    assert 135 - 1e-6 <= _yaw_deg(pan.pose[3:]) % 360 <= 225 + 1e-6
    assert -90 - 1e-6 <= _yaw_deg(broom.pose[3:]) <= 30 + 1e-6
    things = sweep_labels(lay)
    assert {o.label for o in lay.objects} == {"broom_shovel", "broom", *things}
    for lb in things:
        o = lay.object(lb)
        assert 0.04 <= o.pose[0] <= 0.35 and -0.15 <= o.pose[1] <= 0.05 and abs(_yaw_deg(o.pose[3:])) <= 45 + 1e-6
    if task == "sweep_blocks":
        assert 3 <= len(things) <= 5 and all(lay.object(lb).spec.category == "small_cube" for lb in things)
        assert things == tuple(f"cube_{i}" for i in range(len(things)))
    else:
        by_prefix: dict[str, list[Any]] = {}
        for lb in things:
            by_prefix.setdefault(lb.rsplit("_", 1)[0], []).append(lay.object(lb).spec)
        assert sorted(by_prefix) == ["target_1", "target_2", "target_3"]
        cats = [{s.category for s in specs} for specs in by_prefix.values()]
        assert all(len(c) == 1 for c in cats) and set().union(*cats) == {"brick", "earbuds", "paper_ball"}
        for specs in by_prefix.values():  # 1..2 distinct instances of each category
            assert 1 <= len(specs) <= 2 and len({s.model_id for s in specs}) == len(specs)


@pytest.mark.parametrize("task", SWEEP)
def test_sweep_layouts_follow_upstream_and_nothing_is_swept_at_the_start(task: str) -> None:
    spec = get_twin_task(task)
    a = spec.layout(STATION, 0, 3)
    assert a == spec.layout(STATION, 0, 3) and spec.layout(STATION, 1, 3) != a
    for lid in range(10):
        check_sweep_layout(task, spec.layout(STATION, 0, lid))
    with TwinEnv() as env:
        env.reset(task, seed=0, layout_id=0)
        truth = env.truth()
        assert not truth.outcome().unstable and not stage_holds(env, truth.world_state())


@pytest.mark.slow
@pytest.mark.parametrize("task", SWEEP)
def test_fifty_sweep_layouts_build_and_are_stable(task: str) -> None:
    """50 layouts (seeds 0 and 1 of 25) compile and settle: none is dropped as unstable."""
    sweep = sweep_layouts(task)
    for _, _, lay in sweep.layouts:
        check_sweep_layout(task, lay)
    assert sweep.unbuilt == ()
    assert sweep.unstable == ()


# ------------------------------------------------------------------------------------------- the dustpan asset


def test_dustpan_points_and_lip() -> None:
    pan = T.dustpan(4)
    circle = pan.named_points("broom_shovel/0", kind="support")
    quad = pan.named_points("handle")
    assert len(circle) == 1 and circle[0].radius == pytest.approx(T.PAN_INNER[0]) and len(quad) == 4
    floor_z = -pan.half_extents[2] + T.PAN_FLOOR
    assert all(p.pos[2] == pytest.approx(floor_z) for p in (*circle, *quad))
    xs = sorted({round(p.pos[0], 6) for p in quad})
    assert xs[1] - xs[0] == pytest.approx(2 * T.PAN_INNER[0])
    # The lip: a wedge whose front edge lies on the table, in front of the floor (local -x), the pan's mouth.
    wedge = next(p for p in pan.parts if p.kind == "mesh")
    v = np.asarray(wedge.vertices).reshape(-1, 3)
    assert v[:, 2].min() == pytest.approx(-pan.half_extents[2]) and v[:, 0].min() == pytest.approx(-pan.half_extents[0])
    with pytest.raises(ValueError, match="no dustpan"):
        T.dustpan(2)


# ------------------------------------------------------------------------------------- sweeping, for real


@pytest.mark.slow
@pytest.mark.parametrize(("task", "layout_id"), [("sweep_blocks", 0), ("sweep_blocks_random", 1)])
def test_sweeping_for_real_completes_the_task(task: str, layout_id: int) -> None:
    """The broom pushes every block over the lip in MuJoCo physics; the check fires with score 1 once they all
    rest on the pan's floor (and the broom is off to the right)."""
    with TwinEnv() as env:
        env.reset(task, seed=0, layout_id=layout_id)
        truth = env.truth()
        things = sweep_labels(truth.layout)
        start = truth.object_poses()
        assert all(touching_table(truth, lb) for lb in things)
        sweeper = Sweeper(env, things)
        sweeper.run()
        out = truth.outcome()
        assert out.success and out.score == 1.0 and out.steps < env.step_lim
        poses = truth.object_poses()
        ix, iy = T.PAN_INNER
        for lb in things:
            depth, side = sweeper.local(poses[lb][:2])
            assert -ix <= depth <= ix and abs(side) <= iy, lb  # inside the walls, past the lip
            assert not touching_table(truth, lb), lb  # it rests on the pan's floor: it went over the lip
            assert np.linalg.norm(poses[lb][:2] - start[lb][:2]) > 0.15, lb  # swept, from the far side of the table
        pan = poses["broom_shovel"]
        assert pan[2] - start["broom_shovel"][2] < 0.01 and poses["broom"][0] - pan[0] > 0.1


# -------------------------------------------------------------------------------------- constructed scenes


def pan_to_world(truth: Any, depth: float, side: float) -> np.ndarray:
    """World xyz of a point on the pan's floor at (depth into the pan from the floor centre, sideways)."""
    pan = truth.object_poses()["broom_shovel"]
    rot = quat_to_matrix(pan[3:])
    centre = next(q for q in truth.scene.objects["broom_shovel"].spec.points if q.tag == "broom_shovel/0").pos
    return rot @ (np.asarray(centre) + np.array([depth, -side, 0.0])) + pan[:3]  # local +x is into the pan


def _swept_by_hand(env: TwinEnv, task: str, layout_id: int) -> tuple[Any, tuple[str, ...]]:
    """Put every object on the pan's floor and the broom off to the right (test-only teleports), then settle."""
    env.reset(task, seed=0, layout_id=layout_id)
    truth = env.truth()
    things = sweep_labels(truth.layout)
    spots = [(-0.025, -0.035), (-0.025, 0.0), (-0.025, 0.035), (0.025, -0.035), (0.025, 0.0), (0.025, 0.035)]
    for lb, (depth, side) in zip(things, spots):
        p = pan_to_world(truth, depth, side)
        half = truth.scene.objects[lb].spec.half_extents[2]
        truth.set_object_pose(lb, [p[0], p[1], p[2] + half + 0.002, *truth.object_poses()["broom_shovel"][3:]])
    pan = truth.object_poses()["broom_shovel"]
    truth.set_object_pose("broom", [pan[0] + 0.3, pan[1], TOP + T.broom().half_extents[2] + 0.001, 1.0, 0.0, 0.0, 0.0])
    return truth, things


@pytest.mark.parametrize("task", SWEEP)
def test_everything_on_the_pan_floor_fires_at_once(task: str) -> None:
    with TwinEnv() as env:
        truth, _ = _swept_by_hand(env, task, 2)
        env.take_action(hold_action(env))
        out = truth.outcome()
        assert out.success and out.steps == 1 and out.score == 1.0, truth.program_status()


def test_sweep_near_misses_do_not_fire() -> None:
    """One near miss per predicate kind, each beside its passing twin, on the state of a swept pan."""
    with TwinEnv() as env:
        truth, things = _swept_by_hand(env, "sweep_blocks", 2)
        state = truth.world_state()  # no step taken: the episode is still running
        assert stage_holds(env, state)
        pan, broom = state.objects["broom_shovel"], state.objects["broom"]
        # the dustpan at least 10 cm left of the broom (root x)
        assert stage_holds(env, with_pose(state, "broom", [pan[0] + 0.101, *broom[1:]]))
        assert not stage_holds(env, with_pose(state, "broom", [pan[0] + 0.099, *broom[1:]]))
        # not lifted more than 1 cm
        start_z = state.initial_objects["broom_shovel"][2]
        assert stage_holds(env, with_pose(state, "broom_shovel", [*pan[:2], start_z + 0.009, *pan[3:]]))
        assert not stage_holds(env, with_pose(state, "broom_shovel", [*pan[:2], start_z + 0.011, *pan[3:]]))
        # upright within 5 degrees
        def tilted(deg: float) -> np.ndarray:
            h = math.radians(deg) / 2
            return np.array([*pan[:3], *quat_multiply((math.cos(h), math.sin(h), 0.0, 0.0), pan[3:])])
        assert stage_holds(env, with_pose(state, "broom_shovel", tilted(4.5)))
        assert not stage_holds(env, with_pose(state, "broom_shovel", tilted(5.5)))
        # every object inside the support circle (6 cm) or the floor's rectangle; one on the lip fails both
        cube = state.objects[things[0]]
        corner = pan_to_world(truth, 0.05, 0.07)  # in the rectangle, 8.6 cm from the centre: outside the circle
        assert stage_holds(env, with_pose(state, things[0], [*corner[:2], *cube[2:]]))
        on_lip = pan_to_world(truth, -T.PAN_INNER[0] - 0.005, 0.0)
        assert not stage_holds(env, with_pose(state, things[0], [*on_lip[:2], *cube[2:]]))
        past_wall = pan_to_world(truth, 0.0, T.PAN_INNER[1] + 0.003)  # beside the pan, past its side wall
        assert not stage_holds(env, with_pose(state, things[0], [*past_wall[:2], *cube[2:]]))


# ------------------------------------------------------------------------------ gallery and eval, end to end


def test_gallery_shows_the_tool_tasks(tmp_path: Any) -> None:
    import cv2

    from pyrua_dojo.twin.gallery import CELL_SCALE, LABEL_H, gallery

    tasks = [row[0] for row in TOOLS_ROWS]
    img = cv2.imread(str(gallery(tmp_path / "sheet.png", tasks)))
    w = int(640 * CELL_SCALE)
    for k in range(len(tasks)):  # one rendered scene per task, in a grid of 4 columns
        r, c = divmod(k, 4)
        h = int(480 * CELL_SCALE) + LABEL_H
        assert img[r * h + LABEL_H : (r + 1) * h, c * w : (c + 1) * w].std() > 10, tasks[k]


@pytest.mark.slow
def test_eval_runs_each_tool_task_end_to_end(tmp_path: Any) -> None:
    """`pyrua-dojo eval` with the scripted planner and a trivial program: each episode holds to its step limit and
    is booked as failed in RoboDojo's result layout."""
    tasks = [row[0] for row in TOOLS_ROWS]
    done = eval_trivial_program(tasks, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for task in tasks:
        run, record = done.booked(task)
        assert [(e.layout_id, e.success, e.score) for e in run.episodes] == [(0, False, 0.0)]
        assert record is not None
        assert record.extra.get("failure") == "step limit" and record.step_limit == get_twin_task(task).step_limit


# ------------------------------------------------------------------------------------- store_tools_in_toolbox

TOOLS = ("hammer", "pliers", "tape_measure", "wrench")
FLIP = (0.0, 0.0, 1.0, 0.0)  # 180 deg about the tool's long axis (local y): upside down


def test_toolbox_layouts_follow_upstream() -> None:
    spec = get_twin_task("store_tools_in_toolbox")
    ranges = {"hammer": (-0.4, -0.2), "pliers": (0.2, 0.4), "tape_measure": (0.2, 0.4), "wrench": (-0.4, -0.2)}
    for lid in range(10):
        lay = spec.layout(STATION, 0, lid)
        assert [o.label for o in lay.objects] == ["toolbox", *TOOLS]
        box = lay.object("toolbox")
        assert box.static and -0.05 <= box.pose[0] <= 0.05 and -0.12 <= box.pose[1] <= 0.0
        assert box.pose[2] == pytest.approx(TOP + 0.025, abs=0.001)  # upstream's zlim: its centre 2.5 cm up
        assert _yaw_deg(box.pose[3:]) == pytest.approx(-90.0, abs=0.1)
        for name in TOOLS:
            o = lay.object(name)
            assert not o.static and (o.spec.category, o.spec.model_id) == (name, T.TOOL_INDEX[name])
            lo, hi = ranges[name]
            assert lo <= o.pose[0] <= hi and -0.15 <= o.pose[1] <= 0.0 and o.pose[3] == pytest.approx(1.0)
    with TwinEnv() as env:
        env.reset("store_tools_in_toolbox", seed=0, layout_id=0)
        truth = env.truth()
        assert not truth.outcome().unstable and not stage_holds(env, truth.world_state())
        assert truth.program_spec.queries == () and truth.program_spec.score is not None


@pytest.mark.slow
def test_fifty_toolbox_layouts_build_and_are_stable() -> None:
    sweep = sweep_layouts("store_tools_in_toolbox", one_seed=True)
    assert sweep.unbuilt == ()
    assert sweep.unstable == ()


def _slot_pose(truth: Any, name: str) -> np.ndarray:
    from pyrua_dojo.twin.reward import functional_points

    return functional_points(truth.world_state(), "toolbox", f"{name}_slot")[0]


def _drop_into_slot(env: TwinEnv, name: str, quat: Any = None, steps: int = 15) -> None:
    """Test-only: hold the tool 1 cm above its slot, in the slot's orientation (or `quat`), let go, let it settle."""
    truth = env.truth()
    slot = _slot_pose(truth, name)
    truth.set_object_pose(name, [slot[0], slot[1], slot[2] + 0.01, *(slot[3:] if quat is None else quat)])
    hold = hold_action(env)
    for _ in range(steps):
        if env.is_episode_end():
            return
        env.take_action(hold)


def test_tools_in_their_pockets_score_by_count_then_succeed() -> None:
    """The process score climbs 25, 50, 75 as tools go in; the check fires once the last one rests in its pocket,
    with score 1; the pliers count upside down (their `center_flip`)."""
    with TwinEnv() as env:
        env.reset("store_tools_in_toolbox", seed=0, layout_id=3)
        truth = env.truth()
        for k, name in enumerate(("hammer", "wrench", "pliers"), start=1):
            q = quat_multiply(_slot_pose(truth, name)[3:], FLIP) if name == "pliers" else None
            _drop_into_slot(env, name, q)
            out = truth.outcome()
            assert not out.finished and out.process_score == 25.0 * k, name
            assert out.score == pytest.approx(0.25 * k)
        _drop_into_slot(env, "tape_measure", steps=30)
        out = truth.outcome()
        assert out.success and out.score == 1.0 and out.process_score == 100.0 and out.steps < 60
        poses = truth.object_poses()
        for name in TOOLS:  # resting in the pocket: below the box's rim, on its floor
            assert poses[name][2] < poses["toolbox"][2] + 0.025 - T.TOOL_HALF[name][2], name


def test_toolbox_near_misses_do_not_fire() -> None:
    """One near miss per predicate kind, each beside its passing twin, on the state of a filled toolbox."""
    with TwinEnv() as env:
        env.reset("store_tools_in_toolbox", seed=0, layout_id=3)
        truth = env.truth()
        for name in TOOLS:  # teleport all four into their slots (no step: the episode keeps running)
            slot = _slot_pose(truth, name)
            truth.set_object_pose(name, slot)
        state = truth.world_state()
        assert stage_holds(env, state)

        def turned(name: str, deg: float) -> np.ndarray:
            p = state.objects[name]
            return np.array([*p[:3], *quat_multiply(yq(math.radians(deg)), p[3:])])

        # orientation: within 10 degrees of the slot's frame
        assert stage_holds(env, with_pose(state, "wrench", turned("wrench", 9.5)))
        assert not stage_holds(env, with_pose(state, "wrench", turned("wrench", 10.5)))
        # position: the centre within 5 cm of the slot point (3-D), here 4.9 / 5.1 cm along the box's long axis
        box_axis = quat_to_matrix(state.objects["toolbox"][3:])[:, 0]
        for off, ok in ((0.049, True), (0.051, False)):
            p = state.objects["hammer"].copy()
            p[:3] += off * box_axis
            assert stage_holds(env, with_pose(state, "hammer", p)) is ok, off
        # covered: the tool's top below the toolbox's top (the centre stays 1.5 cm from its slot)
        p = state.objects["tape_measure"].copy()
        rim = state.objects["toolbox"][2] + T.TOOLBOX_HALF[2]
        p[2] = rim - T.TOOL_HALF["tape_measure"][2] - 0.001
        assert stage_holds(env, with_pose(state, "tape_measure", p))
        p[2] = rim - T.TOOL_HALF["tape_measure"][2] + 0.001
        assert not stage_holds(env, with_pose(state, "tape_measure", p))
        # the pliers either way up, but not turned end for end
        flipped = [*state.objects["pliers"][:3], *quat_multiply(state.objects["pliers"][3:], FLIP)]
        assert stage_holds(env, with_pose(state, "pliers", flipped))
        assert not stage_holds(env, with_pose(state, "pliers", turned("pliers", 180.0)))


def test_toolbox_score_needs_open_grippers() -> None:
    from pyrua_dojo.twin.reward import RewardProgram

    with TwinEnv() as env:
        env.reset("store_tools_in_toolbox", seed=0, layout_id=3)
        truth = env.truth()
        truth.set_object_pose("hammer", _slot_pose(truth, "hammer"))
        state = truth.world_state()
        prog = RewardProgram(truth.program_spec)
        prog.step(replace(state, gripper_open={"left": 1.0, "right": 0.79}))
        assert prog.status().score_reached == 0
        prog.step(replace(state, gripper_open={"left": 0.81, "right": 0.81}))
        assert prog.status().score_reached == 1 and prog.process_score(success=False) == 25.0
