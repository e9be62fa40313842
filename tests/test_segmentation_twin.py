"""Twin segmentation backend: prompt matching, seeded noise, unknown images, and the real server + client."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from primitives.seg_client import SegmentationClient
from pyrua_dojo.seg_service import (
    DictMaskOracle,
    MaskOracle,
    ObjectMask,
    SegmentationRequestError,
    SegmentationServer,
    TwinBackend,
    TwinNoise,
)
from pyrua_dojo.benchmarks.seg import synthetic_scene
from pyrua_dojo.seg_service.serve import serve_twin
from pyrua_dojo.seg_service.twin_backend import normalize_words

H, W = 60, 80


def rect(r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    m = np.zeros((H, W), bool)
    m[r0:r1, c0:c1] = True
    return m


def scene() -> tuple[np.ndarray, list[ObjectMask]]:
    objects = [
        ObjectMask(frozenset({"red", "block"}), rect(5, 15, 5, 15), "red_block"),
        ObjectMask(frozenset({"green", "block", "cube"}), rect(20, 30, 40, 52), "green_block"),
        ObjectMask(frozenset({"red cup"}), rect(40, 55, 10, 25), "red_mug"),  # words may be phrases
        ObjectMask(frozenset({"blue", "block"}), np.zeros((H, W), bool), "hidden_block"),  # fully occluded
        ObjectMask(frozenset({"yellow", "block"}), rect(50, 52, 70, 72), "tiny_block"),
    ]
    image = np.full((H, W, 3), 100, np.uint8)
    for k, obj in enumerate(objects):
        image[obj.mask] = (40 * k, 255 - 30 * k, 90)
    return image, objects


def backend(noise: TwinNoise = TwinNoise(), seed: int = 0) -> tuple[TwinBackend, np.ndarray]:
    image, objects = scene()
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    return TwinBackend(oracle, noise=noise, seed=seed), image


def names(dets: list[tuple[float, np.ndarray]], objects: list[ObjectMask]) -> set[str]:
    """Which objects the detections are (by exact mask)."""
    return {o.name for score, m in dets for o in objects if np.array_equal(m, o.mask)}


def test_normalize_words() -> None:
    assert normalize_words("Red cubes") == {"red", "block"}
    assert normalize_words("the small mugs on the table") == {"small", "cup", "table"}
    assert normalize_words("boxes, glasses and dishes") == {"box", "glass", "plate"}
    assert normalize_words(["grey bricks", "Bowl"]) == {"gray", "block", "bowl"}
    assert normalize_words("the object") == frozenset()


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("red block", {"red_block"}),
        ("red cubes", {"red_block"}),
        ("block", {"red_block", "green_block", "tiny_block"}),  # the hidden block is not reported
        ("red", {"red_block", "red_mug"}),
        ("the red mug", {"red_mug"}),
        ("cup", {"red_mug"}),
        ("green cube", {"green_block"}),
        ("blue block", set()),  # present in the scene but not visible
        ("purple block", set()),
        ("small red block", set()),  # every content word must match
        ("red bowl", set()),
        ("the object", set()),
    ],
)
def test_prompt_matching(prompt: str, expected: set[str]) -> None:
    twin, image = backend()
    (dets,) = twin.segment(image, [prompt], 0.5, 20, [])
    assert names(dets, scene()[1]) == expected
    assert len(dets) == len(expected)


def test_scores_are_near_match_score_and_deterministic() -> None:
    twin, image = backend()
    first = twin.segment(image, ["block", "red"], 0.5, 20, [])
    again = twin.segment(image, ["block", "red"], 0.5, 20, [])
    scores = [s for per in first for s, _ in per]
    assert all(0.85 <= s <= 0.95 for s in scores)
    assert len(set(scores)) > 1  # small variation between objects
    assert [s for per in again for s, _ in per] == scores
    timing: dict[str, float] = {}
    twin.segment(image, ["block"], 0.5, 20, [], timing)
    assert set(timing) == {"backbone", "prompts"}


def test_grow_and_erode() -> None:
    truth = scene()[1][0].mask
    twin, image = backend(TwinNoise(grow_px=2))
    (dets,) = twin.segment(image, ["red block"], 0.5, 20, [])
    expected = cv2.dilate(truth.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))).astype(bool)
    assert np.array_equal(dets[0][1], expected) and dets[0][1].sum() > truth.sum()

    twin, image = backend(TwinNoise(grow_px=-2))
    (dets,) = twin.segment(image, ["red block"], 0.5, 20, [])
    assert dets[0][1].sum() == 36  # 10 x 10 square loses 2 px on every side
    (tiny,) = twin.segment(image, ["yellow block"], 0.5, 20, [])
    assert tiny == []  # the 2 x 2 block erodes away: a miss


def test_misses_are_seeded_per_request() -> None:
    rng = np.random.default_rng(5)
    image, objects = synthetic_scene(rng, n_objects=12)
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    visible = sum(1 for o in objects if o.mask.any())
    counts = []
    for seed in range(4):
        twin = TwinBackend(oracle, noise=TwinNoise(miss_prob=0.5), seed=seed)
        (a,) = twin.segment(image, ["block"], 0.5, 50, [])
        (b,) = twin.segment(image, ["block"], 0.5, 50, [])
        assert [s for s, _ in a] == [s for s, _ in b]  # the same request gets the same answer
        counts.append(len(twin.segment(image, ["disc", "block"], 0.5, 50, [])[0]) + len(a))
    assert all(c < visible for c in counts)  # about half are missed
    assert len(set(counts)) > 1  # and which ones depends on the seed
    twin = TwinBackend(oracle, noise=TwinNoise(miss_prob=1.0))
    assert twin.segment(image, ["block"], 0.5, 50, []) == [[]]


def test_spurious_blobs() -> None:
    twin, image = backend(TwinNoise(spurious_prob=1.0, spurious_radius_px=3, spurious_score=(0.55, 0.6)))
    (dets,) = twin.segment(image, ["purple block"], 0.5, 20, [])
    assert len(dets) == 1
    score, blob = dets[0]
    assert 0.55 <= score <= 0.6
    assert 9 <= blob.sum() <= 29  # a filled disc of radius 3, maybe cut by the image border


def test_unknown_image_is_a_bad_image_error() -> None:
    twin, image = backend()
    with pytest.raises(SegmentationRequestError) as err:
        twin.segment(image + 1, ["red block"], 0.5, 20, [])
    assert err.value.code == "bad_image" and err.value.status == 400
    assert "not rendered by this twin" in err.value.message


def test_dict_oracle() -> None:
    oracle = DictMaskOracle(capacity=2)
    assert isinstance(oracle, MaskOracle)
    images = [np.full((H, W, 3), k, np.uint8) for k in range(3)]
    for img in images:
        oracle.add(img, [ObjectMask(frozenset({"red"}), rect(0, 1, 0, 1))])
    assert len(oracle) == 2
    assert oracle.lookup(images[0]) is None and oracle.lookup(images[2]) is not None
    with pytest.raises(ValueError, match="mask must be bool"):
        oracle.add(images[0], [ObjectMask(frozenset({"red"}), np.zeros((H, W + 1), bool))])
    with pytest.raises(ValueError, match="uint8"):
        oracle.add(np.zeros((H, W), np.uint8), [])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"miss_prob": 1.5},
        {"spurious_prob": -0.1},
        {"spurious_score": (0.8, 0.5)},
        {"spurious_radius_px": 0},
        {"match_score": 2.0},
    ],
)
def test_noise_settings_are_validated(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TwinNoise(**kwargs)  # type: ignore[arg-type]


def test_twin_server_end_to_end_with_noise() -> None:
    """Real server, real client, a rendered-like scene: dilated masks come back exactly, misses are empty."""
    rng = np.random.default_rng(11)
    image, objects = synthetic_scene(rng, n_objects=6, hw=(120, 160))
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    with SegmentationServer(TwinBackend(oracle, noise=TwinNoise(grow_px=1), seed=3)) as server:
        assert server.wait_ready(5)
        client = SegmentationClient(server.url)
        prompts = sorted({" ".join(sorted(o.words, key=lambda w: w in ("block", "disc"))) for o in objects})
        reply = client.segment(image, prompts, score_threshold=0.5)
        assert reply.ok and reply.model == "twin"
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        for prompt in prompts:
            wanted = normalize_words(prompt)
            truth = [
                cv2.dilate(o.mask.astype(np.uint8), kernel).astype(bool)
                for o in objects
                if wanted <= normalize_words(o.words) and o.mask.any()
            ]
            got = [inst.mask for inst in reply.instances(prompt)]
            assert len(got) == len(truth)
            for m in got:
                assert any(np.array_equal(m, t) for t in truth)


def test_serve_twin_helper() -> None:
    image, objects = scene()
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    server = serve_twin(oracle, noise=TwinNoise(grow_px=-1), seed=2)
    try:
        assert server.state == "ready"
        reply = SegmentationClient(server.url).segment(image, "green block")
        assert reply.ok and [i.area_px for i in reply.instances("green block")] == [80]  # 10 x 12 eroded by 1 px
        assert SegmentationClient(server.url).health().model == "twin"
    finally:
        server.close()
