"""Twin tasks that sort and tidy: classify_objects, classify_objects_by_language (three baskets) and organize_table.

Each follows upstream RoboDojo (`task/RoboDojo/tasks/<task>.py` for `run_reward` / `get_score`,
`task/RoboDojo/config/<task>.yml` for objects, ranges and rotations); the assets are the twin's
(`objects_classify.py`). Step limits, episode counts, instructions, dimensions and the back-to-origin flag come from
the catalogue (`pyrua_dojo.catalog`) when `tasks.py` registers these rows.

Upstream writes "any of" / "all of" as nested lists inside one check (`RewardManager.check_once`: a list in a stage
is "any of", a list inside that "all of", alternating); here they are `any_of` / `all_of`, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations

import numpy as np

from pyrua_dojo.catalog import get_task as catalogued
from pyrua_dojo.twin import objects_classify as parts
from pyrua_dojo.twin.layouts import Layout, Placer
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_all_A_in_B,
    is_all_A_z_lower_than_B_bbox_zmax,
    is_all_gripper_open,
    is_not_any_A_in_B,
)

LayoutFn = Callable[[Placer, np.random.Generator], str]
ProgramFn = Callable[[Layout, WorldState], ProgramSpec]

# --------------------------------------------------------------------------------------- the three-basket tasks

BASKETS = ("basket0", "basket1", "basket2")
BASKET_X = (-0.28, 0.0, 0.28)  # left, middle, right (upstream's Geometry entries, y 0.05, indices 2, 3, 4)
BASKET_Y = 0.05
RIM_Z = 0.01  # an object's root at most this far above its basket's top

#: upstream's Rigid categories and indices, in config order (an empty tuple upstream - "every index" - is the
#: twin's every index of that category).
CLASSIFY_CATEGORIES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("toy_car", (0, 1, 2, 3, 4)),
    ("action_camera", tuple(sorted(parts.ACTION_CAMERA_LOOKS))),
    ("pen", (0, 1, 4)),
    ("watch", (0, 1, 2)),
    ("garage", (14, 15)),
)
LANGUAGE_CATEGORIES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("watch", (4, 5, 6, 7)),
    ("car", (10, 11, 12, 13, 14, 15)),
    ("wooden_toy", (0, 1, 2, 3, 4)),
    ("pepper", tuple(sorted(parts.PEPPER_LOOKS))),
    ("chocolate_bar", (0, 1, 2, 3, 4)),
)


def _basket_layout(
    categories: Sequence[tuple[str, Sequence[int]]], instances: tuple[int, int], instruction: Callable[[list[str]], str]
) -> LayoutFn:
    """Upstream's `hierarchical` selection: 3 distinct categories (labels `cat0_*`, `cat1_*`, `cat2_*`), of each
    `instances` (inclusive range) instances drawn with repetition (`allow_duplicate`), placed in x [-0.43, 0.43],
    y [-0.23, 0.0], yaw +-60 deg, margin 1 cm; the baskets (fixtures) first."""

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        for i, (label, x) in enumerate(zip(BASKETS, BASKET_X)):
            placer.place(parts.basket(2 + i), label, (x, x), (BASKET_Y, BASKET_Y), static=True)
        chosen = rng.choice(len(categories), size=3, replace=False)
        names = []
        for c, k in enumerate(chosen):
            name, indices = categories[int(k)]
            names.append(name)
            count = int(rng.integers(instances[0], instances[1] + 1))
            for j, model_id in enumerate(rng.choice(np.array(indices), size=count, replace=True)):
                placer.place(parts.category_object(name, int(model_id)), f"cat{c}_{j}", (-0.43, 0.43), (-0.23, 0.0),
                             rotate_deg=60, margin=0.01)
        return instruction(names)

    return fn


def category_labels(layout: Layout) -> tuple[tuple[str, ...], ...]:
    """Upstream's `get_label_by_prefix("cat0")` .. `("cat2")`: the labels of each category, in layout order."""
    return tuple(tuple(o.label for o in layout.objects if o.label.startswith(f"cat{c}_")) for c in range(3))


