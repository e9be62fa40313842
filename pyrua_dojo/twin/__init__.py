"""The twin: a MuJoCo stand-in for RoboDojo's dual ARX X5 station (scene, tasks, layouts, env).

`TwinEnv` speaks RoboDojo's env contract (get_obs / take_action / is_episode_end and the batch variants) so the
same deploy loop and the same policy run against it; `TwinEnv.truth(i)` gives tests and tools the ground truth.
The simulated station is `station_truth.yml` (never the agent's defaults); this package imports neither
`primitives` nor the agent runtime (.importlinter). The RoboDojo side of a twin run is `pyrua_dojo.harness`.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco picks its GL backend

try:
    import mujoco  # noqa: F401 - an extra: say which one when it is missing
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError("the twin needs MuJoCo: pip install 'pyrua-dojo[twin]'", name="mujoco") from exc

from pyrua_dojo.twin.env import EpisodeOutcome, TwinConfig, TwinEnv, TwinTruth, UnstableLayoutError
from pyrua_dojo.twin.layouts import Layout
from pyrua_dojo.twin.masks import TwinMaskOracle
from pyrua_dojo.twin.tasks import TWIN_TASKS, TwinTask, get_twin_task

__all__ = [
    "TWIN_TASKS",
    "EpisodeOutcome",
    "Layout",
    "TwinTask",
    "TwinConfig",
    "TwinEnv",
    "TwinMaskOracle",
    "TwinTruth",
    "UnstableLayoutError",
    "get_twin_task",
]
