"""`pyrua-dojo twin gallery`: one contact sheet of every twin task's first head-camera image.

Each task is reset at one (seed, layout) and its first observation's `cam_head` colour image goes into a grid
cell under the task's name, so one look shows whether each scene looks like its task (fixtures where they belong,
balls in the cup, digits on tiles). Images are the agent's own observation: nothing privileged is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from pyrua_dojo.twin.env import TwinEnv, UnstableLayoutError
from pyrua_dojo.twin.tasks import TWIN_TASKS

CELL_SCALE = 0.5  # a 640 x 480 head image becomes a 320 x 240 cell
LABEL_H = 22


def contact_sheet(images: Sequence[tuple[str, np.ndarray]], columns: int = 4) -> np.ndarray:
    """A grid (RGB uint8) of labelled, half-size images, `columns` per row."""
    if not images:
        raise ValueError("no images for the contact sheet")
    cells = []
    for name, img in images:
        small = cv2.resize(img, None, fx=CELL_SCALE, fy=CELL_SCALE, interpolation=cv2.INTER_AREA)
        label = np.full((LABEL_H, small.shape[1], 3), 255, dtype=np.uint8)
        cv2.putText(label, name, (4, LABEL_H - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
        cells.append(np.concatenate([label, small], axis=0))
    h, w = cells[0].shape[:2]
    rows = math.ceil(len(cells) / columns)
    sheet = np.full((rows * h, columns * w, 3), 255, dtype=np.uint8)
    for k, cell in enumerate(cells):
        r, c = divmod(k, columns)
        sheet[r * h : r * h + cell.shape[0], c * w : c * w + cell.shape[1]] = cell
    return sheet


def gallery(out: Path, tasks: Sequence[str] | None = None, seed: int = 0, layout_id: int = 0) -> Path:
    """Write the contact sheet of `tasks` (default: every twin task) to `out` (PNG); returns the path."""
    names = list(tasks) if tasks else sorted(TWIN_TASKS)
    unknown = [n for n in names if n not in TWIN_TASKS]
    if unknown:
        raise ValueError(f"unknown twin tasks {unknown}; known: {sorted(TWIN_TASKS)}")
    images: list[tuple[str, np.ndarray]] = []
    with TwinEnv() as env:
        for name in names:
            try:
                env.reset(name, seed=seed, layout_id=layout_id)
            except UnstableLayoutError:
                images.append((f"{name} (unstable layout)", np.zeros((480, 640, 3), dtype=np.uint8)))
                continue
            images.append((name, env.get_obs()["vision"]["cam_head"]["color"]))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(out), cv2.cvtColor(contact_sheet(images), cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {out}")
    return out


def main(out: str, tasks: Sequence[str] | None, seed: int, layout_id: int) -> int:
    path = gallery(Path(out), tasks, seed, layout_id)
    print(path)
    return 0
