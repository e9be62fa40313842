"""classify_objects, classify_objects_by_language and organize_table on the twin: a truth-driven script (it
teleports objects with the twin's truth - tests only) completes each task and the success check fires with score 1;
near misses per predicate kind do not fire; the score tiers follow upstream's; layouts follow upstream's ranges,
build and pass the stability rule; the task cards and the twin's facts agree with the catalogue."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pyrua_dojo.catalog import get_task as catalogue_task
from pyrua_dojo.twin import get_twin_task
from pyrua_dojo.twin import objects_classify as parts
from pyrua_dojo.twin.layouts import Layout
from pyrua_dojo.twin.reward import (
    WorldState,
    is_A_bbox_cover_rect_region,
    is_all_A_z_lower_than_B_bbox_zmax,
    is_not_any_A_in_B,
)
from pyrua_dojo.twin.tasks_classify import (
    BASKET_X,
    BASKET_Y,
    CLASSIFY_CATEGORIES,
    FIGURINE_INDICES,
    FIGURINE_XY,
    LANGUAGE_CATEGORIES,
    MOUSE_INDICES,
    category_labels,
)
from tests.support.twin_tasks import (
    HOME,
    STATION,
    TOP,
    eval_trivial_program,
    state_of,
    stated_facts,
    step_until_end,
    sweep_layouts,
    twin_at,
    yaw_q,
)
from tests.support.twin_tasks import run_program as run

NEW_TASKS = ("classify_objects", "classify_objects_by_language", "organize_table")


def basket_slots(lay: Layout, labels: tuple[str, ...], basket: str) -> dict[str, list[float]]:
    """Resting poses for `labels` side by side on `basket`'s floor (1 mm above it): elongated objects in a row
    along x with their long side along y, compact ones in a 2 x 2 grid."""
    b = lay.object(basket)
    floor = b.pose[2] - parts.BASKET_HALF[2] + parts.BASKET_WALL
    out: dict[str, list[float]] = {}
    for k, label in enumerate(labels):
        hx, hy, hz = lay.object(label).spec.half_extents
        long_half, short_half = max(hx, hy), min(hx, hy)
        if long_half <= 0.048 and short_half <= 0.035:
            dx, dy = (-0.05, 0.05)[k % 2], (-0.036, 0.036)[k // 2]
            yaw = 0.0 if hx >= hy else 90.0  # long side along x
        else:
            dx, dy = (k - 1) * 0.054, 0.0
            yaw = 90.0 if hx >= hy else 0.0  # long side along y
        out[label] = [b.pose[0] + dx, b.pose[1] + dy, floor + hz + 0.001, *yaw_q(yaw)]
    return out


def sorted_poses(lay: Layout, mapping: tuple[int, int, int]) -> dict[str, list[float]]:
    """Every category `c` in basket `mapping[c]`."""
    cats = category_labels(lay)
    poses: dict[str, list[float]] = {}
    for c, basket in enumerate(mapping):
        poses.update(basket_slots(lay, cats[c], f"basket{basket}"))
    return poses


# ------------------------------------------------------------------------------------------- new predicates


def test_new_predicates_mirror_upstream() -> None:
    lay = get_twin_task("classify_objects").layout(STATION, 0, 0)
    pens = category_labels(lay)[1]
    assert len(pens) == 3
    inside = basket_slots(lay, pens, "basket1")
    s = state_of(lay, inside)
    assert not is_not_any_A_in_B(pens, "basket1")(s) and is_not_any_A_in_B(pens, "basket0")(s)
    first = pens[0]
    one_in = {first: inside[first]}  # the other two still on the table
    assert not is_not_any_A_in_B(pens, "basket1")(state_of(lay, one_in))
    assert is_not_any_A_in_B(pens, "basket1")(state_of(lay, {}))
    top = lay.object("basket1").pose[2] + parts.BASKET_HALF[2]
    z_ok = is_all_A_z_lower_than_B_bbox_zmax(pens, "basket1", z_threshold=0.01)
    assert z_ok(s)
    high = dict(inside)
    high[first] = [*inside[first][:2], top + 0.0101, *inside[first][3:]]
    assert not z_ok(state_of(lay, high))
    high[first] = [*inside[first][:2], top + 0.0099, *inside[first][3:]]
    assert z_ok(state_of(lay, high))
    # is_A_bbox_cover_rect_region: a 30 x 10 cm box over the 20 x 6 cm region, then slid 6 cm off it.
    box = np.array([[sx * 0.15, sy * 0.05, sz * 0.01] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])

    def at(x: float, yaw: float = 0.0) -> WorldState:
        pose = np.array([x, 0.0, 0.8, *yaw_q(yaw)])
        return WorldState(objects={"k": pose}, initial_objects={"k": pose}, bboxes={"k": box}, ee=HOME, origin_ee=HOME,
                  gripper_open={"left": 1.0, "right": 1.0})

    cover = is_A_bbox_cover_rect_region("k", [0.0, -0.03, 0.2, 0.03])
    assert cover(at(0.1)) and cover(at(0.05)) and not cover(at(0.04)) and not cover(at(0.1, yaw=30.0))
    with pytest.raises(ValueError, match="positive area"):
        is_A_bbox_cover_rect_region("k", [0.0, 0.0, 0.2, 0.0])


# ------------------------------------------------------------------------------------------- facts and layouts


@pytest.mark.parametrize("task", NEW_TASKS)
def test_facts_come_from_the_catalogue_and_the_card_is_right(task: str) -> None:
    twin, cat, card = stated_facts(task)
    assert replace(twin, instruction="") == replace(cat, instruction="")
    assert catalogue_task(task).matches(twin.instruction)  # the instruction names this layout's categories
    assert (card.step_limit, card.back_to_origin, card.instruction) == (cat.step_limit, cat.back_to_origin, twin.instruction)
    spec = get_twin_task(task)
    lay = spec.layout(STATION, 0, 0)
    assert spec.program(lay, state_of(lay, {})).queries == ()  # upstream registers no instant failure for these


@pytest.mark.parametrize("table", [CLASSIFY_CATEGORIES, LANGUAGE_CATEGORIES])
def test_category_names_find_their_objects_and_only_them(table: tuple) -> None:
    """The segmentation stand-in matches a prompt to objects whose words cover it: upstream's category name (the
    by_language instruction's word) covers every instance of its category and no instance of the others."""
    from pyrua_dojo.seg_service.twin_backend import normalize_words

    specs = {name: [parts.category_object(name, i) for i in ids] for name, ids in table}
    for name in specs:
        wanted = normalize_words(name)
        for other, instances in specs.items():
            for spec in instances:
                assert (wanted <= normalize_words(spec.words)) is (other == name), (name, spec.key)


