"""XPolicyLab's reference control loop (`policy/demo_policy/deploy.py`), for policies without a deploy.py of their own.

Same calls in the same order as upstream, so a policy served with it sees the traffic RoboDojo would produce:

    eval_one_episode        reset; until the episode ends: get_obs -> update_obs -> get_action, then run the
                            chunk's actions in order, after each one stopping at episode end or chunk end and
                            otherwise sending a fresh get_obs as update_obs
    eval_one_episode_batch  reset; until the episode ends: running envs -> get_obs_batch -> update_obs_batch ->
                            get_action_batch (one chunk per env); for each index of the first chunk, one
                            take_action_batch over the envs, dropping envs that ended and refreshing their obs

Upstream quirks kept on purpose: an empty chunk makes `eval_one_episode` loop without stepping (it is the policy's
bug, as there), and in batch mode every env runs as many actions as the first env's chunk has.
"""

from __future__ import annotations

from typing import Any

__all__ = ["eval_one_episode", "eval_one_episode_batch"]


def eval_one_episode(TASK_ENV: Any, model_client: Any) -> None:  # noqa: N803 - XPolicyLab's keyword names
    """One env: one observation per chunk reaches the model over ws (update_obs only caches)."""
    model_client.call(func_name="reset")
    while not TASK_ENV.is_episode_end():
        model_client.call(func_name="update_obs", obs=TASK_ENV.get_obs())
        chunk = model_client.call(func_name="get_action")
        last = len(chunk) - 1
        for i, action in enumerate(chunk):
            TASK_ENV.take_action(action)
            if TASK_ENV.is_episode_end() or i == last:
                break
            model_client.call(func_name="update_obs", obs=TASK_ENV.get_obs())


def eval_one_episode_batch(TASK_ENV: Any, model_client: Any) -> None:  # noqa: N803
    """Parallel envs: one chunk per running env per round, stepped together."""
    model_client.call(func_name="reset")
    while not TASK_ENV.is_episode_end():
        env_idx_list = TASK_ENV.get_running_env_idx_list()
        model_client.call(func_name="update_obs_batch", obs=TASK_ENV.get_obs_batch(env_idx_list))
        chunks = model_client.call(func_name="get_action_batch", obs=env_idx_list)
        size = len(chunks[0])
        for i in range(size):
            TASK_ENV.take_action_batch([chunk[i] for chunk in chunks], env_idx_list)
            if TASK_ENV.is_episode_end() or i + 1 == size:
                break
            running = set(TASK_ENV.get_running_env_idx_list())
            keep = [k for k, env_idx in enumerate(env_idx_list) if env_idx in running]
            chunks = [chunks[k] for k in keep]
            env_idx_list = [env_idx_list[k] for k in keep]
            model_client.call(func_name="update_obs_batch", obs=TASK_ENV.get_obs_batch(env_idx_list))
