"""Twin tasks that use a tool or a tool rack: sweep_blocks (+ `_random`, Generalization) and store_tools_in_toolbox
(Open).

Each follows upstream RoboDojo: `task/RoboDojo/tasks/<task>.py` for `run_reward` (the success stage) and
`get_score` (the process score; sweep_blocks has none), `task/RoboDojo/config/<task>.yml` for objects, index
lists, ranges, rotations and margins. Step limits, episode counts, instructions, dimensions and the back-to-origin
flag come from the catalogue (`pyrua_dojo.catalog`), where `tasks.py` registers `TOOLS_ROWS`. Neither task has a
query, so neither can fail before its step limit. The assets are `objects_tools.py`.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_tools as T
from pyrua_dojo.twin.layouts import Layout, LayoutFn, Placer, ProgramFn
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_cover_B,
    is_A_functional_point_close_to_B_functional_point,
    is_A_on_B_left,
    is_all_A_in_B_support_circle,
    is_all_gripper_open,
    is_all_pointA_in_B_functional_bbox,
    is_axis_up,
    is_not_lift,
)

B = all_robot_back_to_origin


def _instruction(task: str) -> str:
    return catalogued(task).instruction


# ------------------------------------------------------------------------------------------------ sweep_blocks

DUSTPAN_INDICES = (0, 1, 4)
SWEEP_CUBES = (3, 5)  # `select_instance_nums`: 3 to 5 small cubes, duplicates allowed
SWEEP_RANDOM_CATEGORIES = ("brick", "earbuds", "paper_ball")


def _sweep_layout(random_variant: bool) -> LayoutFn:
    task = "sweep_blocks_random" if random_variant else "sweep_blocks"

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        pan = T.dustpan(int(rng.choice(np.array(DUSTPAN_INDICES))))
        placer.place(pan, "broom_shovel", (-0.35, 0.0), (-0.2, 0.1), rotate_deg=(135, 225), margin=0.01)
        placer.place(T.broom(), "broom", (-0.35, 0.0), (-0.2, 0.1), rotate_deg=(-90, 30), margin=0.01)
        if random_variant:
            # `hierarchical`: all three categories, 1..2 distinct instances of each, labelled target_<k>_<i>
            for k, cat in enumerate(rng.permutation(np.array(SWEEP_RANDOM_CATEGORIES)), start=1):
                n = int(rng.integers(1, 3))
                for i, model_id in enumerate(rng.choice(np.arange(3), size=n, replace=False)):
                    placer.place(T.sweep_target(str(cat), int(model_id)), f"target_{k}_{i}", (0.04, 0.35), (-0.15, 0.05),
                                 rotate_deg=45)
        else:
            n = int(rng.integers(SWEEP_CUBES[0], SWEEP_CUBES[1] + 1))
            ids = rng.choice(np.array(sorted(T.SMALL_CUBE_LOOKS)), size=n, replace=True)
            for i, model_id in enumerate(ids):
                placer.place(T.small_cube(int(model_id)), f"cube_{i}", (0.04, 0.35), (-0.15, 0.05), rotate_deg=45)
        return _instruction(task)

    return fn


def sweep_labels(layout: Layout) -> tuple[str, ...]:
    """The labels upstream's `get_label_by_prefix` gives the check: "cube..." (sweep_blocks) or "target..." (_random)."""
    prefix = "target" if layout.task.endswith("_random") else "cube"
    return tuple(o.label for o in layout.objects if o.label.startswith(prefix))


def _sweep_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    things = sweep_labels(layout)
    return ProgramSpec(
        stages=(
            (
                is_A_on_B_left("broom_shovel", "broom"),
                is_not_lift("broom_shovel", z_threshold=0.01),
                is_axis_up("broom_shovel", (0.0, 0.0, 1.0), threshold=5),
                any_of(
                    is_all_A_in_B_support_circle(things, "broom_shovel", "broom_shovel/0"),
                    is_all_pointA_in_B_functional_bbox(things, "broom_shovel", "handle"),
                ),
                B(),
            ),
        ),
    )


# ------------------------------------------------------------------------------------- store_tools_in_toolbox

TOOLS = ("hammer", "pliers", "tape_measure", "wrench")  # upstream's config order (hammer, pliers, tape, wrench)
TOOL_RANGES = {"hammer": (-0.4, -0.2), "pliers": (0.2, 0.4), "tape_measure": (0.2, 0.4), "wrench": (-0.4, -0.2)}
TOOLBOX_QUAT = (0.707, 0.0, 0.0, -0.707)  # upstream's qpos: yaw -90 deg, not randomised


def _toolbox_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(T.toolbox(), "toolbox", (-0.05, 0.05), (-0.12, 0.0), base_quat=TOOLBOX_QUAT, static=True)
    for name in TOOLS:
        placer.place(T.tool(name), name, TOOL_RANGES[name], (-0.15, 0.0))  # rotate_rand False
    return _instruction("store_tools_in_toolbox")


def _close(name: str, point: str = "center", align: bool = False) -> Pred:
    return is_A_functional_point_close_to_B_functional_point(name, "toolbox", point, f"{name}_slot", align_qpos=align)


def _tool_groups() -> list[tuple[Pred, ...]]:
    """Upstream's `_single_item_score_options`: per tool, its centre within 5 cm of its slot (the pliers: both
    `center` and `center_flip`, which share a position) and the toolbox covering it; orientation not checked."""
    out = []
    for name in TOOLS:
        points = ("center", "center_flip") if name == "pliers" else ("center",)
        out.append((*(_close(name, pt) for pt in points), is_A_cover_B("toolbox", name)))
    return out


def _toolbox_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    grip = is_all_gripper_open(0.8)
    groups = _tool_groups()

    def any_k(k: int) -> Pred:  # upstream's `_combined_item_score_options(k)`: some k tools' checks all hold
        return any_of(*(all_of(*(p for g in choice for p in g)) for choice in combinations(groups, k)))

    return ProgramSpec(
        stages=(
            (
                any_of(_close("pliers", "center", align=True), _close("pliers", "center_flip", align=True)),
                *(_close(name, align=True) for name in ("hammer", "tape_measure", "wrench")),
                *(is_A_cover_B("toolbox", name) for name in ("hammer", "tape_measure", "wrench", "pliers")),
                B(),
            ),
        ),
        score=ScoreSpec(
            stages=((grip, any_k(1)), (grip, any_k(2)), (grip, any_k(3)), (grip, *(p for g in groups for p in g))),
            gradient=(25.0, 50.0, 75.0, 100.0),
            mode="transition",
        ),
    )


TOOLS_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("sweep_blocks", _sweep_layout(False), _sweep_program, False),
    ("sweep_blocks_random", _sweep_layout(True), _sweep_program, False),
    ("store_tools_in_toolbox", _toolbox_layout, _toolbox_program, True),
)
