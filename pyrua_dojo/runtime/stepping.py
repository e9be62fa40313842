"""Bridges between the agent's primitives and a station.

`StepBridge` is the inversion of control behind the XPolicyLab Model: RoboDojo drives the loop
(`update_obs` / `get_action`), while the agent's code runs in its own thread and calls `exchange(chunk)`, which
blocks until the chunk has run and the next observation has arrived. While the agent thinks, `get_action`
waits, so the simulator is paused and no step is spent.

`EnvBridge` drives an object with RoboDojo's env interface (`take_action`, `get_obs`, `is_episode_end`) directly
in-process, for tests and benchmarks on the twin.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from primitives.actions import Action, hold_action
from primitives.errors import CancelToken, EpisodeFinished

_POLL_S = 0.05


#: Key in `obs["additional_info"]` where our plugin's deploy.py numbers its requests within an episode.
INFER_SEQ_KEY = "pyrua_infer_seq"


def observation_fingerprint(obs: Mapping[str, Any]) -> str:
    """What identifies an INFER's observation, to recognise one re-sent after a reconnect.

    Our deploy.py numbers its requests (`additional_info[INFER_SEQ_KEY]`), which is exact. Without that number
    (another deploy loop) it is a digest of the state and a sample of the images: a re-sent INFER has the same
    digest, but so would two consecutive observations of a scene that is perfectly still, so in that fallback a
    chunk is replayed at most once and the next identical observation counts as a new one.
    """
    info = obs.get("additional_info")
    if isinstance(info, Mapping) and info.get(INFER_SEQ_KEY) is not None:
        return f"seq:{info[INFER_SEQ_KEY]}"
    h = hashlib.sha256()
    state = obs.get("state", {})
    for key in sorted(state):
        value = state[key]
        if isinstance(value, Mapping):  # e.g. the debug client's state["mobile"]
            continue
        try:
            data = np.ascontiguousarray(np.asarray(value, dtype=np.float64)).tobytes()
        except (TypeError, ValueError):
            continue
        h.update(key.encode())
        h.update(data)
    vision = obs.get("vision", {})
    for cam in sorted(vision):
        color = vision[cam].get("color") if isinstance(vision[cam], Mapping) else None
        if color is not None:
            h.update(cam.encode())
            h.update(np.ascontiguousarray(np.asarray(color)[::7, ::7]).tobytes())
    return h.hexdigest()


@dataclass
class _Sent:
    fingerprint: str
    chunk: list[Action]
    replayed: bool = False


class StepBridge:
    """Hands action chunks from the agent thread to `get_action` and observations back.

    Agent side: `exchange(chunk)` (the primitives' Bridge). Policy side: `on_infer(obs)` for every INFER
    (update_obs then get_action), `agent_finished()` when the agent stops, `end(reason)` when the episode ends.
    """

    def __init__(self, cancel: CancelToken, first_observation: Mapping[str, Any], hold_steps: int = 1) -> None:
        if hold_steps < 1:
            raise ValueError("hold_steps must be >= 1")
        self._hold_steps = hold_steps
        self._cancel = cancel
        self._cond = threading.Condition()
        self._chunk: list[Action] | None = None
        self._obs: Mapping[str, Any] | None = None
        self._agent_done = False
        self._ended: EpisodeFinished | None = None
        self._last_obs: Mapping[str, Any] = first_observation
        self._last_action: Action | None = None
        self._sent: _Sent | None = None
        self._first = True
        self.chunks_sent = 0
        self.hold_chunks_sent = 0

    # ---------------------------------------------------------------- agent side
    def exchange(self, chunk: Sequence[Action]) -> Mapping[str, Any]:
        """Hand `chunk` to the next get_action and wait for the observation taken after it ran."""
        if not chunk:
            raise ValueError("an action chunk must hold at least one action")
        with self._cond:
            if self._ended is not None:
                raise self._ended
            self._chunk = list(chunk)
            self._cond.notify_all()
            while self._obs is None:
                if self._ended is not None:
                    taken = self._chunk is None  # get_action handed it to the benchmark before the end
                    self._chunk = None
                    raise EpisodeFinished(self._ended.reason, self._ended.detail, ran=len(chunk) if taken else 0)
                if self._cancel.cancelled:
                    self._chunk = None
                    self._cancel.check()
                self._cond.wait(_POLL_S)
            obs, self._obs = self._obs, None
            return obs

    # ---------------------------------------------------------------- policy side
    def on_infer(self, obs: Mapping[str, Any], timeout_s: float | None = None) -> list[Action]:
        """Deliver `obs` to the agent (unless it is a re-sent INFER) and return the next chunk to execute.

        Blocks while the agent thinks. Returns a hold chunk once the agent has finished or the episode ended.
        A repeat of the previous observation (a client retry after a reconnect) gets the same chunk again and
        does not advance the agent. `timeout_s` bounds the wait (None: wait as long as the agent needs).
        """
        fp = observation_fingerprint(obs)
        with self._cond:
            if self._sent is not None and self._sent.fingerprint == fp and not self._sent.replayed:
                # A client re-sends an INFER at most once; a third identical observation is a still scene.
                self._sent.replayed = not fp.startswith("seq:")
                return [dict(a) for a in self._sent.chunk]
            self._last_obs = obs
            if self._first:
                self._first = False
            else:
                self._obs = obs
                self._cond.notify_all()
            waited = 0.0
            while self._chunk is None and not self._agent_done and self._ended is None:
                self._cond.wait(_POLL_S)
                waited += _POLL_S
                if timeout_s is not None and waited >= timeout_s:
                    break
            if self._chunk is not None:
                chunk, self._chunk = self._chunk, None
                self.chunks_sent += 1
            else:
                hold = hold_action(self._last_obs, self._last_action)
                chunk = [hold] + [dict(hold) for _ in range(self._hold_steps - 1)]
                self.hold_chunks_sent += 1
            self._last_action = chunk[-1]
            self._sent = _Sent(fp, chunk)
            return [dict(a) for a in chunk]

    def agent_finished(self) -> None:
        """The agent stopped (finished, gave up, budget, error): from now on get_action returns hold chunks."""
        with self._cond:
            self._agent_done = True
            self._cond.notify_all()

    def end(self, reason: str = "reset") -> None:
        """The episode is over: a waiting or later `exchange` raises EpisodeFinished(reason)."""
        with self._cond:
            if self._ended is None:
                self._ended = EpisodeFinished(reason)
            self._cancel.cancel(self._ended)
            self._cond.notify_all()

    @property
    def ended(self) -> bool:
        with self._cond:
            return self._ended is not None


class RoboDojoEnv(Protocol):
    """The env interface RoboDojo hands to a policy's deploy.py (single-env subset)."""

    def get_obs(self) -> dict[str, Any]: ...

    def take_action(self, action: Mapping[str, Any]) -> Any: ...

    def is_episode_end(self) -> bool: ...


class EnvBridge:
    """Runs chunks on a RoboDojo-style env in-process (one observation per chunk, like XPolicyLab's ws)."""

    def __init__(self, env: RoboDojoEnv, cancel: CancelToken | None = None) -> None:
        self._env = env
        self._cancel = cancel if cancel is not None else CancelToken()

    def first_observation(self) -> dict[str, Any]:
        return self._env.get_obs()

    def exchange(self, chunk: Sequence[Action]) -> Mapping[str, Any]:
        if not chunk:
            raise ValueError("an action chunk must hold at least one action")
        for ran, action in enumerate(chunk):
            self._cancel.check()
            if self._env.is_episode_end():
                raise EpisodeFinished("ended", ran=ran)
            self._env.take_action(action)
        if self._env.is_episode_end():
            raise EpisodeFinished("ended", ran=len(chunk))
        return self._env.get_obs()
