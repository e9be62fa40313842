"""Twin tasks that use a tool or a tool rack: sweep_blocks (+ `_random`, Generalization) and store_tools_in_toolbox
(Open).

Each follows upstream RoboDojo: `task/RoboDojo/tasks/<task>.py` for `run_reward` (the success stage) and
`get_score` (the process score; sweep_blocks has none), `task/RoboDojo/config/<task>.yml` for objects, index
lists, ranges, rotations and margins. Step limits, episode counts, instructions, dimensions and the back-to-origin
flag come from the catalogue (`pyrua_dojo.catalog`), where `tasks.py` registers `TOOLS_ROWS`. Neither task has a
query, so neither can fail before its step limit. The assets are `objects_tools.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_tools as T
from pyrua_dojo.twin.layouts import Layout, Placer
from pyrua_dojo.twin.reward import (
    ProgramSpec,
    WorldState,
    all_robot_back_to_origin,
    any_of,
    is_A_on_B_left,
    is_all_A_in_B_support_circle,
    is_all_pointA_in_B_functional_bbox,
    is_axis_up,
    is_not_lift,
)

LayoutFn = Callable[[Placer, np.random.Generator], str]
ProgramFn = Callable[[Layout, WorldState], ProgramSpec]
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


TOOLS_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("sweep_blocks", _sweep_layout(False), _sweep_program, False),
    ("sweep_blocks_random", _sweep_layout(True), _sweep_program, False),
)
