"""Segmentation noise modelling SAM 3's failures: each mode changes masks the way `TwinNoise` says.

Rates are measured over many backend seeds on fixed images (each seed is an independent draw of the same
request), on synthetic scenes where the geometry is controlled and on a real twin layout where it is not.
"""

from __future__ import annotations

import numpy as np
import pytest

from pyrua_dojo.seg_service.twin_backend import (
    NOISE_LEVELS,
    DictMaskOracle,
    ObjectMask,
    TwinBackend,
    TwinNoise,
    boundary_error_px,
    noise_level,
    occlusion,
)
from pyrua_dojo.twin import TwinConfig, TwinEnv
from pyrua_dojo.twin.masks import FINGER_PAD_WORDS

DRAWS = 200


def square(hw: tuple[int, int], x: int, y: int, side: int) -> np.ndarray:
    m = np.zeros(hw, bool)
    m[y : y + side, x : x + side] = True
    return m


def answers(oracle: DictMaskOracle, image: np.ndarray, noise: TwinNoise, prompt: str, draws: int = DRAWS):
    """The answer to one request from `draws` backends with different seeds (independent draws)."""
    return [TwinBackend(oracle, noise=noise, seed=k).segment(image, [prompt], 0.0, 20, [])[0] for k in range(draws)]


def test_levels_are_named_ordered_and_none_is_the_oracle() -> None:
    assert tuple(NOISE_LEVELS) == ("none", "mild", "realistic", "harsh")
    assert NOISE_LEVELS["none"].is_clean and not any(NOISE_LEVELS[k].is_clean for k in ("mild", "realistic", "harsh"))
    for field in ("miss_half_area_px", "occlusion_miss", "merge_prob", "boundary_px", "false_positive_prob",
                  "score_sigma"):
        values = [getattr(NOISE_LEVELS[k], field) for k in ("mild", "realistic", "harsh")]
        assert values == sorted(values) and values[0] > 0, field
    assert noise_level("realistic") is NOISE_LEVELS["realistic"]
    with pytest.raises(ValueError, match="none.*mild.*realistic.*harsh"):
        noise_level("sam3")
    with pytest.raises(ValueError):
        TwinNoise(merge_prob=1.5)
    with pytest.raises(ValueError):
        TwinNoise(boundary_px=-1.0)


@pytest.mark.slow
def test_miss_rate_follows_visible_area() -> None:
    noise = TwinNoise(miss_half_area_px=100.0, miss_area_slope=2.5, score_spread=0.0)
    hw = (240, 320)
    image = np.full((*hw, 3), 90, np.uint8)
    oracle = DictMaskOracle()
    sides = {"tiny": 5, "half": 10, "big": 30}  # 25, 100, 900 px
    objects = [ObjectMask(frozenset({w, "block"}), square(hw, 20 + 60 * i, 50, s), w)
               for i, (w, s) in enumerate(sides.items())]
    oracle.add(image, objects)
    for word, side in sides.items():
        found = sum(len(a) for a in answers(oracle, image, noise, f"{word} block"))
        expected = 1.0 / (1.0 + (side * side / 100.0) ** 2.5)
        assert abs((DRAWS - found) / DRAWS - expected) < 0.07, (word, found, expected)
    assert noise.miss_probability(100.0) == pytest.approx(0.5)


def test_miss_rate_rises_with_occlusion() -> None:
    noise = TwinNoise(occlusion_onset=0.5, occlusion_miss=0.6, score_spread=0.0)
    hw = (200, 200)
    image = np.full((*hw, 3), 60, np.uint8)
    mask = square(hw, 50, 50, 20)  # 400 visible px
    oracle = DictMaskOracle()
    objects = [
        ObjectMask(frozenset({"open", "cup"}), mask, "open", silhouette_px=400.0),
        ObjectMask(frozenset({"hidden", "cup"}), square(hw, 120, 120, 20), "hidden", silhouette_px=1600.0),
    ]
    oracle.add(image, objects)
    assert occlusion(400, 1600) == pytest.approx(0.75)
    open_found = sum(len(a) for a in answers(oracle, image, noise, "open cup"))
    hidden_found = sum(len(a) for a in answers(oracle, image, noise, "hidden cup"))
    assert open_found == DRAWS  # unoccluded: never missed at this level of occlusion noise
    expected_miss = 0.6 * (0.75 - 0.5) / 0.5
    assert abs((DRAWS - hidden_found) / DRAWS - expected_miss) < 0.07


