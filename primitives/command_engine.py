"""The command engine behind `Robo`: runs action chunks through the bridge and owns the episode's step count.

Everything that moves the station goes through one `CommandEngine`: `Robo`'s motions (`send`: arm paths and gripper
values, the rest held at their commanded targets) and runners that build their own chunks, such as the calibration
routine (`exchange`, the `Bridge` interface). The engine validates every chunk, stops at the task's step limit and at
the cancel token, counts the actions the station ran, and keeps the latest observation and the commanded targets.
Anyone who needs the step count asks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from calibration import ARMS, Station
from calibration.transforms import FloatArray
from primitives.actions import Action, Bridge, Observation, make_action, validate_chunk
from primitives.errors import CancelToken, EpisodeFinished


class CommandEngine:
    """Sends chunks through `bridge` within the step limit; the one owner of the step count and the commanded targets.

    Not thread-safe: one thread (the episode's agent thread) drives it; others may read `steps_used`.
    """

    def __init__(
        self,
        bridge: Bridge,
        first_observation: Mapping[str, Any],
        *,
        station: Station,
        step_limit: int,
        cancel: CancelToken | None = None,
    ) -> None:
        self._bridge = bridge
        self._cancel = cancel if cancel is not None else CancelToken()
        self._step_limit = int(step_limit)
        self._lower = station.x5.lower
        self._upper = station.x5.upper
        self._steps = 0
        self._obs = Observation.from_robodojo(first_observation, 0)
        self._raw: Mapping[str, Any] | None = None  # an observation from `exchange`, parsed when first read
        self.commanded_q: dict[str, FloatArray] = {arm: self._obs.joints[arm].copy() for arm in ARMS}
        self.commanded_g: dict[str, float] = {arm: float(self._obs.gripper[arm]) for arm in ARMS}

    @property
    def cancel(self) -> CancelToken:
        return self._cancel

    @property
    def step_limit(self) -> int:
        return self._step_limit

    @property
    def steps_used(self) -> int:
        """Actions the station ran in this episode (including a chunk the episode ended during)."""
        return self._steps

    @property
    def steps_left(self) -> int:
        """Actions left before the task's step limit."""
        return max(0, self._step_limit - self._steps)

    @property
    def observation(self) -> Observation:
        """The latest observation, parsed (`step` = actions run before it was taken)."""
        if self._raw is not None:
            self._obs = Observation.from_robodojo(self._raw, self._steps)
            self._raw = None
        return self._obs

    def send(self, joint_paths: Mapping[str, FloatArray], grippers: Mapping[str, float], n: int) -> int:
        """Send n actions: arms in joint_paths follow them, others hold; grippers set as given. Returns n."""
        self._cancel.check()
        if self.steps_left <= 0:
            raise EpisodeFinished("step_limit", "the task's step limit is used up")
        for arm, g in grippers.items():
            self.commanded_g[arm] = float(g)
        chunk = []
        rows = {arm: self.commanded_q[arm] for arm in ARMS}
        for i in range(n):
            for arm, path in joint_paths.items():
                rows[arm] = path[min(i, len(path) - 1)]
            chunk.append(make_action(rows["left"], self.commanded_g["left"], rows["right"], self.commanded_g["right"]))
        validate_chunk(chunk, self._lower, self._upper)
        for arm in joint_paths:
            self.commanded_q[arm] = np.array(rows[arm], dtype=float)
        raw = self._run(chunk)
        self._obs = Observation.from_robodojo(raw, self._steps)
        self._raw = None
        self._cancel.check()
        return n

    def exchange(self, chunk: Sequence[Action]) -> Mapping[str, Any]:
        """The `Bridge` interface for runners that build their own chunks: validate, run, count; returns the raw
        observation after it. The chunk's last action becomes the commanded targets."""
        self._cancel.check()
        if self.steps_left <= 0:
            raise EpisodeFinished("step_limit", "the task's step limit is used up")
        validate_chunk(chunk, self._lower, self._upper)
        last = chunk[-1]
        for arm in ARMS:
            self.commanded_q[arm] = np.array(last[f"{arm}_arm_joint_state"], dtype=float)
            self.commanded_g[arm] = float(np.asarray(last[f"{arm}_ee_joint_state"]).reshape(-1)[0])
        raw = self._run(chunk)
        self._raw = raw
        return raw

    def _run(self, chunk: list[Action] | Sequence[Action]) -> Mapping[str, Any]:
        """Run the chunk through the bridge and count the actions the station ran."""
        n = len(chunk)
        try:
            raw = self._bridge.exchange(chunk)
        except EpisodeFinished as end:
            self._steps += min(n, max(0, end.ran))  # the station ran them (or began to) before the episode ended
            raise
        self._steps += n
        return raw
