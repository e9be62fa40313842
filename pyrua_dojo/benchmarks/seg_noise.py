"""`pyrua-dojo bench seg-noise`: what each segmentation noise level does to the twin's masks, measured.

On the first observation of fixed layouts (alternating stack_blocks / general_pickup, all three cameras), every
visible object is asked for by a prompt naming it alone, by several backend seeds (independent draws). Per level:
how often a visible object is missed (overall, under 300 visible pixels, more than half occluded), how far the
reported boundary lies from the true one (px), how many false positives a request gets, and the mean true score.
Merges need touching look-alikes, which these layouts rarely have; `tests/test_seg_noise.py` measures them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table

from pyrua_dojo.seg_service.twin_backend import (
    NOISE_LEVELS,
    DictMaskOracle,
    ObjectMask,
    TwinBackend,
    boundary_error_px,
    normalize_words,
    occlusion,
)
from pyrua_dojo.twin.env import TwinConfig, TwinEnv, UnstableLayoutError
from pyrua_dojo.twin.masks import FINGER_PAD_WORDS

TASKS = ("stack_blocks", "general_pickup")
SMALL_PX = 300
OCCLUDED = 0.5


@dataclass
class LevelFigures:
    """Counts for one noise level (mutable while measuring)."""

    asked: int = 0
    missed: int = 0
    small_asked: int = 0
    small_missed: int = 0
    hidden_asked: int = 0
    hidden_missed: int = 0
    requests: int = 0
    false_positives: int = 0
    boundary: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


def _prompt(obj: ObjectMask, others: list[ObjectMask]) -> str | None:
    """A description of `obj` (two-word phrases first, as an agent would ask) that fits no other object here."""
    mine = normalize_words(obj.words)
    for text in sorted(obj.words, key=lambda w: (abs(len(w.split()) - 2), w)):
        want = normalize_words(text)
        if want and want <= mine and not any(want <= normalize_words(o.words) for o in others):
            return text
    return None


def measure(layouts: int = 6, seed: int = 4, draws: int = 8) -> dict[str, LevelFigures]:
    """Figures per level over `layouts` layouts x 3 cameras x visible objects x `draws` backend seeds."""
    figures = {name: LevelFigures() for name in NOISE_LEVELS}
    env = TwinEnv(TwinConfig(segmentation=True))
    try:
        for i in range(layouts):
            try:
                env.reset(TASKS[i % len(TASKS)], seed, i // len(TASKS))
            except UnstableLayoutError:
                continue
            obs = env.get_obs()
            for view in obs["vision"].values():
                image = view["color"]
                # The objects (the gripper's finger pads are instances too; they are not what this measures).
                objects = [o for o in env.truth(0).mask_oracle.lookup(image) or [] if o.words != FINGER_PAD_WORDS]
                oracle = DictMaskOracle()
                oracle.add(image, objects)
                for obj in objects:
                    prompt = _prompt(obj, [o for o in objects if o is not obj])
                    if prompt is None:
                        continue
                    visible = float(obj.mask.sum())
                    small, hidden = visible < SMALL_PX, occlusion(visible, obj.silhouette_px) > OCCLUDED
                    for name, noise in NOISE_LEVELS.items():
                        f = figures[name]
                        for k in range(draws):
                            dets = TwinBackend(oracle, noise=noise, seed=k).segment(image, [prompt], 0.0, 20, [])[0]
                            hits = [(s, m) for s, m in dets if (m & obj.mask).sum() > 0.5 * visible]
                            miss = not hits
                            f.asked += 1
                            f.missed += miss
                            f.small_asked += small
                            f.small_missed += small and miss
                            f.hidden_asked += hidden
                            f.hidden_missed += hidden and miss
                            f.requests += 1
                            f.false_positives += len(dets) - len(hits)
                            for s, m in hits[:1]:
                                f.boundary.append(boundary_error_px(obj.mask, m))
                                f.scores.append(s)
    finally:
        env.close()
    return figures


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.0f} ({den})" if den else "-"


def main(layouts: int = 6, seed: int = 4, draws: int = 8) -> int:
    print(f"bench seg-noise: {layouts} layouts ({', '.join(TASKS)}), seed {seed}, 3 cameras, {draws} draws each",
          flush=True)
    figures = measure(layouts, seed, draws)
    table = Table(title="twin segmentation noise levels on the twin's own images (missed %: (requests))")
    for col in ("level", "missed %", f"< {SMALL_PX} px visible", f"> {OCCLUDED:.0%} occluded", "boundary px",
                "false pos. / request", "true score"):
        table.add_column(col, justify="right")
    for name, f in figures.items():
        table.add_row(
            name, _pct(f.missed, f.asked), _pct(f.small_missed, f.small_asked), _pct(f.hidden_missed, f.hidden_asked),
            f"{np.mean(f.boundary):.2f}" if f.boundary else "-",
            f"{f.false_positives / f.requests:.3f}" if f.requests else "-",
            f"{np.mean(f.scores):.2f}" if f.scores else "-",
        )
    Console(width=130).print(table)
    return 0