@pytest.mark.slow
def test_touching_same_coloured_instances_merge_at_the_stated_rate() -> None:
    noise = TwinNoise(merge_prob=0.5, score_spread=0.0)
    hw = (200, 300)
    image = np.zeros((*hw, 3), np.uint8)
    pair = [square(hw, 20, 20, 30), square(hw, 51, 20, 30)]  # 1 px apart: touching
    mixed = [square(hw, 20, 120, 30), square(hw, 50, 120, 30)]  # touching, different colours
    apart = [square(hw, 150, 20, 30), square(hw, 230, 20, 30)]  # same colour, far apart
    for m in pair + apart:
        image[m] = (200, 30, 30)
    image[mixed[0]] = (200, 30, 30)
    image[mixed[1]] = (30, 30, 200)
    oracle = DictMaskOracle()
    oracle.add(image, [ObjectMask(frozenset({"red", "block"}), m, f"p{i}") for i, m in enumerate(pair)])
    merged = [len(a) == 1 for a in answers(oracle, image, noise, "red block")]
    assert abs(np.mean(merged) - 0.5) < 0.08
    one = next(a for a in answers(oracle, image, noise, "red block", 20) if len(a) == 1)
    assert one[0][1].sum() == pair[0].sum() + pair[1].sum()  # the merged mask is the union
    # Different colours do not merge, nor do same-coloured blocks that do not touch.
    oracle1 = DictMaskOracle()
    oracle1.add(image, [ObjectMask(frozenset({"block"}), m, f"m{i}") for i, m in enumerate(mixed)])
    assert all(len(a) == 2 for a in answers(oracle1, image, TwinNoise(merge_prob=1.0), "block", 100))
    oracle2 = DictMaskOracle()
    oracle2.add(image, [ObjectMask(frozenset({"red", "block"}), m, f"a{i}") for i, m in enumerate(apart)])
    assert all(len(a) == 2 for a in answers(oracle2, image, TwinNoise(merge_prob=1.0), "red block", 100))


def test_false_positives_on_objects_sharing_words_and_score_noise() -> None:
    noise = TwinNoise(false_positive_prob=0.2, false_positive_score=(0.5, 0.7), match_score=0.8, score_spread=0.0,
                      score_sigma=0.05)
    hw = (100, 200)
    image = np.zeros((*hw, 3), np.uint8)
    oracle = DictMaskOracle()
    oracle.add(image, [ObjectMask(frozenset({"red", "block"}), square(hw, 10, 10, 20), "red"),
                       ObjectMask(frozenset({"blue", "block"}), square(hw, 100, 10, 20), "blue"),
                       ObjectMask(frozenset({"green", "cup"}), square(hw, 150, 50, 20), "cup")])
    runs = answers(oracle, image, noise, "red block")
    extra = [a[1:] for a in runs]
    rate = np.mean([len(e) for e in extra])
    assert abs(rate - 0.2) < 0.06  # only the blue block shares a word; the cup never appears
    assert all(0.5 <= s <= 0.7 for e in extra for s, _ in e)
    true_scores = np.array([a[0][0] for a in runs])
    assert abs(true_scores.mean() - 0.8) < 0.01 and abs(true_scores.std() - 0.05) < 0.01


@pytest.fixture(scope="module")
def twin_head() -> tuple[np.ndarray, list[ObjectMask]]:
    """The head image of stack_blocks seed 4 layout 0 with its objects' true masks."""
    env = TwinEnv(TwinConfig(segmentation=True))
    try:
        env.reset("stack_blocks", 4, 0)
        image = env.get_obs()["vision"]["cam_head"]["color"]
        objects = [o for o in env.truth(0).mask_oracle.lookup(image) if o.words != FINGER_PAD_WORDS]  # objects only
    finally:
        env.close()
    return image, objects


def test_twin_objects_carry_their_unoccluded_silhouette(twin_head) -> None:
    _, objects = twin_head
    assert len(objects) == 3
    for obj in objects:
        visible = float(obj.mask.sum())
        # The bounding-box hull covers at least what is visible (a pixel or two of rasterisation aside).
        assert obj.silhouette_px > 0 and visible <= 1.1 * obj.silhouette_px


@pytest.mark.parametrize("level", ["none", "mild", "realistic", "harsh"])
def test_boundary_error_on_a_twin_layout_matches_the_level(twin_head, level) -> None:
    image, objects = twin_head
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    noise = NOISE_LEVELS[level]
    errors = []
    for k in range(12):
        for obj in objects:
            prompt = " ".join(sorted(obj.words & {"red", "green", "blue", "yellow", "orange", "purple"})) + " block"
            for _, mask in TwinBackend(oracle, noise=noise, seed=k).segment(image, [prompt], 0.0, 20, [])[0]:
                if (mask & obj.mask).sum() > 0.5 * obj.mask.sum():
                    errors.append(boundary_error_px(obj.mask, mask))
    assert errors
    mean = float(np.mean(errors))
    if level == "none":
        assert mean == 0.0
    else:
        b = noise.boundary_px
        assert 0.4 * b < mean < 1.3 * b, (level, mean)


def test_requests_are_idempotent_and_levels_share_their_draws(twin_head) -> None:
    image, objects = twin_head
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    a = TwinBackend(oracle, noise=NOISE_LEVELS["harsh"], seed=3).segment(image, ["block"], 0.0, 20, [])[0]
    b = TwinBackend(oracle, noise=NOISE_LEVELS["harsh"], seed=3).segment(image, ["block"], 0.0, 20, [])[0]
    assert [s for s, _ in a] == [s for s, _ in b] and all(np.array_equal(x, y) for (_, x), (_, y) in zip(a, b))
    assert TwinBackend(oracle, noise=NOISE_LEVELS["realistic"]).info.code.startswith("twin+noise(realistic)")


@pytest.mark.slow
def test_noise_bench_measures_the_levels_on_twin_images() -> None:
    from pyrua_dojo.benchmarks.seg_noise import measure

    figures = measure(layouts=1, seed=4, draws=3)
    none, harsh = figures["none"], figures["harsh"]
    assert none.asked > 0 and none.missed == 0 and none.false_positives == 0 and max(none.boundary) == 0.0
    assert harsh.missed > 0 and np.mean(harsh.boundary) > np.mean(figures["mild"].boundary) > 0
