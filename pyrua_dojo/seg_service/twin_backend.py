"""A segmentation backend that answers from the twin's own instance masks, with noise modelling SAM 3's failures.

The request carries only an image, so the backend asks a `MaskOracle` for the instance masks of the image
(the twin keeps them for every image it renders, keyed by the image's sha256). A prompt matches an object
when every content word of the prompt is among the object's description words (colour, category,
synonyms), after lower-casing, singularising ("blocks" -> "block") and mapping synonyms ("cube" -> "block").
An unmatched prompt gets no instances, as SAM 3 answers for an absent concept.

Noise (`TwinNoise`, named levels in `NOISE_LEVELS`: none / mild / realistic / harsh) imitates SAM 3: misses that
depend on the visible area and on occlusion (the twin sends each object's unoccluded silhouette area), merges of
touching same-coloured instances, ragged boundaries of a pixel or few, confident false positives on objects that
share some of the prompt's words, and scores that vary. `none` is the oracle (the simulator's exact masks). Every
draw comes from a generator seeded by (backend seed, image sha256, prompt), so the same request always gets the
same answer (retries are idempotent) and no global RNG is touched.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import cv2
import numpy as np

from primitives.seg_contract import image_sha256
from pyrua_dojo.seg_service.backend import BackendInfo, Detection, ExemplarBoxPx, SegmentationRequestError

__all__ = [
    "DEFAULT_SYNONYMS",
    "DictMaskOracle",
    "MaskOracle",
    "ObjectMask",
    "TwinBackend",
    "NOISE_LEVELS",
    "TwinNoise",
    "boundary_error_px",
    "noise_level",
    "normalize_words",
    "occlusion",
]

# Words a prompt may carry that say nothing about which object is meant.
_STOPWORDS = frozenset(
    "a an the of on in at to with and or that this these those some any all its it is are "
    "object objects item items thing things one".split()
    # Words that introduce what is printed on an object ("the tile showing 7", "the card marked 3").
    + "showing shows printed marked labeled labelled bearing".split()
)

# Synonym -> canonical word. Both prompts and object descriptions go through it.
DEFAULT_SYNONYMS: Mapping[str, str] = {
    "cube": "block",
    "brick": "block",
    "cuboid": "block",
    "mug": "cup",
    "beaker": "cup",
    "dish": "plate",
    "saucer": "plate",
    "container": "box",
    "carton": "box",
    "tin": "can",
    "grey": "gray",
    "violet": "purple",
    "crimson": "red",
    "scarlet": "red",
    "navy": "blue",
    "azure": "blue",
    "lime": "green",
    "golden": "yellow",
    "tan": "brown",
    "ball": "sphere",
}

_WORD = re.compile(r"[a-z]+|[0-9]+")  # digits count: printed symbols are described by them


def _singular(word: str) -> str:
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("xes", "ches", "shes", "sses")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def normalize_words(text: str | Iterable[str], synonyms: Mapping[str, str] = DEFAULT_SYNONYMS) -> frozenset[str]:
    """Content words of a phrase (or of several words), lower-cased, singular, synonyms mapped."""
    raw = text if isinstance(text, str) else " ".join(text)
    out = set()
    for w in _WORD.findall(raw.lower()):
        if w in _STOPWORDS:
            continue
        w = _singular(w)
        out.add(synonyms.get(w, w))
    return frozenset(out)


@dataclass(frozen=True, eq=False)
class ObjectMask:
    """One object's visible pixels in one image, and the words that describe it.

    `words` are description words or phrases ({"red", "block"}, or {"red cube", "block"}); they are split
    and normalised like prompts. `name` identifies the object (for logs and tests). `silhouette_px` (optional)
    is the area the object would cover unoccluded; the noise model reads occlusion from it.
    """

    words: frozenset[str]
    mask: np.ndarray = field(repr=False)  # bool H x W
    name: str = ""
    silhouette_px: float = 0.0  # the pixels it would cover with nothing in front (0: unknown, taken as unoccluded)


@runtime_checkable
class MaskOracle(Protocol):
    """Knows the instance masks of images it has seen. The twin implements it for the images it renders."""

    def lookup(self, image: np.ndarray) -> Sequence[ObjectMask] | None:
        """The objects in `image` (uint8 H x W x 3 RGB), or None if this image is unknown."""
        ...


class DictMaskOracle:
    """A `MaskOracle` backed by a dict from image sha256 to objects, bounded to the last `capacity` images."""

    def __init__(self, capacity: int = 256) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[ObjectMask, ...]] = OrderedDict()

    def add(self, image: np.ndarray, objects: Sequence[ObjectMask]) -> str:
        """Remember `objects` for `image`; returns the image's sha256. Masks must match the image size."""
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError("image must be a uint8 H x W x 3 RGB array")
        for obj in objects:
            if not isinstance(obj, ObjectMask) or obj.mask.shape != image.shape[:2] or obj.mask.dtype != bool:
                raise ValueError(f"object {getattr(obj, 'name', obj)!r}: mask must be bool {image.shape[:2]}")
        sha = image_sha256(image)
        with self._lock:
            self._items[sha] = tuple(objects)
            self._items.move_to_end(sha)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return sha

    def lookup(self, image: np.ndarray) -> Sequence[ObjectMask] | None:
        with self._lock:
            return self._items.get(image_sha256(image))

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


