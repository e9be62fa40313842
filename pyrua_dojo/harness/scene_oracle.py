"""A twin segmentation service that follows the env from episode to episode.

The twin keeps one mask oracle per env slot and makes a new one at every reset; a segmentation server is started
once per run. `SceneMaskOracle` sits between them: the server asks it, it asks the oracle of the scene it was last
pointed at (`follow(env)` after each reset, env 0: the one a non-batch policy sees).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["SceneMaskOracle", "start_twin_segmentation"]


class SceneMaskOracle:
    """A `MaskOracle` answering from the current scene's oracle (None before the first `follow`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: Any = None

    def follow(self, env: Any, env_idx: int = 0) -> None:
        """Answer from env `env_idx`'s current scene from now on (call after every reset)."""
        oracle = env.truth(env_idx).mask_oracle
        with self._lock:
            self._target = oracle

    def lookup(self, image: np.ndarray) -> Any:
        with self._lock:
            target = self._target
        return None if target is None else target.lookup(image)


def start_twin_segmentation(
    host: str = "127.0.0.1", port: int = 0, noise: str = "none", seed: int = 0
) -> tuple[Any, SceneMaskOracle]:
    """A running twin segmentation server (mask noise level `noise`, see `NOISE_LEVELS`) and the oracle it answers
    from; `close()` the server when done."""
    from pyrua_dojo.seg_service.serve import serve_twin
    from pyrua_dojo.seg_service.twin_backend import noise_level

    level = noise_level(noise)
    oracle = SceneMaskOracle()
    return serve_twin(oracle, noise=level, seed=seed, host=host, port=port), oracle