@pytest.mark.parametrize(("task", "table", "sizes"), [
    ("classify_objects", CLASSIFY_CATEGORIES, {1, 2, 3}),
    ("classify_objects_by_language", LANGUAGE_CATEGORIES, {2, 3}),
])
def test_basket_layouts_follow_upstream(task: str, table: tuple, sizes: set[int]) -> None:
    """Three distinct categories of upstream's list, 1 to 3 (by_language: 2 to 3) instances each from its indices,
    in upstream's region; the baskets welded at their fixed places; by_language names the categories in order."""
    allowed = dict(table)
    counts, categories = set(), set()
    for lid in range(25):
        lay = get_twin_task(task).layout(STATION, 0, lid)
        if task == "classify_objects_by_language":
            named = catalogue_task(task).parse(lay.instruction)
            assert named == {f"cat{c}": lay.object(f"cat{c}_0").spec.category for c in range(3)}
        for i, x in enumerate(BASKET_X):
            b = lay.object(f"basket{i}")
            assert b.static and b.pose[:2] == pytest.approx((x, BASKET_Y)) and b.spec.model_id == 2 + i
        cats = category_labels(lay)
        names = [{lay.object(lb).spec.category for lb in c} for c in cats]
        assert all(len(n) == 1 for n in names) and len({n.pop() for n in names}) == 3
        for c in cats:
            counts.add(len(c))
            for lb in c:
                o = lay.object(lb)
                categories.add(o.spec.category)
                assert o.spec.model_id in allowed[o.spec.category] and not o.static
                assert -0.43 <= o.pose[0] <= 0.43 and -0.23 <= o.pose[1] <= 0.0
                yaw = math.degrees(2 * math.atan2(o.pose[6], o.pose[3]))
                assert abs(yaw) <= 60.0 + 1e-6
    assert counts == sizes and categories == set(allowed)


@pytest.mark.slow
@pytest.mark.parametrize("task", NEW_TASKS)
def test_fifty_layouts_build_and_pass_the_stability_rule(task: str) -> None:
    """50 layouts compile and settle: none is dropped as unstable, and nothing moves more than 1 cm."""
    sweep = sweep_layouts(task)
    assert sweep.unbuilt == ()
    for seed, lid, label, d in sweep.drifts:
        assert d < 0.01, (task, seed, lid, label)
    assert sweep.unstable == ()