@dataclass(frozen=True)
class TwinNoise:
    """How far the twin's answers depart from the true masks (see `NOISE_LEVELS` for the named levels).

    Simple knobs:
    - `grow_px`: dilate every mask by this many pixels (negative: erode); a mask eroded away is a miss;
    - `miss_prob`: probability that a matched instance is not reported, whatever its size;
    - `spurious_prob`: probability, per prompt, of one extra small disc of radius `spurious_radius_px`
      somewhere in the image, with a score in `spurious_score`;
    - `match_score`, `score_spread`: a true match scores `match_score` +- `score_spread` (deterministic).

    SAM 3's failure modes (all off at 0):
    - misses by visible area: a match with A visible pixels is missed with probability
      1 / (1 + (A / `miss_half_area_px`) ** `miss_area_slope`) (half the time at `miss_half_area_px`);
    - misses by occlusion: with v = visible pixels / unoccluded silhouette within the image (`ObjectMask`),
      occlusion o = 1 - v adds a miss probability rising linearly from 0 at o = `occlusion_onset` to
      `occlusion_miss` at o = 1;
    - merges: two matches of one prompt whose masks touch (within 2 px) and whose mean image colours are within
      `merge_colour_dist` (RGB, 0..255 per channel, Euclidean) are reported as one mask with probability
      `merge_prob` per touching pair;
    - ragged boundaries: each mask's boundary moves in and out by a smooth random field (correlation length
      about 8 px) plus a per-instance bias, both scaled by `boundary_px`; the mean boundary displacement is
      about 0.65 x `boundary_px` on twin images (`boundary_error_px` measures it);
    - false positives: an object that shares some, not all, of the prompt's words ("blue block" for "red block")
      is reported with probability `false_positive_prob`, scoring in `false_positive_score`;
    - score noise: true matches score `match_score` - `occlusion_score_drop` x o + N(0, `score_sigma`), clipped.

    Every draw comes from a generator seeded by (backend seed, image sha256, prompt): the same request always
    gets the same answer (retries are idempotent) and no global RNG is touched.
    """

    grow_px: int = 0
    miss_prob: float = 0.0
    spurious_prob: float = 0.0
    spurious_radius_px: int = 4
    spurious_score: tuple[float, float] = (0.5, 0.8)
    match_score: float = 0.9
    score_spread: float = 0.05
    miss_half_area_px: float = 0.0
    miss_area_slope: float = 2.5
    occlusion_onset: float = 0.5
    occlusion_miss: float = 0.0
    merge_prob: float = 0.0
    merge_colour_dist: float = 40.0
    boundary_px: float = 0.0
    false_positive_prob: float = 0.0
    false_positive_score: tuple[float, float] = (0.5, 0.7)
    score_sigma: float = 0.0
    occlusion_score_drop: float = 0.0
    level: str = "custom"

    def __post_init__(self) -> None:
        for name in ("miss_prob", "spurious_prob", "match_score", "occlusion_onset", "occlusion_miss", "merge_prob",
                     "false_positive_prob"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        for name in ("spurious_score", "false_positive_score"):
            lo, hi = getattr(self, name)
            if not 0.0 <= lo <= hi <= 1.0:
                raise ValueError(f"{name} must be (lo, hi) within [0, 1], got {getattr(self, name)}")
        if self.spurious_radius_px < 1 or not 0.0 <= self.score_spread <= 0.5:
            raise ValueError("spurious_radius_px must be >= 1 and score_spread in [0, 0.5]")
        for name in ("miss_half_area_px", "merge_colour_dist", "boundary_px", "score_sigma", "occlusion_score_drop"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.miss_area_slope <= 0 or self.occlusion_onset >= 1.0:
            raise ValueError("miss_area_slope must be > 0 and occlusion_onset < 1")

    @property
    def is_clean(self) -> bool:
        return (
            self.grow_px == 0 and self.miss_prob == 0.0 and self.spurious_prob == 0.0 and self.miss_half_area_px == 0
            and self.occlusion_miss == 0.0 and self.merge_prob == 0.0 and self.boundary_px == 0.0
            and self.false_positive_prob == 0.0 and self.score_sigma == 0.0 and self.occlusion_score_drop == 0.0
        )

    def miss_probability(self, visible_px: float, silhouette_px: float = 0.0) -> float:
        """The probability that a match with `visible_px` visible pixels (of `silhouette_px` unoccluded; 0 =
        unknown, taken as unoccluded) is not reported."""
        keep = 1.0 - self.miss_prob
        if self.miss_half_area_px > 0:
            keep *= 1.0 - 1.0 / (1.0 + (max(visible_px, 0.0) / self.miss_half_area_px) ** self.miss_area_slope)
        if self.occlusion_miss > 0:
            keep *= 1.0 - self.occlusion_miss * _ramp(occlusion(visible_px, silhouette_px), self.occlusion_onset)
        return 1.0 - keep


#: The named levels. SAM 3 facts behind them (shared/reference/sam3.md): scores are sigmoid(instance) x
#: sigmoid(presence) and a colour + shape phrase scores about 0.7 in PyRUA-Lean's experience (so a true match is
#: not 0.9 and varies); masks come from logits at a fraction of the 1008 px input (about a quarter, our reading
#: of the architecture, not verified) upsampled bilinearly, so at 640 x 480 one logit cell spans about 2 px and
#: boundaries err by a pixel or two; small objects and
#: heavily occluded ones are where open-vocabulary detectors lose recall first; instances of one concept that
#: touch and look alike are what instance heads merge; a concept that shares the category but not the colour
#: ("blue block" for "red block") is the typical confident false positive. The parameters are our estimates
#: (no SAM 3 measurement on RoboDojo images exists); `harsh` is the pessimistic bound, `mild` the optimistic one.
NOISE_LEVELS: Mapping[str, TwinNoise] = {
    "none": TwinNoise(level="none"),
    "mild": TwinNoise(
        match_score=0.85, score_sigma=0.05, occlusion_score_drop=0.1,
        miss_half_area_px=15.0, occlusion_onset=0.7, occlusion_miss=0.3,
        merge_prob=0.2, boundary_px=1.0, false_positive_prob=0.03, level="mild",
    ),
    "realistic": TwinNoise(
        match_score=0.78, score_sigma=0.08, occlusion_score_drop=0.2,
        miss_half_area_px=40.0, occlusion_onset=0.5, occlusion_miss=0.6,
        merge_prob=0.5, boundary_px=2.0, false_positive_prob=0.1, spurious_prob=0.02, level="realistic",
    ),
    "harsh": TwinNoise(
        match_score=0.7, score_sigma=0.12, occlusion_score_drop=0.3,
        miss_half_area_px=120.0, occlusion_onset=0.3, occlusion_miss=0.9,
        merge_prob=0.9, boundary_px=4.0, false_positive_prob=0.3, spurious_prob=0.1, level="harsh",
    ),
}


def noise_level(name: str) -> TwinNoise:
    """The named noise level (`none`, `mild`, `realistic`, `harsh`); ValueError naming them otherwise."""
    try:
        return NOISE_LEVELS[name]
    except KeyError:
        raise ValueError(f"segmentation noise must be one of {tuple(NOISE_LEVELS)}, got {name!r}") from None


def occlusion(visible_px: float, silhouette_px: float) -> float:
    """1 - visible / unoccluded area, in [0, 1]; 0 when the unoccluded area is unknown (<= 0)."""
    if silhouette_px <= 0:
        return 0.0
    return float(min(1.0, max(0.0, 1.0 - visible_px / silhouette_px)))


def _ramp(x: float, onset: float) -> float:
    return float(min(1.0, max(0.0, (x - onset) / (1.0 - onset))))


def boundary_error_px(true_mask: np.ndarray, mask: np.ndarray) -> float:
    """Mean distance (px) from the boundary pixels of `mask` to the boundary of `true_mask` (0 for equal masks;
    NaN when `mask` is empty)."""
    if not mask.any():
        return float("nan")
    t = true_mask.astype(np.uint8)
    edge_true = t - cv2.erode(t, np.ones((3, 3), np.uint8), borderType=cv2.BORDER_CONSTANT, borderValue=0)
    m = mask.astype(np.uint8)
    edge = m - cv2.erode(m, np.ones((3, 3), np.uint8), borderType=cv2.BORDER_CONSTANT, borderValue=0)
    dist = cv2.distanceTransform((1 - edge_true).astype(np.uint8), cv2.DIST_L2, 5)
    return float(dist[edge.astype(bool)].mean())


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) from strings (Python's hash() is salted per process)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class TwinBackend:
    """`SegmentationBackend` over a `MaskOracle`: matches prompts to object words, adds seeded noise.

    Exemplar boxes are accepted and ignored: the twin has no notion of visual similarity.
    """

    def __init__(
        self,
        oracle: MaskOracle,
        *,
        noise: TwinNoise = TwinNoise(),
        seed: int = 0,
        synonyms: Mapping[str, str] = DEFAULT_SYNONYMS,
    ) -> None:
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        self.oracle = oracle
        self.noise = noise
        self.seed = int(seed)
        self.synonyms = dict(synonyms)
        if noise.is_clean:
            code = "twin"
        elif noise.level != "custom":
            code = f"twin+noise({noise.level})"
        else:
            code = f"twin+noise(grow={noise.grow_px},miss={noise.miss_prob},spurious={noise.spurious_prob})"
        self._info = BackendInfo(name="twin", device="cpu", code=f"{code},seed={self.seed}")

    @property
    def info(self) -> BackendInfo:
        return self._info

    def segment(
        self,
        image: np.ndarray,
        prompts: Sequence[str],
        score_threshold: float,
        max_instances: int,
        exemplar_boxes: Sequence[ExemplarBoxPx],
        timing: dict[str, float] | None = None,
    ) -> list[list[Detection]]:
        """Per prompt, the (score, mask) of every object whose words cover the prompt's words."""
        t0 = time.perf_counter()
        objects = self.oracle.lookup(image)
        if objects is None:
            raise SegmentationRequestError(
                "bad_image",
                f"the twin has no instance masks for this image (sha256 {image_sha256(image)[:16]}...): "
                "it was not rendered by this twin, was evicted, or was sent as lossy JPEG instead of PNG",
            )
        described = [(obj, normalize_words(obj.words, self.synonyms)) for obj in objects]
        sha = image_sha256(image)
        t1 = time.perf_counter()
        out = [self._answer(image, sha, prompt, described) for prompt in prompts]
        if timing is not None:
            timing["backbone"] = (t1 - t0) * 1000.0
            timing["prompts"] = (time.perf_counter() - t1) * 1000.0
        return out

    def _answer(
        self, image: np.ndarray, sha: str, prompt: str, described: list[tuple[ObjectMask, frozenset[str]]]
    ) -> list[Detection]:
        wanted = normalize_words(prompt, self.synonyms)
        noise = self.noise
        hw = image.shape[:2]
        rng = np.random.default_rng([self.seed, int(sha[:16], 16), int(_unit(prompt) * 2**63)])
        matched: list[tuple[ObjectMask, float]] = []  # (object, score)
        similar: list[ObjectMask] = []
        if wanted:
            for obj, words in described:
                if not obj.mask.any():
                    continue
                if not wanted <= words:
                    if wanted & words:
                        similar.append(obj)
                    continue
                visible = float(obj.mask.sum())
                # Draw every random number in a fixed order whatever the level, so levels differ only by thresholds.
                u_miss, z_score = rng.random(), rng.normal()
                if u_miss < noise.miss_probability(visible, obj.silhouette_px):
                    continue
                occ = occlusion(visible, obj.silhouette_px)
                score = noise.match_score + noise.score_spread * (
                    2.0 * _unit(str(self.seed), sha, prompt, obj.name) - 1.0
                ) - noise.occlusion_score_drop * occ + noise.score_sigma * z_score
                matched.append((obj, score))
        groups = self._merge(image, matched, rng) if noise.merge_prob > 0 and len(matched) > 1 else [
            ([obj.mask], [score]) for obj, score in matched
        ]
        dets: list[Detection] = []
        for masks, scores in groups:
            mask = masks[0] if len(masks) == 1 else np.logical_or.reduce(masks)
            mask = self._grow(mask, noise.grow_px)
            mask = self._ragged(mask, noise.boundary_px, rng)
            if mask.any():
                dets.append((float(min(1.0, max(0.0, float(np.mean(scores))))), mask))
        if noise.false_positive_prob > 0:
            for obj in similar:
                if rng.random() < noise.false_positive_prob:
                    lo, hi = noise.false_positive_score
                    mask = self._ragged(obj.mask, noise.boundary_px, rng)
                    if mask.any():
                        dets.append((float(rng.uniform(lo, hi)), mask))
        if noise.spurious_prob and rng.random() < noise.spurious_prob:
            r = noise.spurious_radius_px
            h, w = hw
            blob = np.zeros(hw, np.uint8)
            cx, cy = int(rng.integers(0, w)), int(rng.integers(0, h))
            cv2.circle(blob, (cx, cy), r, 1, thickness=-1)
            lo, hi = noise.spurious_score
            dets.append((float(rng.uniform(lo, hi)), blob.astype(bool)))
        return dets

    def _merge(
        self, image: np.ndarray, matched: list[tuple[ObjectMask, float]], rng: np.random.Generator
    ) -> list[tuple[list[np.ndarray], list[float]]]:
        """Union-find over touching, same-coloured matches; each such pair joins with probability merge_prob."""
        n = len(matched)
        parent = list(range(n))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        kernel = np.ones((5, 5), np.uint8)  # 2 px: masks this close count as touching
        grown = [cv2.dilate(obj.mask.astype(np.uint8), kernel).astype(bool) for obj, _ in matched]
        colours = [image[obj.mask].reshape(-1, 3).astype(float).mean(axis=0) for obj, _ in matched]
        for i in range(n):
            for j in range(i + 1, n):
                u = rng.random()
                touching = bool(np.any(grown[i] & matched[j][0].mask))
                alike = float(np.linalg.norm(colours[i] - colours[j])) <= self.noise.merge_colour_dist
                if touching and alike and u < self.noise.merge_prob:
                    parent[root(j)] = root(i)
        groups: dict[int, tuple[list[np.ndarray], list[float]]] = {}
        for k, (obj, score) in enumerate(matched):
            masks, scores = groups.setdefault(root(k), ([], []))
            masks.append(obj.mask)
            scores.append(score)
        return list(groups.values())

    @staticmethod
    def _ragged(mask: np.ndarray, amplitude: float, rng: np.random.Generator) -> np.ndarray:
        """Move the boundary by a smooth random field (about 8 px correlation) plus a per-mask bias, both of scale
        `amplitude` px: threshold the signed distance to the boundary plus the field."""
        if amplitude <= 0 or not mask.any():
            return mask
        h, w = mask.shape
        pad = int(math.ceil(3 * amplitude)) + 2
        ys, xs = np.nonzero(mask)
        y0, y1 = max(0, int(ys.min()) - pad), min(h, int(ys.max()) + pad + 1)
        x0, x1 = max(0, int(xs.min()) - pad), min(w, int(xs.max()) + pad + 1)
        crop = mask[y0:y1, x0:x1].astype(np.uint8)
        inside = cv2.distanceTransform(crop, cv2.DIST_L2, 5)
        outside = cv2.distanceTransform(1 - crop, cv2.DIST_L2, 5)
        signed = np.where(crop > 0, inside - 0.5, 0.5 - outside)
        ch, cw = crop.shape
        coarse = rng.normal(size=(ch // 8 + 2, cw // 8 + 2)).astype(np.float32)
        field_ = cv2.resize(coarse, (cw + 16, ch + 16), interpolation=cv2.INTER_CUBIC)[:ch, :cw]
        bias = float(rng.uniform(-0.5, 0.5))
        out = np.zeros_like(mask)
        out[y0:y1, x0:x1] = signed + amplitude * (field_ + bias) > 0
        return out

    @staticmethod
    def _grow(mask: np.ndarray, px: int) -> np.ndarray:
        if px == 0:
            return mask
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * abs(px) + 1, 2 * abs(px) + 1))
        m = mask.astype(np.uint8)
        out = cv2.dilate(m, k) if px > 0 else cv2.erode(m, k, borderType=cv2.BORDER_CONSTANT, borderValue=0)
        return out.astype(bool)
