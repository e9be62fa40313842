"""The XPolicyLab Model: `update_obs` / `get_action` / `reset`, one Episode per `env_idx`.

XPolicyLab constructs `Model(model_cfg)` in the policy server and, per chunk, calls `update_obs(obs)` then
`get_action()` (newer versions may call `update_obs` for every step, and the batch methods); `reset()` arrives
twice per episode. The first observation of an env after a reset starts that env's Episode (its agent thread);
`get_action` blocks until the agent hands over its next chunk and never returns an empty list.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calibration import Station, load_station
from primitives.actions import Action, hold_action
from primitives.kinematics import X5Kinematics
from primitives.seg_client import SegmentationClient
from pyrua_dojo.plugin.config import PolicyConfig
from pyrua_dojo.runtime.episode import Episode
from pyrua_dojo.runtime.trace import jsonable

log = logging.getLogger("pyrua_dojo.plugin.model")


class Model:
    """The PyRUA_Dojo policy for XPolicyLab."""

    def __init__(self, model_cfg: Mapping[str, Any]) -> None:
        self.config = PolicyConfig.from_model_cfg(model_cfg)
        self.station: Station = load_station(self.config.calibration_file)
        self._kin = X5Kinematics(self.station)
        self.segmentation = (
            SegmentationClient(self.config.segmentation_url) if self.config.segmentation_url else None
        )
        self._lock = threading.RLock()
        self._episodes: dict[int, Episode] = {}
        self._finished: list[Episode] = []
        self._latest: dict[int, Mapping[str, Any]] = {}
        self._failed_envs: set[int] = set()
        self._last_env: int | None = None
        self._count = 0
        self._warned_ee = False
        self._session = time.strftime("%Y%m%d-%H%M%S")
        self.config.run_root.mkdir(parents=True, exist_ok=True)
        self._errors = self.config.run_root / f"model-errors-{self._session}.log"
        log.info("PyRUA_Dojo model ready: task %s, planner %s, runs in %s",
                 self.config.task, self.config.planner, self.config.run_root)

    # ---------------------------------------------------------------- XPolicyLab interface
    def update_obs(self, obs: Mapping[str, Any]) -> None:
        """Remember the env's latest observation (the one before get_action is what the agent receives)."""
        env = self._env_idx(obs)
        with self._lock:
            self._latest[env] = obs
            self._last_env = env

    def get_action(self) -> list[dict[str, Any]]:
        """The next chunk for the env whose observation came last (blocks while the agent thinks)."""
        with self._lock:
            env = self._last_env
            obs = self._latest.get(env) if env is not None else None
        if env is None or obs is None:
            raise RuntimeError("get_action called before any observation (update_obs)")
        return self._serve(env, obs)

    def update_obs_batch(self, obs_list: Sequence[Mapping[str, Any]]) -> None:
        for obs in obs_list:
            self.update_obs(obs)

    def get_action_batch(self, env_idx_list: Sequence[int] | None = None) -> list[list[dict[str, Any]]]:
        """One chunk per env, in `env_idx_list` order (default: every env with an observation)."""
        with self._lock:
            envs = list(env_idx_list) if env_idx_list is not None else sorted(self._latest)
            pending = [(e, self._latest.get(int(e))) for e in envs]
        out = []
        for env, obs in pending:
            if obs is None:
                raise RuntimeError(f"get_action_batch: no observation for env {env}")
            out.append(self._serve(int(env), obs))
        return out

    def infer(self, obs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Older entry point: update_obs + get_action in one call."""
        self.update_obs(obs)
        return self.get_action()

    def reset(self) -> None:
        """End every running episode (idempotent; RoboDojo calls it twice per episode)."""
        with self._lock:
            episodes = list(self._episodes.values())
            self._episodes.clear()
            self._latest.clear()
            self._failed_envs.clear()
            self._last_env = None
        for ep in episodes:
            try:
                ep.close("reset")
            except Exception:  # noqa: BLE001 - a failing close must not stop the reset of the others
                self._record_error(ep.env_idx, "reset", None)
            self._finished.append(ep)

    def close(self) -> None:
        """Stop everything (server shutdown)."""
        self.reset()

    @property
    def finished_episodes(self) -> tuple[Episode, ...]:
        return tuple(self._finished)

    def episode(self, env_idx: int) -> Episode | None:
        with self._lock:
            return self._episodes.get(env_idx)

    # ---------------------------------------------------------------- internals
    def _serve(self, env: int, obs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A chunk for env; any failure is logged and answered with a hold, and the server keeps serving."""
        with self._lock:
            failed = env in self._failed_envs
        if failed:
            return self._as_wire([hold_action(obs)])
        try:
            ep = self._episode_for(env, obs)
        except Exception:  # noqa: BLE001 - the episode could not start: hold until the next reset
            self._record_error(env, "episode start", None)
            with self._lock:
                self._failed_envs.add(env)
            return self._as_wire([hold_action(obs)])
        try:
            chunk = ep.on_infer(obs)
        except Exception:  # noqa: BLE001 - the agent stops; the env gets holds until the episode ends
            self._record_error(env, "get_action", ep)
            ep.hold_from_now()
            chunk = [hold_action(obs)]
        return self._as_wire(chunk)

    def _episode_for(self, env: int, obs: Mapping[str, Any]) -> Episode:
        with self._lock:
            ep = self._episodes.get(env)
            if ep is not None:
                return ep
            self._count += 1
            run_dir = self._run_dir(env)
            ep = Episode(
                self.config,
                env_idx=env,
                first_observation=obs,
                run_dir=run_dir,
                station=self.station,
                segmentation=self.segmentation,
                logger=log,
            )
            self._episodes[env] = ep
            self._append_index(ep)
        ep.start()
        return ep

    def _run_dir(self, env: int) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"{self.config.task}/{stamp}-env{env}-ep{self._count:04d}"
        path = self.config.run_root / name
        k = 1
        while path.exists():
            k += 1
            path = self.config.run_root / f"{name}-{k}"
        return path

    def _append_index(self, ep: Episode) -> None:
        """runs index: which run directory belongs to which env and when it started (for the eval runner)."""
        with (self.config.run_root / "episodes.jsonl").open("a") as f:
            f.write(json.dumps({"run_dir": str(ep.run_dir), "env_idx": ep.env_idx, "task": self.config.task,
                                "seed": self.config.seed, "started_at": time.time()}) + "\n")

    def _as_wire(self, chunk: list[Action]) -> list[dict[str, Any]]:
        """Plain msgpack-encodable dicts; in `ee` mode the joint targets become ee poses by forward kinematics."""
        out: list[dict[str, Any]] = []
        ee_mode = self.config.action_type == "ee"
        if ee_mode and not self._warned_ee:
            self._warned_ee = True
            log.warning("launched with action_type=ee: joint targets are converted to ee poses with forward "
                        "kinematics; RoboDojo then re-solves them with cuRobo (joint mode is exact)")
        for a in chunk:
            action = {k: np.asarray(v, dtype=np.float64).copy() for k, v in a.items()}
            if ee_mode:
                for arm in ("left", "right"):
                    q = action.pop(f"{arm}_arm_joint_state")
                    action[f"{arm}_ee_pose"] = self._kin.arm(arm).fk_pose(q)
            out.append(action)
        if not out:
            raise RuntimeError("internal error: an empty chunk")
        return out

    def _record_error(self, env: int, where: str, ep: Episode | None) -> None:
        tb = traceback.format_exc()
        log.error("PyRUA_Dojo %s failed for env %d:\n%s", where, env, tb)
        record = {"time": time.time(), "env_idx": env, "where": where, "traceback": tb}
        try:
            with self._errors.open("a") as f:
                f.write(json.dumps(jsonable(record)) + "\n")
            if ep is not None:
                ep.record_error(where, tb)
        except Exception:  # noqa: BLE001 - never let logging take the server down
            pass

    @staticmethod
    def _env_idx(obs: Mapping[str, Any]) -> int:
        try:
            return int(obs.get("env_idx", 0))
        except (TypeError, ValueError):
            return 0