def _settled(cats: Sequence[tuple[str, ...]]) -> tuple[Pred, ...]:
    """Upstream pairs category i with basket i here (both tasks): each object's root < 1 cm above that basket's top.
    The twin's three baskets are equally tall, so for the success check the pairing changes nothing."""
    return tuple(is_all_A_z_lower_than_B_bbox_zmax(c, b, z_threshold=RIM_Z) for c, b in zip(cats, BASKETS))


def _pure(cats: Sequence[tuple[str, ...]], c: int, basket: str) -> tuple[Pred, ...]:
    """Category c wholly in `basket`, below its rim, and no object of another category in it."""
    others = [i for i in range(len(cats)) if i != c]
    if c == len(cats) - 1:
        others.reverse()  # upstream's order (no stateful predicate here: the order changes nothing)
    return (
        is_all_A_in_B(cats[c], basket),
        is_all_A_z_lower_than_B_bbox_zmax(cats[c], basket, z_threshold=RIM_Z),
        *(is_not_any_A_in_B(cats[i], basket) for i in others),
    )


def _classify_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    """classify_objects: each basket holds some whole category (any mapping); upstream's score tiers: one, two,
    then three baskets each holding one whole category and nothing else, grippers open (15, 40, 100)."""
    cats = category_labels(layout)
    grip = is_all_gripper_open(0.8)

    def basket_ok(basket: str) -> Pred:
        return any_of(*(all_of(*_pure(cats, c, basket)) for c in range(len(cats))))

    b0, b1, b2 = (basket_ok(b) for b in BASKETS)
    holds = tuple(any_of(*(is_all_A_in_B(c, b) for c in cats)) for b in BASKETS)
    return ProgramSpec(
        stages=((*holds, *_settled(cats), all_robot_back_to_origin()),),
        score=ScoreSpec(
            stages=(
                (grip, any_of(b0, b1, b2)),
                (grip, any_of(all_of(b0, b1), all_of(b0, b2), all_of(b1, b2))),
                (grip, b0, b1, b2),
            ),
            gradient=(15.0, 40.0, 100.0),
        ),
    )


def _classify_instruction(names: list[str]) -> str:
    return catalogued("classify_objects").instruction


def _language_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    """classify_objects_by_language: category i in basket i (left, middle, right); score tiers: one, two, then all
    three categories each wholly in its own basket and alone there, grippers open (10, 40, 100)."""
    cats = category_labels(layout)
    grip = is_all_gripper_open(0.8)
    own = [(*_own_basket(cats, c), grip) for c in range(len(cats))]
    return ProgramSpec(
        stages=((*(is_all_A_in_B(c, b) for c, b in zip(cats, BASKETS)), *_settled(cats), all_robot_back_to_origin()),),
        score=ScoreSpec(
            stages=(
                (grip, any_of(*(all_of(*checks) for checks in own))),
                (grip, any_of(*(all_of(*a, *b) for a, b in combinations(own, 2)))),
                (grip, *own[0], *own[1], *own[2]),
            ),
            gradient=(10.0, 40.0, 100.0),
        ),
    )


def _own_basket(cats: Sequence[tuple[str, ...]], c: int) -> tuple[Pred, ...]:
    """upstream's `_cat<c>_checks` (without their trailing gripper check): category c wholly in basket c, below its
    rim, and the other categories (in increasing order) not in it."""
    basket = BASKETS[c]
    return (
        is_all_A_in_B(cats[c], basket),
        is_all_A_z_lower_than_B_bbox_zmax(cats[c], basket, z_threshold=RIM_Z),
        *(is_not_any_A_in_B(cats[i], basket) for i in range(len(cats)) if i != c),
    )


def _language_instruction(names: list[str]) -> str:
    """upstream's template with each category's `model_name` (the twin's category name, written as upstream's
    config spells it)."""
    c0, c1, c2 = names
    return catalogued("classify_objects_by_language").fill(cat0=c0, cat1=c1, cat2=c2)


# ------------------------------------------------------------------------------------------------------ registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
CLASSIFY_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("classify_objects", _basket_layout(CLASSIFY_CATEGORIES, (1, 3), _classify_instruction), _classify_program, True),
    ("classify_objects_by_language", _basket_layout(LANGUAGE_CATEGORIES, (2, 3), _language_instruction),
     _language_program, True),
)
