"""Twin tasks that rearrange rigid pieces: push_T (+ _random), swap_T, stack_bowls (+ _random), build_tower and
play_Xylophone.

Each follows upstream RoboDojo (`task/RoboDojo/tasks/<task>.py` for `run_reward` / `get_score`,
`task/RoboDojo/config/<task>.yml` for objects, ranges, rotations, clutter and prohibited areas); the assets are the
twin's (`objects_rearrange.py`). Step limits, episode counts, instructions, dimensions and the back-to-origin flag
come from the catalogue (`pyrua_dojo.catalog`) when `tasks.py` registers these rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_rearrange as parts
from pyrua_dojo.twin.layouts import NO_CLUTTER_STRIP, Layout, LayoutFn, Placer, ProgramFn, place_clutter
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    Query,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_in_B_support_circle,
    is_A_point_above_B_point_by_z_range,
    is_A_up_B,
    is_A_xy_distance_close_to_pos,
    is_AB_xy_distance_within_threshold,
    is_all_gripper_open,
    is_axis_aligned,
    is_axis_up,
    is_lift,
    is_not_moved,
    is_pointA_in_B_functional_bbox,
    is_qpos_close,
    is_stacked,
    select_label_by_zmin,
    update_object_state,
)

Lim = Sequence[float] | Sequence[Sequence[float]]  # a range, or a union of ranges

_X90 = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)  # +90 deg about x: local y -> world z


def _instruction(task: str) -> str:
    return catalogued(task).instruction


def _clutter(placer: Placer, rng: np.random.Generator, groups: Sequence[tuple[Lim, Lim]]) -> None:
    """RoboDojo's `Clutter` entries: per (xlim, ylim) group (ranges may be unions) up to 10 objects of distinct
    categories (`category_unique`, drawn per group), yaw +-30 deg, margin 1.5 cm; an object that does not fit is
    skipped. Labels run on across groups (clutter_0, clutter_1, ...)."""
    for xlim, ylim in groups:
        place_clutter(placer, rng, 10, xlim, ylim)


# ------------------------------------------------------------------------------------------------------ push_T


def _push_t_layout(random_variant: bool) -> LayoutFn:
    def fn(placer: Placer, rng: np.random.Generator) -> str:
        if random_variant:
            placer.add_prohibited(NO_CLUTTER_STRIP)
        placer.place(parts.t_block(1 if random_variant else 0), "t", (-0.45, 0.45), (-0.25, -0.1), rotate_deg=360)
        placer.place(parts.t_cushion(), "target_t", (-0.45, 0.45), (-0.25, -0.1), rotate_deg=360, static=True)
        if random_variant:
            _clutter(placer, rng, [((-0.6, 0.6), ((-0.5, -0.25), (0.0, 0.5))), (((-0.6, -0.45), (0.45, 0.6)), (-0.25, 0.0))])
        return _instruction("push_T")

    return fn


def _push_t_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    return ProgramSpec(
        stages=(
            (
                is_qpos_close("t", "target_t", dis_threshold=7),
                is_AB_xy_distance_within_threshold("t", "target_t", threshold=0.007),
                all_robot_back_to_origin(),
            ),
        ),
        queries=(Query((is_lift("t", z_threshold=0.01),), 0),),
    )


# ------------------------------------------------------------------------------------------------------ swap_T


def _swap_t_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(parts.t_block(0), "t0", (-0.09, -0.03), (-0.2, -0.15), rotate_deg=360)
    placer.place(parts.t_block(1), "t1", (0.03, 0.09), (-0.2, -0.15), rotate_deg=360)
    return _instruction("swap_T")


def _swap_t_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    """The start poses are read once, when the check is registered (upstream's `get_label_pose` in run_reward)."""
    p0, p1 = (np.asarray(initial.objects[t], dtype=float).copy() for t in ("t0", "t1"))
    return ProgramSpec(
        stages=(
            (
                is_A_xy_distance_close_to_pos("t0", p1[:3], dis_threshold=0.02),
                is_A_xy_distance_close_to_pos("t1", p0[:3], dis_threshold=0.02),
                is_qpos_close("t0", qpos=p1[3:], dis_threshold=3),
                is_qpos_close("t1", qpos=p0[3:], dis_threshold=3),
                all_robot_back_to_origin(),
            ),
        ),
    )


# ------------------------------------------------------------------------------------------------- stack_bowls

BOWLS = ("bowl0", "bowl1", "bowl2")


def _stack_bowls_layout(random_variant: bool) -> LayoutFn:
    indices = parts.BOWL_INDICES_RANDOM if random_variant else parts.BOWL_INDICES

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        if random_variant:
            placer.add_prohibited(NO_CLUTTER_STRIP)
        spec = parts.bowl(int(indices[int(rng.integers(len(indices)))]))  # `mode: same`: one index for all three
        for label in BOWLS:
            placer.place(spec, label, (-0.45, 0.45), (-0.25, 0.07))
        if random_variant:
            _clutter(
                placer,
                rng,
                [((-0.6, 0.6), ((-0.5, -0.15), (0.05, 0.5))), (((-0.6, -0.1), (0.1, 0.6)), (-0.15, 0.05))],
            )
        return _instruction("stack_bowls")

    return fn


def _stack_bowls_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    up = (0.0, 0.0, 1.0)
    lowest = select_label_by_zmin(BOWLS)

    def pair(a: str, b: str) -> Pred:  # a upright (7 deg) with b (45 deg) stacked on it
        return all_of(is_axis_up(a, up, 7), is_axis_up(b, up, 45), is_stacked((a, b), xy_threshold=0.04, in_order=True))

    full = (
        *(is_axis_up(b, up, 45) for b in BOWLS),
        is_axis_up(lowest, up, 7),
        is_stacked(BOWLS, xy_threshold=0.04),
    )
    pairs = any_of(
        pair("bowl0", "bowl1"),
        pair("bowl1", "bowl0"),
        pair("bowl1", "bowl2"),
        pair("bowl2", "bowl1"),
        pair("bowl2", "bowl0"),
        pair("bowl0", "bowl2"),
    )
    return ProgramSpec(
        stages=((*full, all_robot_back_to_origin()),),
        score=ScoreSpec(
            stages=((is_all_gripper_open(0.8), pairs), (is_all_gripper_open(0.8), *full)),
            gradient=(15.0, 100.0),
        ),
    )


# ------------------------------------------------------------------------------------------------- build_tower

TOWER = tuple(f"block{i}" for i in range(8))


def _build_tower_layout(placer: Placer, rng: np.random.Generator) -> str:
    left, right = (-0.4, -0.17), (0.17, 0.4)
    ends = ((-0.45, -0.3), (0.3, 0.45))
    placer.place(parts.tower_block(0), "block0", (0.0, 0.0), (-0.2, -0.2))
    placer.place(parts.tower_block(2), "block1", left, (-0.2, 0.0), rotate_deg=(-25, 0))
    placer.place(parts.tower_block(2), "block2", right, (-0.2, 0.0), rotate_deg=(0, 25))
    placer.place(parts.tower_block(1), "block3", ends, (-0.2, 0.0), rotate_deg=10)
    placer.place(parts.tower_block(3), "block4", ends, (-0.2, 0.0), rotate_deg=10, base_quat=_X90)
    placer.place(parts.tower_block(2), "block5", left, (-0.2, 0.0), rotate_deg=(-25, 0))
    placer.place(parts.tower_block(2), "block6", right, (-0.2, 0.0), rotate_deg=(0, 25))
    placer.place(parts.tower_block(4), "block7", (0.0, 0.0), (-0.3, -0.3))
    return _instruction("build_tower")


def _tower_up(label: str) -> Pred:
    return is_axis_up(label, (0.0, 1.0, 0.0) if label == "block4" else (0.0, 0.0, 1.0), threshold=5)


def _tower_checks() -> dict[str, tuple[Pred, ...]]:
    """upstream's BuildTowerCommon helpers, each a tuple of stage entries (an entry that is a list upstream - "any
    of" - is one `any_of` here; a list inside it - "all of" - one `all_of`)."""

    def a_up_b(a: str, b: str, z: float = 0.025) -> Pred:
        return is_A_up_B(a, b, z_threshold_min=z)

    def pillars_under(p: str, q: str) -> Pred:
        return all_of(a_up_b("block0", p), a_up_b("block0", q), _tower_up(p), _tower_up(q))

    def aligned_either(a: str, b: str) -> Pred:
        return any_of(
            *(is_axis_aligned(a, (1, 0, 0), label_B=b, axis_B=ax, align_threshold=20) for ax in ((1, 0, 0), (-1, 0, 0)))
        )

    base = (
        any_of(
            pillars_under("block1", "block2"),
            pillars_under("block5", "block6"),
            pillars_under("block1", "block6"),
            pillars_under("block5", "block2"),
        ),
        _tower_up("block0"),
    )
    middle = (
        any_of(a_up_b("block1", "block0"), a_up_b("block5", "block0")),
        any_of(a_up_b("block2", "block0"), a_up_b("block6", "block0")),
        any_of(a_up_b("block7", "block1"), a_up_b("block7", "block5")),
        any_of(a_up_b("block7", "block2"), a_up_b("block7", "block6")),
        is_A_in_B_support_circle("block7", "block0", "block/0", radius=0.043),
    )
    top = (
        a_up_b("block3", "block7", 0.012),
        a_up_b("block4", "block3", 0.015),
        is_A_in_B_support_circle("block3", "block7", "block/0", radius=0.023),
        is_A_in_B_support_circle("block4", "block3", "block/0", radius=0.023),
    )
    alignment = (aligned_either("block3", "block7"), aligned_either("block4", "block3"))
    completion = (*(_tower_up(b) for b in TOWER), *alignment, *base, *middle, *top)
    return {"base": base, "middle": middle, "top": top, "completion": completion}


def _build_tower_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    c = _tower_checks()
    grip = is_all_gripper_open(0.8)
    base_upright = ("block0", "block1", "block2", "block5", "block6", "block7")
    return ProgramSpec(
        stages=((*c["completion"], all_robot_back_to_origin()),),
        score=ScoreSpec(
            stages=(
                (grip, is_not_moved("block0", 0.002, update=True), *c["base"]),
                (grip, is_not_moved("block7", 0.002, update=True), *(_tower_up(b) for b in base_upright), *c["base"],
                 *c["middle"]),
                (grip, *c["completion"]),
            ),
            gradient=(10.0, 30.0, 100.0),
        ),
    )


# ---------------------------------------------------------------------------------------------- play_Xylophone

XYLO_Z_RANGE = (0.01, 0.036)  # the mallet head 1 .. 3.6 cm above the key's hit point
XYLO_RISE = 0.025  # the mallet's root rises more than 2.5 cm above where it struck before the next key counts


def _xylophone_layout(placer: Placer, rng: np.random.Generator) -> str:
    # Upstream's stand is upright ("up", x in [-0.45, -0.2]) or on its side ("up_side", x in [-0.2, 0.05]); the
    # twin has one stand form (a low cradle) and samples x over the union of the two ranges.
    stand = placer.place(parts.mallet_stand(), "mallet_stand", ((-0.45, -0.2), (-0.2, 0.05)), (-0.2, 0.0),
                         rotate_deg=30, margin=0.02)
    mallet = placer.place_on(parts.mallet(), "mallet", stand, "mallet_stand/0")
    # The mallet is longer than its stand: keep the xylophone off the part that overhangs (check_mode "point"
    # upstream tests only the stand's footprint; the twin's fixture must not be placed through the mallet).
    placer.footprints.append(placer.footprint(mallet.spec, mallet.pose[0], mallet.pose[1], mallet.pose[3:], 0.02))
    placer.place(parts.xylophone(), "xylophone", (-0.1, 0.0), (-0.05, 0.05), rotate_deg=15, margin=0.02, static=True)
    return _instruction("play_Xylophone")


def _xylophone_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    lo, hi = XYLO_Z_RANGE
    stages: list[tuple[Pred, ...]] = []
    for key in range(parts.XYLO_KEYS):
        strike: tuple[Pred, ...] = (
            is_pointA_in_B_functional_bbox("mallet", "xylophone", f"bbox_{key}", A_tag="beat"),
            is_A_point_above_B_point_by_z_range("mallet", "xylophone", "beat", f"hit_{key}", z_upper=hi, z_lower=lo),
        )
        if key < parts.XYLO_KEYS - 1:
            stages.append((*strike, update_object_state("mallet")))
            stages.append((is_lift("mallet", z_threshold=XYLO_RISE),))
        else:
            stages.append(strike)
    return ProgramSpec(stages=tuple(stages))


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
REARRANGE_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("push_T", _push_t_layout(False), _push_t_program, False),
    ("push_T_random", _push_t_layout(True), _push_t_program, False),
    ("swap_T", _swap_t_layout, _swap_t_program, False),
    ("stack_bowls", _stack_bowls_layout(False), _stack_bowls_program, True),
    ("stack_bowls_random", _stack_bowls_layout(True), _stack_bowls_program, True),
    ("build_tower", _build_tower_layout, _build_tower_program, True),
    ("play_Xylophone", _xylophone_layout, _xylophone_program, False),
)
