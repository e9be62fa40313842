"""`TaskEnvView`: the env object a policy's `deploy.py` receives from the twin, limited to RoboDojo's env methods.

RoboDojo hands `deploy.eval_one_episode(TASK_ENV=<its EvalEnv>, model_client)` the live simulator object; a
policy may use only `get_obs`, `take_action`, `is_episode_end`, `get_running_env_idx_list`, `get_obs_batch` and
`take_action_batch` (anything else is simulator state, i.e. privileged). The view offers exactly those. Any other
attribute - reading, `hasattr` probing, `__dict__` / `vars()`, setting - raises `EnvAccessError` (an
`AttributeError`, so `hasattr` answers False) naming the attribute, and every blocked name is remembered so the
run can report it. `dir()` lists the six methods. (Python offers no true privacy: `object.__getattribute__` on the
view still reaches its internals; the view stops accidents and casual probing, not a determined author.)

Besides forwarding, the view does what RoboDojo's `EvalEnv` does around these calls and the bare `TwinEnv` leaves
to its caller: it streams one video frame per observation of a running env and one last frame when an env ends
(RoboDojo renders it from `is_episode_end`), and it marks the exception of an action that fails RoboDojo's
validation, so the run can book the episode as failed with that error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrua_dojo.twin.env import TwinEnv
from pyrua_dojo.harness.videos import EpisodeVideos

__all__ = ["ENV_METHODS", "EnvAccessError", "TaskEnvView", "ViewState"]

#: The env methods RoboDojo's deploy contract allows (XPolicyLab `policy/demo_policy/deploy.py`).
ENV_METHODS = (
    "get_obs",
    "take_action",
    "is_episode_end",
    "get_running_env_idx_list",
    "get_obs_batch",
    "take_action_batch",
)
_OPEN_DUNDERS = frozenset({"__class__", "__repr__", "__str__", "__dir__", "__eq__", "__ne__", "__hash__", "__doc__"})
_ACTION_ERRORS = (ValueError, TypeError, KeyError)


class EnvAccessError(AttributeError):
    """A deploy.py reached for something RoboDojo's env contract does not offer."""

    def __init__(self, name: str, *, action: str = "read") -> None:
        self.attribute = name
        super().__init__(
            f"TASK_ENV.{name}: cannot {action} it - a policy's deploy.py may use only RoboDojo's env methods "
            f"{', '.join(ENV_METHODS)}; anything else is simulator state (privileged)"
        )


class ViewState:
    """What the view records for the run (owned by one TaskEnvView; read by the runner)."""

    def __init__(self, env: TwinEnv, videos: EpisodeVideos | None) -> None:
        self.env = env
        self.videos = videos
        self.blocked: list[str] = []
        self.invalid_action: BaseException | None = None
        self.invalid_where: str | None = None
        self.observations = 0
        self.actions = 0

    def ended(self) -> set[int]:
        return set(range(self.env.num_envs)) - set(self.env.get_running_env_idx_list())

    def record(self, obs_list: Sequence[Mapping[str, Any]], ids: Sequence[int], last_frame: bool) -> None:
        if self.videos is None:
            return
        running = set(self.env.get_running_env_idx_list())
        for env_idx, obs in zip(ids, obs_list, strict=True):
            if env_idx in running or last_frame:
                self.videos.append(env_idx, obs)

    def act(self, where: str, fn: Any, *args: Any) -> None:
        before = self.ended()
        try:
            fn(*args)
        except _ACTION_ERRORS as exc:
            self.invalid_action, self.invalid_where = exc, where
            raise
        self.actions += 1
        newly = sorted(self.ended() - before)
        if newly and self.videos is not None:  # RoboDojo's is_episode_end renders a last frame for them
            obs_list = self.env.get_obs_batch(newly)
            for env_idx, obs in zip(newly, obs_list, strict=True):
                self.videos.append(env_idx, obs)


class TaskEnvView:
    """RoboDojo's env interface over a `TwinEnv`, and nothing else (see module docstring)."""

    __slots__ = ("_state",)

    def __init__(self, state: ViewState) -> None:
        object.__setattr__(self, "_state", state)

    def __getattribute__(self, name: str) -> Any:
        if name in ENV_METHODS or name in _OPEN_DUNDERS:
            return object.__getattribute__(self, name)
        state: ViewState = object.__getattribute__(self, "_state")
        state.blocked.append(name)
        raise EnvAccessError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_state").blocked.append(name)
        raise EnvAccessError(name, action="set")

    def __delattr__(self, name: str) -> None:
        object.__getattribute__(self, "_state").blocked.append(name)
        raise EnvAccessError(name, action="delete")

    def __dir__(self) -> list[str]:
        return list(ENV_METHODS)

    def __repr__(self) -> str:
        return f"<TASK_ENV (pyrua-dojo twin): {', '.join(ENV_METHODS)}>"

    # --------------------------------------------------------------------------------- RoboDojo's env methods

    def get_obs(self) -> dict[str, Any]:
        """The observation of env 0."""
        state: ViewState = object.__getattribute__(self, "_state")
        obs = state.env.get_obs()
        state.observations += 1
        state.record([obs], [0], last_frame=False)
        return obs

    def get_obs_batch(
        self, env_idx_list: Sequence[int] | None = None, last_frame: bool = False
    ) -> list[dict[str, Any]]:
        """One observation per listed env (default: every env), each with its `env_idx`."""
        state: ViewState = object.__getattribute__(self, "_state")
        ids = list(range(state.env.num_envs)) if env_idx_list is None else [int(i) for i in env_idx_list]
        obs_list = state.env.get_obs_batch(ids)
        state.observations += 1
        state.record(obs_list, ids, last_frame=bool(last_frame))
        return obs_list

    def take_action(self, action: Mapping[str, Any]) -> None:
        """Execute one action on env 0 (validated as RoboDojo validates; an ended env drops it)."""
        state: ViewState = object.__getattribute__(self, "_state")
        state.act("take_action", state.env.take_action, action)

    def take_action_batch(
        self, actions_list: Sequence[Mapping[str, Any]], env_idx_list: Sequence[int] | None = None
    ) -> None:
        """Execute one action per listed env (default: every env)."""
        state: ViewState = object.__getattribute__(self, "_state")
        state.act("take_action_batch", state.env.take_action_batch, actions_list, env_idx_list)

    def is_episode_end(self) -> bool:
        """True once every env of the batch has ended."""
        return bool(object.__getattribute__(self, "_state").env.is_episode_end())

    def get_running_env_idx_list(self) -> list[int]:
        """The envs still running."""
        return list(object.__getattribute__(self, "_state").env.get_running_env_idx_list())
