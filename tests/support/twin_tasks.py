"""Shared helpers of the twin's task tests (tests/test_twin_*.py): the station, yaw quaternions, a hold-still action,
constructed world states and reward runs, stepping until a check fires, the 50-layout build-and-settle sweep and the
end-to-end `pyrua-dojo eval` run of a trivial program.

The helpers gather facts and hand them back; the tests assert on them. The placement helpers use the twin's truth
(tests only): they are how a test puts the world into the state a task's check looks for.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from calibration import load_station
from calibration.transforms import quat_multiply, quat_to_matrix
from pyrua_dojo.catalog import get_task as catalogue_task
from pyrua_dojo.harness.result_files import AgentRecord, RunResult, read_agent_record, read_result_file
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.twin import TwinEnv, UnstableLayoutError, get_twin_task
from pyrua_dojo.twin.layouts import Layout
from pyrua_dojo.twin.reward import RewardProgram, WorldState
from pyrua_dojo.twin.scene import TwinScene

STATION = load_station()
TOP = STATION.table.top_z
HOME = {
    "left": np.array([-0.301, -0.2098, 0.9215, 0.5, -0.5, 0.5, 0.5]),
    "right": np.array([0.299, -0.2098, 0.9215, 0.5, -0.5, 0.5, 0.5]),
}  # the end-effector poses of the home posture, as a constructed WorldState holds them

TRIVIAL_PROGRAM = """# a trivial program: look at the state, go home
# %% state
print(robo.state())
# %% home
robo.home()
"""


# -------------------------------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class StatedFacts:
    """What one source states of a task: step limit, episodes per seed, dimension, whether the arms must end at
    their start pose, and the instruction (of layout 0 of seed 0 for the twin and the task card). The task card
    states no episodes per seed or dimension (None)."""

    step_limit: int
    episodes_per_seed: int | None
    dimension: str | None
    back_to_origin: bool
    instruction: str


def stated_facts(task: str) -> tuple[StatedFacts, StatedFacts, StatedFacts]:
    """What the twin's task table, the catalogue and the task card state of `task`, in that order."""
    spec, cat = get_twin_task(task), catalogue_task(task)
    instruction = spec.layout(STATION, 0, 0).instruction
    card = TaskCard.for_task(task, instruction)
    return (
        StatedFacts(spec.step_limit, spec.episodes_per_seed, spec.dimension, spec.back_to_origin, instruction),
        StatedFacts(cat.step_limit, cat.episodes_per_seed, cat.dimension.value, cat.back_to_origin, cat.instruction),
        StatedFacts(card.step_limit, None, None, card.back_to_origin, card.instruction),
    )


# ------------------------------------------------------------------------------------------------- rotations


def yaw_q(deg: float) -> np.ndarray:
    """The quaternion (w, x, y, z) of a turn of `deg` degrees about world z."""
    h = math.radians(deg) / 2
    return np.array([math.cos(h), 0.0, 0.0, math.sin(h)])


def yaw_of(q: Any) -> float:
    """The yaw in degrees of quaternion `q` (w, x, y, z)."""
    r = quat_to_matrix(np.asarray(q, dtype=float))
    return math.degrees(math.atan2(r[1, 0], r[0, 0]))


def tilt_x(q: Any, deg: float) -> np.ndarray:
    """q followed by a tilt of `deg` degrees about world x."""
    h = math.radians(deg) / 2
    return np.asarray(quat_multiply((math.cos(h), math.sin(h), 0.0, 0.0), q))


def local_to_world(pose: Any, p: Any) -> np.ndarray:
    """Point `p`, given in the frame of `pose` (x, y, z, qw, qx, qy, qz), in world coordinates."""
    return quat_to_matrix(np.asarray(pose[3:], dtype=float)) @ np.asarray(p, dtype=float) + np.asarray(pose[:3])


# ------------------------------------------------------------------------------------------ world states, scores


