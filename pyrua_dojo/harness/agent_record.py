"""Put our agent's run directory of an episode next to RoboDojo's `_result.json`, with its agent record.

The Model writes each episode's run directory under its `run_root` and appends `{run_dir, env_idx, task, seed,
started_at}` to `run_root/episodes.jsonl`. Once the twin has booked the episode, `attach_agent_run` moves that
directory to `<run_id>/episodes/layout_NNNN/` (leaving a symlink where it was, so episodes.jsonl stays valid) and
rewrites its `result.json` as an `AgentRecord`: success and score measured by the twin; LLM calls, tokens, cost,
steps and wall time from the agent's own result.json, whose other keys are kept as they were. `compare` reads it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pyrua_dojo.harness.result_files import AGENT_RECORD_FILE, AgentRecord, agent_record_dir, write_agent_record

__all__ = ["agent_record_from_run", "attach_agent_run", "find_agent_run"]

INDEX_FILE = "episodes.jsonl"


def find_agent_run(run_root: Path | str, *, env_idx: int, task: str, since: float = 0.0) -> Path | None:
    """The latest run directory the Model started for `env_idx` of `task` at or after `since` (epoch seconds)."""
    index = Path(run_root) / INDEX_FILE
    if not index.is_file():
        return None
    found: Path | None = None
    for line in index.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash; the others still count
        if not isinstance(entry, dict):
            continue
        if entry.get("env_idx") == env_idx and entry.get("task") == task and float(entry.get("started_at", 0)) >= since:
            found = Path(str(entry["run_dir"]))
    return found


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0


def agent_record_from_run(
    agent_result: Mapping[str, Any],
    *,
    task: str,
    seed: int,
    layout_id: int,
    success: bool,
    score: float,
    steps: int,
    step_limit: int,
) -> AgentRecord:
    """The AgentRecord of one episode: the twin's verdict plus the agent's usage (missing counts read as 0)."""
    counts, tokens = _section(agent_result, "counts"), _section(agent_result, "tokens")
    timing, episode = _section(agent_result, "timing"), _section(agent_result, "episode")
    steps_used = counts.get("steps_used")
    if not isinstance(steps_used, int):
        steps_used = episode.get("steps_used") if isinstance(episode.get("steps_used"), int) else steps
    cost = agent_result.get("cost_usd")
    wall = timing.get("agent_wall_s")
    record = AgentRecord(
        task=task,
        seed=seed,
        layout_id=layout_id,
        success=success,
        score=float(score),
        status=str(agent_result.get("status") or "unknown"),
        llm_calls=_int(counts.get("llm_calls")),
        input_tokens=_int(tokens.get("prompt_tokens")),
        cached_tokens=_int(tokens.get("cached_tokens")),
        output_tokens=_int(tokens.get("completion_tokens")),
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
        steps_used=_int(steps_used),
        step_limit=int(step_limit),
        wall_s=float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall >= 0 else 0.0,
    )
    fields = set(record.to_json())
    extra = {k: v for k, v in agent_result.items() if k not in fields}
    return replace(record, extra=MappingProxyType(extra))


def attach_agent_run(
    run_dir: Path | str,
    agent_run: Path | str,
    *,
    task: str,
    seed: int,
    layout_id: int,
    success: bool,
    score: float,
    steps: int,
    step_limit: int,
    conditions: Mapping[str, Any] | None = None,
) -> Path:
    """Move `agent_run` into `run_dir` as layout `layout_id`'s agent directory and write its record there.

    conditions: the twin's conditions of the episode (segmentation noise level, station mode), kept in the record
    as `twin`.

    Returns the agent directory. Raises FileExistsError if that layout already has one, FileNotFoundError if
    `agent_run` is missing; in both cases nothing is moved.
    """
    source = Path(agent_run)
    if not source.is_dir():
        raise FileNotFoundError(f"agent run directory not found: {source}")
    target = agent_record_dir(run_dir, layout_id)
    if target.exists():
        raise FileExistsError(f"{target} already exists; not replacing it")
    result_file = source / AGENT_RECORD_FILE
    try:
        agent_result = json.loads(result_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        agent_result = {}
    if not isinstance(agent_result, dict):
        agent_result = {}
    if conditions is not None:
        agent_result["twin"] = dict(conditions)
    record = agent_record_from_run(
        agent_result, task=task, seed=seed, layout_id=layout_id, success=success, score=score, steps=steps,
        step_limit=step_limit,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), str(target))
    source.symlink_to(target.resolve(), target_is_directory=True)
    write_agent_record(run_dir, record)
    return target