# ------------------------------------------------------------------------------------------ classify_objects


@pytest.mark.parametrize("mapping", [(0, 1, 2), (2, 0, 1)])
def test_classify_sorted_into_baskets_succeeds_with_any_mapping(mapping: tuple[int, int, int]) -> None:
    with twin_at("classify_objects", 2) as (env, truth, act):
        env.take_action(act)
        assert not truth.outcome().finished
        for label, pose in sorted_poses(truth.layout, mapping).items():
            truth.set_object_pose(label, pose)
        step_until_end(env, act, 3)
        out = truth.outcome()
        assert out.success and out.score == 1.0 and out.steps <= 4, out


def test_classify_near_misses_and_score_tiers() -> None:
    lay = get_twin_task("classify_objects").layout(STATION, 0, 2)  # 1 + 3 + 3 objects
    cats = category_labels(lay)
    assert [len(c) for c in cats] == [1, 3, 3]
    good = sorted_poses(lay, (1, 2, 0))
    assert run("classify_objects", lay, [state_of(lay, good)]).reward == 1.0
    # One object of category 1 left on the table: that basket no longer holds a whole category.
    miss = dict(good)
    miss[cats[1][0]] = [0.3, -0.15, TOP + 0.02, 1, 0, 0, 0]
    prog = run("classify_objects", lay, [state_of(lay, miss)])
    assert prog.reward == 0.0 and prog.process_score(success=False) == 15.0
    prog.step(state_of(lay, miss))
    assert prog.process_score(success=False) == 40.0  # two baskets right: the 40 tier, one step later
    # An object of category 2 moved into category 0's basket: its own basket lacks it, the other is not pure; only
    # the third basket counts for the score.
    mixed = dict(good)
    b1 = lay.object("basket1")
    mixed[cats[2][0]] = [b1.pose[0], b1.pose[1] - 0.05, good[cats[0][0]][2], 1, 0, 0, 0]
    prog = run("classify_objects", lay, [state_of(lay, mixed)] * 3)
    assert prog.reward == 0.0 and prog.process_score(success=False) == 15.0
    # An object resting 1 cm above its basket's rim (piled up): no success.
    high = dict(good)
    top = lay.object("basket1").pose[2] + parts.BASKET_HALF[2]
    high[cats[0][0]] = [*good[cats[0][0]][:2], top + 0.011, *good[cats[0][0]][3:]]
    assert run("classify_objects", lay, [state_of(lay, high)]).reward == 0.0
    # Sorted, but an arm 16 cm from home: no success (but the top score tier is reached with the grippers open).
    away = {"left": HOME["left"] + np.array([0.16, 0, 0, 0, 0, 0, 0]), "right": HOME["right"]}
    prog = run("classify_objects", lay, [state_of(lay, good, ee=away)])
    assert prog.reward == 0.0 and prog.process_score(success=False) == 15.0
    # Grippers closed: no score tier at all.
    assert run("classify_objects", lay, [state_of(lay, good, grip=0.5)]).process_score(success=False) == 0.0


# ------------------------------------------------------------------------------ classify_objects_by_language


def test_by_language_sorted_as_told_succeeds() -> None:
    with twin_at("classify_objects_by_language", 1) as (env, truth, act):
        for label, pose in sorted_poses(truth.layout, (0, 1, 2)).items():
            truth.set_object_pose(label, pose)
        step_until_end(env, act, 3)
        out = truth.outcome()
        assert out.success and out.score == 1.0 and out.steps <= 3, out