def state_of(lay: Layout, poses: dict[str, Any], ee: dict[str, np.ndarray] | None = None,
             grip: float = 1.0) -> WorldState:
    """A constructed WorldState of `lay`'s objects: start poses from the layout, `poses` overriding the current ones;
    the arms at home (or at `ee`) with both grippers at `grip`."""
    initial = {o.label: np.array(o.pose, dtype=float) for o in lay.objects}
    current = {k: v.copy() for k, v in initial.items()}
    current.update({k: np.array(v, dtype=float) for k, v in poses.items()})
    return WorldState(
        objects=current,
        initial_objects=initial,
        bboxes={o.label: o.spec.bbox_vertices for o in lay.objects},
        ee=ee or HOME,
        origin_ee=HOME,
        gripper_open={"left": grip, "right": grip},
        points={o.label: o.spec.points for o in lay.objects},
        static=frozenset(o.label for o in lay.objects if o.static),
    )


def with_pose(state: WorldState, label: str, pose: Any) -> WorldState:
    """`state` with object `label` at `pose`."""
    objects = dict(state.objects)
    objects[label] = np.asarray(pose, dtype=float)
    return replace(state, objects=objects)


def stage_holds(spec: Any, state: WorldState) -> bool:
    """Whether the success stage of a ProgramSpec holds in `state`."""
    return all(p(state) for p in spec.stages[0])


def run_program(task: str, lay: Layout, states: list[WorldState]) -> RewardProgram:
    """The reward program of `task` on `lay` (built from the first state) after stepping through `states`."""
    return run_spec(get_twin_task(task).program(lay, states[0]), states)


def run_spec(spec: Any, states: Iterable[WorldState]) -> RewardProgram:
    """A RewardProgram of `spec` after stepping through `states` (one per step)."""
    prog = RewardProgram(spec)
    for s in states:
        prog.step(s)
    return prog


# ------------------------------------------------------------------------------------------ stepping the twin


def hold(env: TwinEnv) -> dict[str, Any]:
    """An action that holds both arms where they are with the grippers open."""
    obs = env.get_obs()
    return {
        "left_arm_joint_state": obs["state"]["left_arm_joint_state"],
        "left_ee_joint_state": [1.0],
        "right_arm_joint_state": obs["state"]["right_arm_joint_state"],
        "right_ee_joint_state": [1.0],
    }


@contextmanager
def twin_at(task: str, layout_id: int, seed: int = 0) -> Iterator[tuple[TwinEnv, Any, dict[str, Any]]]:
    """A twin reset to `task`'s layout `layout_id` of `seed`: the env, its truth (tests only) and an action that holds
    the arms still with the grippers open."""
    with TwinEnv() as env:
        env.reset(task, seed=seed, layout_id=layout_id)
        yield env, env.truth(0), hold(env)


def step_until_end(env: TwinEnv, action: dict[str, Any], limit: int) -> int:
    """Take `action` until the episode ends or `limit` actions; the episode's step count then."""
    for _ in range(limit):
        if env.is_episode_end():
            break
        env.take_action(action)
    return env.truth(0).outcome().steps


def settle(env: TwinEnv, action: dict[str, Any], steps: int, done: Callable[[Any], bool]) -> int | None:
    """Take `action` for up to `steps` actions; the first step (1-based count of the episode) at which `done(truth)`
    holds, or None. Stops early when the episode ends."""
    truth = env.truth()
    for _ in range(steps):
        if env.is_episode_end():
            break
        env.take_action(action)
        if done(truth):
            return truth.outcome().steps
    return None


def snapshot(truth: Any) -> tuple[Any, WorldState, Any]:
    """The twin's outcome so far, its world state now and the task's reward ProgramSpec (tests only)."""
    return truth.outcome(), truth.world_state(), truth.program_spec


def drift(truth: Any) -> dict[str, float]:
    """How far (m, the largest of x, y, z) each object stands from where its layout placed it."""
    start = {o.label: np.array(o.pose) for o in truth.layout.objects}
    return {label: float(np.abs(pose[:3] - start[label][:3]).max()) for label, pose in truth.object_poses().items()}


