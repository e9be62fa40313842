"""Twin tasks of RoboDojo's Precision dimension that insert one thing into another: fasten_screws,
plug_in_charger, insert_tubes, pour_balls_into_vase, deposit_coin and insert_key (none has a `_random` variant).

Each follows upstream RoboDojo: `task/RoboDojo/tasks/<task>.py` for `run_reward` (the success stage) and
`get_score` (the process score), `task/RoboDojo/config/<task>.yml` for objects, index lists, ranges, rotations,
margins and prohibited areas. Fixtures (`Geometry`) are placed before free objects (parents before what rests on
them; RoboDojo generates its layouts offline and ships them, so the order is the twin's). Step limits, episode
counts, instructions, dimensions and the back-to-origin flag come from the catalogue (`pyrua_dojo.catalog`), where
`tasks.py` registers `PRECISION_TASKS`. None of these tasks has a query, so none can fail before its step limit.
The assets are `objects_precision.py`.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_precision as P
from pyrua_dojo.twin.layouts import Layout, LayoutFn, Placer, ProgramFn
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_bbox_in_B_bbox,
    is_A_depth_in_B,
    is_A_in_B,
    is_AB_xy_distance_within_threshold,
    is_all_gripper_open,
    is_axis_aligned,
    is_axis_up,
    is_lift,
)

B = all_robot_back_to_origin
LEFT_RIGHT = ((-0.35, -0.15), (0.15, 0.35))


def _instruction(task: str) -> str:
    return catalogued(task).instruction


def _items_score(groups: list[tuple[Pred, ...]], gradient: tuple[float, float, float]) -> ScoreSpec:
    """RoboDojo's item-count score: any one item's checks, then any two items', then all three, each with the
    grippers at least 0.8 open (the `_single_item_score_options` / `_combined_item_score_options` pattern)."""
    grip = is_all_gripper_open(0.8)
    single = any_of(*(all_of(*g) for g in groups))
    pairs = any_of(*(all_of(*a, *b) for a, b in combinations(groups, 2)))
    return ScoreSpec(stages=((grip, single), (grip, pairs), (grip, *[p for g in groups for p in g])), gradient=gradient)


# ------------------------------------------------------------------------------------------------ fasten_screws

NUTS = ("nut0", "nut1", "nut2")
BOLTS = ("bolt0", "bolt1", "bolt2")


def _fasten_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.add_prohibited([-0.05, -0.17, 0.05, -0.13])
    ids = [int(i) for i in rng.choice(np.arange(5), size=3, replace=False)]  # `unique` of factory_nut[0..4]
    for bolt, model_id in zip(BOLTS, ids):  # `same_index_as_label`: bolt i has nut i's index
        placer.place(P.factory_bolt(model_id), bolt, LEFT_RIGHT, (-0.2, -0.15), margin=0.035, static=True)
    for nut, model_id in zip(NUTS, ids):
        placer.place(P.factory_nut(model_id), nut, (-0.45, 0.45), (-0.25, -0.05))  # rotate_rand False
    return _instruction("fasten_screws")


def _screw_checks(i: int) -> tuple[Pred, ...]:
    return (
        is_axis_up(NUTS[i], (0.0, 0.0, 1.0), threshold=10),
        is_AB_xy_distance_within_threshold(NUTS[i], BOLTS[i], threshold=0.001),
        is_A_depth_in_B(NUTS[i], BOLTS[i], z_threshold=0.009),
    )


def _fasten_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    groups = [_screw_checks(i) for i in range(3)]
    return ProgramSpec(
        stages=((*[p for g in groups for p in g], is_all_gripper_open(0.9), B()),),
        score=_items_score(groups, (20.0, 50.0, 100.0)),
    )


# --------------------------------------------------------------------------------------------- plug_in_charger


def _charger_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(P.charger(), "charger", ((-0.45, -0.1), (0.1, 0.45)), (-0.25, -0.1), rotate_deg=30)
    placer.place(P.socket(), "socket", ((-0.4, -0.15), (0.15, 0.4)), (-0.15, -0.05), rotate_deg=30)
    return _instruction("plug_in_charger")


def _charger_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    return ProgramSpec(
        stages=(
            (
                is_A_depth_in_B("charger", "socket", z_threshold=0.015),
                is_A_in_B("charger", "socket"),
                is_axis_up("charger", (0.0, 1.0, 0.0), threshold=10),
                B(),
            ),
        )
    )


# ------------------------------------------------------------------------------------------------ insert_tubes

TUBES = ("tube0", "tube1", "tube2")


def _tubes_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(P.test_tube_slot(), "slot", (0.0, 0.0), (-0.025, 0.025), rotate_deg=15, static=True)
    for tube in TUBES:  # `place_tag: side`: the twin's tube lies on its side in its own frame
        placer.place(P.test_tube(), tube, ((-0.4, -0.15), (0.15, 0.4)), (-0.25, -0.05), rotate_deg=60)
    return _instruction("insert_tubes")


def _tube_checks(i: int) -> tuple[Pred, ...]:
    return (
        is_A_depth_in_B(TUBES[i], "slot", z_threshold=0.045),
        is_A_in_B(TUBES[i], "slot"),
        is_axis_up(TUBES[i], (0.0, 1.0, 0.0), threshold=30),
    )


def _tubes_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    groups = [_tube_checks(i) for i in range(3)]
    depth = [g[0] for g in groups]
    inside = [g[1] for g in groups]
    up = [g[2] for g in groups]
    return ProgramSpec(stages=((*depth, *inside, *up, B()),), score=_items_score(groups, (20.0, 40.0, 100.0)))


# ---------------------------------------------------------------------------------------- pour_balls_into_vase

BALLS = tuple(f"sphere_{i}" for i in range(7))


def _pour_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(P.vase(int(rng.integers(5))), "vase", (-0.35, 0.35), (-0.12, 0.05), rotate_deg=45, static=True)
    cup = placer.place(P.cup6(), "cup", (-0.4, 0.4), (-0.2, 0.05), rotate_deg=75)
    inner = P.CUP6[0] - P.CUP6[2]
    for ball in BALLS:  # `relative_plane: cup`, check_mode enforce, need_check_stable False
        placer.place_on(P.sphere(), ball, cup, "inside", (-0.02, 0.02), (-0.02, 0.02), rotate_deg=75,
                        check_stable=False, within=inner)
    return _instruction("pour_balls_into_vase")


def _pour_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    return ProgramSpec(
        stages=((*[is_A_in_B(b, "vase") for b in BALLS], is_axis_up("cup", (0.0, 0.0, 1.0)), B()),)
    )


# ------------------------------------------------------------------------------------------------ deposit_coin


def _coin_layout(placer: Placer, rng: np.random.Generator) -> str:
    stand = placer.place(P.vertical_coin_stand(), "vertical_coin_stand", (-0.43, 0.43), (-0.2, -0.05),
                         rotate_deg=30, static=True)
    placer.place(P.piggy_bank(), "piggy_bank", ((-0.4, -0.3), (0.3, 0.4)), (-0.2, -0.15), rotate_deg=15,
                 margin=0.04, static=True)
    placer.place_on(P.coin(), "coin0", stand, "slit")  # `relative_plane: vertical_coin_stand`, check_mode point
    return _instruction("deposit_coin")


def _coin_in_bank() -> Pred:
    return is_A_bbox_in_B_bbox("coin0", "piggy_bank", B_bottom_point="bottom", B_top_point="center")


def _coin_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    return ProgramSpec(
        stages=((_coin_in_bank(), B()),),
        score=ScoreSpec(stages=((is_lift("coin0", z_threshold=0.08),), (_coin_in_bank(),)), gradient=(20.0, 100.0)),
    )


# -------------------------------------------------------------------------------------------------- insert_key

KEY_TURN_AXIS = (0.5, -math.sqrt(3.0) / 2.0, 0.0)  # the slot's x axis turned by -60 deg about its z


def _key_layout(placer: Placer, rng: np.random.Generator) -> str:
    xlim = ((-0.2, -0.1), (0.1, 0.2))
    placer.place(P.key_slot(), "slot", xlim, (-0.2, -0.15), rotate_deg=30, static=True)
    placer.place(P.key(), "key", xlim, (-0.2, -0.1), rotate_deg=30)
    return _instruction("insert_key")


def _key_checks() -> tuple[Pred, ...]:
    return (
        is_A_depth_in_B("key", "slot", z_threshold=0.025),
        is_AB_xy_distance_within_threshold("key", "slot", threshold=0.007),
        is_axis_up("key", (0.0, 0.0, 1.0), threshold=7),
        is_axis_aligned("key", (1.0, 0.0, 0.0), label_B="slot", axis_B=KEY_TURN_AXIS, align_threshold=30),
    )


def _key_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    return ProgramSpec(
        stages=(_key_checks(),),  # no back-to-origin: the arm may still hold the turned key
        score=ScoreSpec(stages=((is_lift("key", z_threshold=0.05),), _key_checks()), gradient=(15.0, 100.0)),
    )


# ------------------------------------------------------------------------------------------------------ registry

#: (task, layout, program, has a process score) for `tasks.py` to register with the catalogue's facts.
PRECISION_TASKS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("fasten_screws", _fasten_layout, _fasten_program, True),
    ("plug_in_charger", _charger_layout, _charger_program, False),
    ("insert_tubes", _tubes_layout, _tubes_program, True),
    ("pour_balls_into_vase", _pour_layout, _pour_program, False),
    ("deposit_coin", _coin_layout, _coin_program, True),
    ("insert_key", _key_layout, _key_program, True),
)