def test_by_language_near_misses_and_score_tiers() -> None:
    task = "classify_objects_by_language"
    lay = get_twin_task(task).layout(STATION, 0, 1)
    cats = category_labels(lay)
    assert run(task, lay, [state_of(lay, sorted_poses(lay, (0, 1, 2)))]).reward == 1.0
    # Sorted by category, but not into the baskets the instruction names: no success, no score.
    swapped = run(task, lay, [state_of(lay, sorted_poses(lay, (1, 0, 2)))] * 3)
    assert swapped.reward == 0.0 and swapped.process_score(success=False) == 10.0  # only category 2 is right
    rotated = run(task, lay, [state_of(lay, sorted_poses(lay, (1, 2, 0)))] * 3)
    assert rotated.reward == 0.0 and rotated.process_score(success=False) == 0.0
    # Categories 0 and 1 right, one object of category 2 still on the table: tiers 10 then 40.
    part = sorted_poses(lay, (0, 1, 2))
    part[cats[2][0]] = [0.3, -0.15, TOP + 0.03, 1, 0, 0, 0]
    prog = run(task, lay, [state_of(lay, part)])
    assert prog.reward == 0.0 and prog.process_score(success=False) == 10.0
    prog.step(state_of(lay, part))
    assert prog.process_score(success=False) == 40.0
    # Everything right except one object lying 1.1 cm above its basket's top: no success, 40 at most.
    high = sorted_poses(lay, (0, 1, 2))
    top = lay.object("basket2").pose[2] + parts.BASKET_HALF[2]
    high[cats[2][0]] = [*high[cats[2][0]][:2], top + 0.011, *high[cats[2][0]][3:]]
    prog = run(task, lay, [state_of(lay, high)] * 4)
    assert prog.reward == 0.0 and prog.process_score(success=False) == 40.0


# ---------------------------------------------------------------------------------------------- organize_table


def organized(lay: Layout, mouse_yaw: float = -90.0) -> dict[str, list[float]]:
    """Every item in its place, resting 1 mm above its support: the mouse turned so its long side runs along y."""
    o = {lb: lay.object(lb) for lb in ("mousemat", "frame", "cube_cushion", "drawer")}
    mat, frm, cushion, drawer = (o[k].pose for k in ("mousemat", "frame", "cube_cushion", "drawer"))
    return {
        "mouse": [mat[0], mat[1], mat[2] + parts.MOUSEMAT_HALF[2] + 0.02 + 0.001, *yaw_q(mouse_yaw)],
        "keyboard": [frm[0], frm[1] - parts.FRAME_WALL[0], TOP + parts.KEYBOARD_HALF[2] + 0.001, 1, 0, 0, 0],
        "garage": [cushion[0], cushion[1], cushion[2] + parts.CUSHION_HALF[2] + 0.036 + 0.001, *yaw_q(20.0)],
        "alarm": [drawer[0], drawer[1], drawer[2] + parts.DRAWER_HALF[2] + 0.055 + 0.001, 1, 0, 0, 0],
    }


def test_organize_layouts_follow_upstream() -> None:
    seen_mouse, seen_fig = set(), set()
    for lid in range(50):
        lay = get_twin_task("organize_table").layout(STATION, 0, lid)
        fixed = {lb: lay.object(lb) for lb in ("drawer", "cube_cushion", "monitor", "mousemat", "frame")}
        assert all(f.static and f.pose[3] == pytest.approx(1.0) for f in fixed.values())
        assert -0.45 <= fixed["drawer"].pose[0] <= -0.25 and fixed["drawer"].pose[1] == pytest.approx(0.15)
        assert fixed["cube_cushion"].pose[:2] == pytest.approx((-0.15, 0.1))
        assert -0.05 <= fixed["monitor"].pose[0] <= 0.15 and 0.2 <= fixed["monitor"].pose[1] <= 0.25
        assert 0.35 <= fixed["mousemat"].pose[0] <= 0.5 and -0.1 <= fixed["mousemat"].pose[1] <= 0.05
        assert fixed["frame"].pose[:2] == pytest.approx((0.1, 0.0))
        mouse, alarm, kb, fig = (lay.object(lb) for lb in ("mouse", "alarm", "keyboard", "garage"))
        assert 0.0 <= mouse.pose[0] <= 0.45 and -0.3 <= mouse.pose[1] <= 0.05
        assert -0.05 <= kb.pose[0] <= 0.05 and -0.2 <= kb.pose[1] <= -0.15 and kb.pose[3] == pytest.approx(1.0)
        for item in (alarm, fig):
            assert -0.45 <= item.pose[0] <= 0.0 and -0.3 <= item.pose[1] <= 0.05
        assert alarm.pose[3] == pytest.approx(1.0)
        for item in (mouse, fig):
            assert abs(math.degrees(2 * math.atan2(item.pose[6], item.pose[3]))) <= 45.0 + 1e-6
        seen_mouse.add(mouse.spec.model_id)
        seen_fig.add(fig.spec.model_id)
    assert seen_mouse == set(MOUSE_INDICES) and seen_fig == set(FIGURINE_INDICES)