@dataclass(frozen=True)
class Settled:
    """One layout after its reset: whether the twin found it unstable, each object's drift (m) from where the layout
    placed it, and whether the task's success stage already held."""

    layout_id: int
    unstable: bool
    drift: dict[str, float]
    done_at_start: bool


def settle_layouts(task: str, layout_ids: Iterable[int] = (0, 1), seed: int = 0) -> list[Settled]:
    """Reset the twin to each of `task`'s `layout_ids` of `seed` and report how each settled."""
    out = []
    with TwinEnv() as env:
        for lid in layout_ids:
            env.reset(task, seed=seed, layout_id=lid)
            truth = env.truth(0)
            out.append(Settled(lid, truth.outcome().unstable, drift(truth),
                               stage_holds(truth.program_spec, truth.world_state())))
    return out


# --------------------------------------------------------------------------------------------- layout sweeps


@dataclass(frozen=True)
class LayoutSweep:
    """What building and resetting a task's layouts found.

    layouts: (seed, layout id, layout) of each layout tried; unbuilt: (seed, layout id) whose compiled scene does
    not hold exactly the layout's objects; unstable: (seed, layout id) the twin dropped as unstable; drifts: for each
    layout that reset, (seed, layout id, label, drift in m) of its objects after settling.
    """

    layouts: tuple[tuple[int, int, Layout], ...]
    unbuilt: tuple[tuple[int, int], ...]
    unstable: tuple[tuple[int, int], ...]
    drifts: tuple[tuple[int, int, str, float], ...]


def sweep_layouts(task: str, count: int = 50, *, one_seed: bool = False) -> LayoutSweep:
    """Build and reset `count` layouts of `task`: seeds 0, 1, ... of `episodes_per_seed` layouts each, or layout ids 0 to
    `count - 1` of seed 0 when `one_seed`."""
    spec = get_twin_task(task)
    layouts, unbuilt, unstable, drifts = [], [], [], []
    with TwinEnv() as env:
        for k in range(count):
            seed, lid = (0, k) if one_seed else divmod(k, spec.episodes_per_seed)
            lay = spec.layout(STATION, seed, lid)
            layouts.append((seed, lid, lay))
            if set(TwinScene(STATION, lay.objects).objects) != {o.label for o in lay.objects}:
                unbuilt.append((seed, lid))
            try:
                env.reset(task, seed=seed, layout_id=lid)
            except UnstableLayoutError:
                unstable.append((seed, lid))
                continue
            drifts.extend((seed, lid, label, d) for label, d in drift(env.truth(0)).items())
    return LayoutSweep(tuple(layouts), tuple(unbuilt), tuple(unstable), tuple(drifts))


# ------------------------------------------------------------------------------------------------ end to end


@dataclass(frozen=True)
class EvalRun:
    """A `pyrua-dojo eval` run in a subprocess: its exit status, stderr and output folder."""

    returncode: int
    stderr: str
    out: Path

    def booked(self, task: str) -> tuple[RunResult, AgentRecord | None]:
        """The result file of `task` (exactly one) and the agent record of its layout 0."""
        (path,) = sorted((self.out / "RoboDojo" / task).glob("*/*/*/*/_result.json"))
        return read_result_file(path), read_agent_record(path.parent / "episodes" / "layout_0000")


def eval_trivial_program(tasks: Iterable[str], tmp_path: Path) -> EvalRun:
    """Run `pyrua-dojo eval` on one episode of each of `tasks` with TRIVIAL_PROGRAM, no segmentation, one worker."""
    tasks = list(tasks)
    program = tmp_path / "program.py"
    program.write_text(TRIVIAL_PROGRAM)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pyrua_dojo.cli", "eval", "--tasks", ",".join(tasks), "--episodes", "1",
           "--program", str(program), "--segmentation", "none", "--workers", "1", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600 * max(2, len(tasks)), check=False,
                          env={**os.environ, "MUJOCO_GL": "egl", "COLUMNS": "120"})
    return EvalRun(done.returncode, done.stderr, out)
