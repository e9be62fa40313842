"""Env side of the PyRUA_Dojo plugin: the control loop RoboDojo runs inside the simulator process.

RoboDojo's eval client (and XPolicyLab's debug client) imports this module and calls
`eval_one_episode(TASK_ENV, model_client)` (or `eval_one_episode_batch` when `eval_batch: true`). The loop
uses only `is_episode_end`, `get_obs`, `take_action` and their batch variants (`get_running_env_idx_list`,
`get_obs_batch`, `take_action_batch`): anything else on the env object would be privileged simulator state.

Differences from XPolicyLab's demo loop, all configured in `deploy.yml` next to this file:
- the websocket client's request timeout (120 s in XPolicyLab) is raised to `request_timeout_s`, so a
  long LLM call does not abort the episode (the simulator is paused while the agent thinks);
- an observation is taken only at chunk boundaries, unless `obs_every_step: true` (each `get_obs` renders
  all cameras, and older clients drop the intermediate ones anyway);
- an empty or malformed chunk is an error: it is logged and the loop stops, instead of spinning forever;
- every observation sent carries a per-episode, per-env number in `additional_info["pyrua_infer_seq"]`
  (on a copy: the env's dict is not changed), so the Model recognises an INFER that the client re-sends
  after a reconnect exactly, instead of by comparing observations.

Standard library and PyYAML only: the simulator's Python need not have `pyrua_dojo` installed.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

log = logging.getLogger(__name__)

DEPLOY_YML = Path(__file__).with_name("deploy.yml")
DEFAULT_REQUEST_TIMEOUT_S = 3600.0

#: Where XPolicyLab clients keep their request timeout, tried in order. `WsModelClient` (XPolicyLab 7198143
#: and later, and pyrua_dojo.wire.ModelClient) holds a `PolicyEvalClient` in `_client` whose mutable
#: `config` dataclass is read at every request.
TIMEOUT_HOLDERS: tuple[tuple[str, ...], ...] = (("_client", "config"), ("_client", "_config"), ("config",), ("_config",))

#: Key in `obs["additional_info"]` that numbers the observations of an episode (pyrua_dojo.runtime.stepping reads it).
INFER_SEQ_KEY = "pyrua_infer_seq"

Stop = Literal["episode_end", "empty_chunk", "bad_chunk", "no_running_env"]


@dataclass(frozen=True)
class DeploySettings:
    """The env-side keys of deploy.yml (the policy server reads the rest)."""

    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S  # None: leave the client's timeout alone
    obs_every_step: bool = False

    def __post_init__(self) -> None:
        t = self.request_timeout_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0):
            raise ValueError(f"request_timeout_s must be a positive number of seconds or null, got {t!r}")
        if t is not None:
            object.__setattr__(self, "request_timeout_s", float(t))
        if not isinstance(self.obs_every_step, bool):
            raise ValueError(f"obs_every_step must be true or false, got {self.obs_every_step!r}")

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> DeploySettings:
        """Pick and check the env-side keys; missing keys take their defaults."""
        timeout = cfg.get("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S)
        if isinstance(timeout, str):
            try:
                timeout = float(timeout)
            except ValueError:
                raise ValueError(f"request_timeout_s must be a number, got {timeout!r}") from None
        every = cfg.get("obs_every_step", False)
        if isinstance(every, str) and every.strip().lower() in ("true", "false"):
            every = every.strip().lower() == "true"
        return cls(request_timeout_s=timeout, obs_every_step=every)


def load_settings(path: str | os.PathLike[str] | None = None) -> DeploySettings:
    """Read deploy.yml (default: the one next to this file)."""
    yml = Path(path) if path is not None else DEPLOY_YML
    with open(yml, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{yml}: expected a mapping at the top level, got {type(data).__name__}")
    return DeploySettings.from_mapping(data)


@dataclass(frozen=True)
class LoopReport:
    """What one call of the loop did (XPolicyLab ignores it; tests and logs read it)."""

    chunks: int  # get_action / get_action_batch replies
    actions: int  # take_action / take_action_batch calls
    observations: int  # get_obs / get_obs_batch calls
    stopped: Stop
    request_timeout_s: float | None  # the client's timeout in force, None when it keeps none we know


def raise_request_timeout(model_client: Any, timeout_s: float | None) -> float | None:
    """Raise the client's request timeout to `timeout_s` (never lower it); return the value in force.

    Returns None, with a warning, when the client keeps no `request_timeout_s` where XPolicyLab's does:
    the episode then runs with whatever timeout that client has.
    """
    for path in TIMEOUT_HOLDERS:
        holder: Any = model_client
        for name in path:
            holder = getattr(holder, name, None)
            if holder is None:
                break
        current = getattr(holder, "request_timeout_s", None) if holder is not None else None
        if isinstance(current, bool) or not isinstance(current, (int, float)):
            continue
        if timeout_s is None or current >= timeout_s:
            return float(current)
        try:
            holder.request_timeout_s = float(timeout_s)
        except (AttributeError, TypeError) as exc:  # a frozen config
            log.warning("PyRUA_Dojo: cannot raise the request timeout (%s stays %.0f s): %s",
                        ".".join(path), current, exc)
            return float(current)
        log.info("PyRUA_Dojo: request timeout raised from %.0f s to %.0f s", current, timeout_s)
        return float(timeout_s)
    if timeout_s is not None:
        log.warning(
            "PyRUA_Dojo: %s keeps no request_timeout_s where XPolicyLab's WsModelClient does; a get_action "
            "longer than its own timeout will abort the episode (with newer XPolicyLab, export "
            "XPOLICY_WS_REQUEST_TIMEOUT_S=%.0f before starting the env client)",
            type(model_client).__name__, timeout_s,
        )
    return None


def numbered(obs: Any, seq: int) -> Any:
    """A shallow copy of `obs` whose additional_info carries `seq` (obs returned as is if it is not a dict)."""
    if not isinstance(obs, Mapping):
        return obs
    info = obs.get("additional_info")
    if info is None:
        info = {}
    elif not isinstance(info, Mapping):
        return obs
    return {**obs, "additional_info": {**info, INFER_SEQ_KEY: seq}}


def _check_chunk(actions: Any, where: str) -> tuple[list[Mapping[str, Any]] | None, Stop]:
    """A chunk must be a non-empty list of action dicts; say what is wrong otherwise."""
    if isinstance(actions, (list, tuple)) and len(actions) == 0:
        log.error("PyRUA_Dojo: %s returned an empty chunk; stopping the episode loop", where)
        return None, "empty_chunk"
    if not isinstance(actions, (list, tuple)) or not all(isinstance(a, Mapping) for a in actions):
        log.error("PyRUA_Dojo: %s returned %s, not a list of action dicts; stopping the episode loop",
                  where, type(actions).__name__)
        return None, "bad_chunk"
    return list(actions), "episode_end"


def eval_one_episode(TASK_ENV: Any, model_client: Any, *, settings: DeploySettings | None = None) -> LoopReport:
    """Run one episode: observe at chunk boundaries, fetch a chunk, execute it action by action."""
    cfg = settings if settings is not None else load_settings()
    timeout = raise_request_timeout(model_client, cfg.request_timeout_s)
    model_client.call(func_name="reset")
    chunks = actions_taken = observations = 0
    stopped: Stop = "episode_end"
    while not TASK_ENV.is_episode_end():
        model_client.call(func_name="update_obs", obs=numbered(TASK_ENV.get_obs(), observations))
        observations += 1
        chunk, stopped = _check_chunk(model_client.call(func_name="get_action"), "get_action")
        if chunk is None:
            break
        chunks += 1
        for i, action in enumerate(chunk):
            TASK_ENV.take_action(action)
            actions_taken += 1
            if TASK_ENV.is_episode_end() or i + 1 == len(chunk):
                break
            if cfg.obs_every_step:
                model_client.call(func_name="update_obs", obs=numbered(TASK_ENV.get_obs(), observations))
                observations += 1
    return LoopReport(chunks, actions_taken, observations, stopped, timeout)


def eval_one_episode_batch(TASK_ENV: Any, model_client: Any, *, settings: DeploySettings | None = None) -> LoopReport:
    """Run parallel envs: one chunk per env per round; each env runs exactly the actions of its own chunk.

    Chunks may differ in length: at each tick only the envs whose chunk still has an action (and that are
    still running) are passed to `take_action_batch`; the round ends when every chunk is used up.
    """
    cfg = settings if settings is not None else load_settings()
    timeout = raise_request_timeout(model_client, cfg.request_timeout_s)
    model_client.call(func_name="reset")
    chunks = actions_taken = observations = 0
    stopped: Stop = "episode_end"
    sent: dict[Any, int] = {}  # observations sent per env_idx

    def observe(env_idx_list: list[int]) -> list[Any]:
        out = []
        for env_idx, obs in zip(env_idx_list, TASK_ENV.get_obs_batch(env_idx_list)):
            out.append(numbered(obs, sent.get(env_idx, 0)))
            sent[env_idx] = sent.get(env_idx, 0) + 1
        return out

    while not TASK_ENV.is_episode_end():
        env_idx_list = list(TASK_ENV.get_running_env_idx_list())
        if not env_idx_list:
            log.error("PyRUA_Dojo: the episode is not over but no env is running; stopping the episode loop")
            stopped = "no_running_env"
            break
        model_client.call(func_name="update_obs_batch", obs=observe(env_idx_list))
        observations += 1
        replies = model_client.call(func_name="get_action_batch", obs=env_idx_list)
        batch = _check_batch(replies, env_idx_list)
        if isinstance(batch, str):
            stopped = batch
            break
        chunks += 1
        plan = dict(zip(env_idx_list, batch))
        tick = 0
        while True:
            active = [e for e in env_idx_list if tick < len(plan[e])]
            if not active:
                break
            TASK_ENV.take_action_batch([plan[e][tick] for e in active], active)
            actions_taken += 1
            tick += 1
            if TASK_ENV.is_episode_end():
                break
            running = set(TASK_ENV.get_running_env_idx_list())
            env_idx_list = [e for e in env_idx_list if e in running and tick < len(plan[e])]
            if not env_idx_list:
                break
            if cfg.obs_every_step:
                model_client.call(func_name="update_obs_batch", obs=observe(env_idx_list))
                observations += 1
    return LoopReport(chunks, actions_taken, observations, stopped, timeout)


def _check_batch(replies: Any, env_idx_list: Sequence[int]) -> list[list[Mapping[str, Any]]] | Stop:
    if not isinstance(replies, (list, tuple)) or len(replies) != len(env_idx_list):
        got = len(replies) if isinstance(replies, (list, tuple)) else type(replies).__name__
        log.error("PyRUA_Dojo: get_action_batch returned %s chunks for %d envs; stopping the episode loop",
                  got, len(env_idx_list))
        return "bad_chunk"
    batch = []
    for env_idx, reply in zip(env_idx_list, replies):
        chunk, why = _check_chunk(reply, f"get_action_batch (env {env_idx})")
        if chunk is None:
            return why
        batch.append(chunk)
    return batch