def test_organize_done_succeeds_once_everything_is_still() -> None:
    with twin_at("organize_table", 3) as (env, truth, act):
        for label, pose in organized(truth.layout).items():
            truth.set_object_pose(label, pose)
        step_until_end(env, act, 12)
        out = truth.outcome()
        # Each item's stillness check first sees it moved (its baseline is the start pose), then still: the four
        # checks run in turn, so success comes on the fifth step at the earliest.
        assert out.success and out.score == 1.0 and 5 <= out.steps <= 8, out


def test_organize_near_misses() -> None:
    task = "organize_table"
    lay = get_twin_task(task).layout(STATION, 0, 3)
    good = organized(lay)
    prog = run(task, lay, [state_of(lay, good)] * 5)
    assert prog.reward == 1.0 and prog.process_score(success=True) == 100.0

    def fails(poses: dict[str, list[float]], steps: int = 8) -> bool:
        return run(task, lay, [state_of(lay, poses)] * steps).reward == 0.0

    assert fails({**good, "mouse": organized(lay, mouse_yaw=-44.0)["mouse"]})  # not turned far enough (45 deg)
    assert not fails({**good, "mouse": organized(lay, mouse_yaw=-46.0)["mouse"]})
    mat = lay.object("mousemat").pose
    assert fails({**good, "mouse": [mat[0] + parts.MOUSEMAT_HALF[0] + 0.001, *good["mouse"][1:]]})  # off the mat
    kb = good["keyboard"]
    assert fails({**good, "keyboard": [0.151, *kb[1:]]})  # its left end past x = 0: the region is not covered
    assert not fails({**good, "keyboard": [0.149, *kb[1:]]})
    assert fails({**good, "keyboard": [kb[0], kb[1], kb[2], *yaw_q(50.0)]})
    fig = good["garage"]
    xy = FIGURINE_XY.get(lay.object("garage").spec.model_id, 0.02)
    assert fails({**good, "garage": [fig[0] + xy + 0.001, *fig[1:]]})
    assert not fails({**good, "garage": [fig[0] + xy - 0.001, *fig[1:]]})
    tilt = [math.cos(math.radians(8)), math.sin(math.radians(8)), 0.0, 0.0]  # 16 deg about x
    assert fails({**good, "garage": [*fig[:3], *tilt]})
    al = good["alarm"]
    assert fails({**good, "alarm": [al[0], al[1], lay.object("drawer").pose[2] + 0.2249, *al[3:]]})
    assert fails({**good, "alarm": lay.object("alarm").pose})  # still on the table
    # Stillness: the keyboard jiggling 3 mm between steps never passes; 1 mm does.
    for dx, expected in ((0.003, 0.0), (0.001, 1.0)):
        states = [state_of(lay, {**good, "keyboard": [kb[0] + dx * (k % 2), *kb[1:]]}) for k in range(8)]
        assert run(task, lay, states).reward == expected, dx
    # Arms away from home: no success, but the top score tier with the grippers open.
    away = {"left": HOME["left"] + np.array([0, 0, 0.16, 0, 0, 0, 0]), "right": HOME["right"]}
    prog = run(task, lay, [state_of(lay, good, ee=away)] * 6)
    assert prog.reward == 0.0 and prog.process_score(success=False) == 75.0  # 100 is withheld on failure


def test_organize_score_tiers_count_items_in_place() -> None:
    task = "organize_table"
    lay = get_twin_task(task).layout(STATION, 0, 3)
    good = organized(lay)
    for n, items in enumerate((("alarm",), ("alarm", "mouse"), ("alarm", "mouse", "garage")), start=1):
        poses = {k: good[k] for k in items}
        prog = run(task, lay, [state_of(lay, poses)] * 6)
        assert prog.reward == 0.0 and prog.process_score(success=False) == 25.0 * n, items
    closed = run(task, lay, [state_of(lay, good, grip=0.7)] * 6)
    assert closed.reward == 1.0 and closed.process_score(success=True) == 0.0  # the score wants open grippers


# ------------------------------------------------------------------------------------------------ end to end

@pytest.mark.slow
@pytest.mark.parametrize("task", NEW_TASKS)
def test_eval_runs_each_task_to_its_step_limit_and_books_a_failure(task: str, tmp_path) -> None:
    done = eval_trivial_program([task], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result, record = done.booked(task)
    assert [(e.layout_id, e.success, e.score) for e in result.episodes] == [(0, False, 0.0)]
    assert record is not None and record.step_limit == catalogue_task(task).step_limit and not record.success
    assert record.extra.get("failure") == "step limit"
