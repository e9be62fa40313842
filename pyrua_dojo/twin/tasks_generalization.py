"""Twin tasks of RoboDojo's Generalization dimension with rigid objects: pack_objects_into_box, hang_mugs and
sort_nesting_dolls_by_size, each with its `_random` variant.

Each follows upstream RoboDojo (`task/RoboDojo/tasks/<task>.py` for `run_reward` / `get_score`,
`task/RoboDojo/config/<task>.yml` for objects, index lists, ranges, rotations, margins, clutter and prohibited
areas). Upstream ships its layouts pre-generated, so the placement order is the twin's: large objects and fixtures
first. An upstream stage entry that is a list ("any of") is one `any_of` here, a list inside it ("all of") one
`all_of`. Step limits, episode counts, instructions, dimensions and the back-to-origin flag come from the catalogue
when `tasks.py` registers `GENERALIZATION_ROWS`. The assets are `objects_generalization.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_generalization as G
from pyrua_dojo.twin.layouts import Layout, Placer
from pyrua_dojo.twin.objects import ObjectSpec
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_all_gripper_open,
    is_axis_aligned,
    is_axis_up,
    is_pointA_in_B_functional_bbox,
)

LayoutFn = Callable[[Placer, np.random.Generator], str]
ProgramFn = Callable[[Layout, WorldState], ProgramSpec]
B = all_robot_back_to_origin
NO_CLUTTER_STRIP = (-0.35, -0.5, 0.35, -0.4)  # the `_random` variants' ProhibitedArea (the arms' parking strip)
YAW90 = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))


def _instruction(task: str) -> str:
    return catalogued(task).instruction


def _pick(rng: np.random.Generator, indices: Sequence[int]) -> int:
    return int(indices[int(rng.integers(len(indices)))])


# -------------------------------------------------------------------------------------- pack_objects_into_box

PACK_ITEMS = ("car", "electric_toothbrush", "hammer", "shoe")
_PACK_ASSETS: dict[str, tuple[Callable[[int], ObjectSpec], tuple[int, ...], tuple[int, ...]]] = {
    "car": (G.toy_car, G.CAR_INDICES, G.CAR_INDICES_RANDOM),
    "electric_toothbrush": (G.electric_toothbrush, G.TOOTHBRUSH_INDICES, G.TOOTHBRUSH_INDICES_RANDOM),
    "hammer": (G.hammer, G.HAMMER_INDICES, G.HAMMER_INDICES_RANDOM),
    "shoe": (G.shoe, G.SHOE_INDICES, G.SHOE_INDICES_RANDOM),
}


def _pack_layout(random_variant: bool) -> LayoutFn:
    """Upstream: the box in x [-0.3, 0.3], y [-0.1, 0], yaw +-25 deg (its local y along world x at rest); each item
    (one index drawn from its list; `_random` draws from held-out lists) in x [-0.45, 0.45], y [-0.25, 0], any yaw.
    No clutter in either variant."""

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        placer.place(G.packing_box(), "box", (-0.3, 0.3), (-0.1, 0.0), rotate_deg=25, base_quat=YAW90)
        for label in PACK_ITEMS:
            make, indices, held_out = _PACK_ASSETS[label]
            placer.place(make(_pick(rng, held_out if random_variant else indices)), label, (-0.45, 0.45), (-0.25, 0.0),
                         rotate_deg=360)
        return _instruction("pack_objects_into_box")

    return fn


def _box_along_world_x(threshold: float = 40.0) -> Pred:
    return any_of(
        is_axis_aligned("box", (0, 1, 0), world_axis=(1, 0, 0), align_threshold=threshold),
        is_axis_aligned("box", (0, -1, 0), world_axis=(1, 0, 0), align_threshold=threshold),
    )


def _pack_item_checks(label: str) -> tuple[Pred, ...]:
    """upstream's `_<item>_checks`: root over the box floor; heading (checkpoint frame's x, the shoe's root x) within
    45 deg of the box's +-y in the xy plane, and the front facing world -x within 60 deg; the box upright."""
    point = None if label == "shoe" else "checkpoint"
    heading_axis = (1, 0, 0) if label == "shoe" else (-1, 0, 0)
    return (
        is_pointA_in_B_functional_bbox(label, "box", "box_bottom"),
        any_of(
            *(
                is_axis_aligned("box", ax, label_B=label, axis_B=(1, 0, 0), point_B=point, point_B_side="active",
                                align_threshold=45, project_plane="xy")
                for ax in ((0, 1, 0), (0, -1, 0))
            )
        ),
        is_axis_aligned(label, heading_axis, point_A=point, point_A_side="active", world_axis=(1, 0, 0),
                        align_threshold=60, project_plane="xy"),
        is_axis_up("box", (0, 0, 1)),
    )


def _pack_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    groups = [_pack_item_checks(label) for label in PACK_ITEMS]
    every = tuple(p for g in groups for p in g)
    grip, box = is_all_gripper_open(0.8), _box_along_world_x()

    def any_n(n: int) -> Pred:
        return any_of(*(all_of(*(p for g in sel for p in g)) for sel in combinations(groups, n)))

    return ProgramSpec(
        stages=((*every, box, B()),),
        score=ScoreSpec(
            stages=((grip, box, any_n(1)), (grip, box, any_n(2)), (grip, box, any_n(3)), (grip, box, *every)),
            gradient=(10.0, 25.0, 50.0, 100.0),
        ),
    )


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
GENERALIZATION_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("pack_objects_into_box", _pack_layout(False), _pack_program, True),
    ("pack_objects_into_box_random", _pack_layout(True), _pack_program, True),
)
