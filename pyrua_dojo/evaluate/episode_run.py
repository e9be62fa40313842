"""One episode of an eval: played through `pyrua_dojo.evaluate.play.play`, its agent directory moved next to its booking,
and the agent records of episodes an interrupted invocation left behind recovered.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pyrua_dojo.harness.result_files import (
    EPISODES_DIR,
    ResultWriter,
    RunLocation,
    agent_record_dir,
    read_agent_record,
    write_agent_record,
)
from pyrua_dojo.evaluate.plan import EpisodeKey, EvalPlan, EvalSettings

__all__ = [
    "EpisodeDone",
]

log = logging.getLogger(__name__)

AGENT_RUNS_DIR = "_agent_runs"  # next to the RoboDojo root: the agent's live run directories
UNBOOKED_DIR = "_unbooked"  # under episodes/: agent directories of episodes that were never booked


@dataclass(frozen=True)
class EpisodeDone:
    """What one attempt at an episode came to. `booked` is False when it was not run to a booking (an error before
    the episode could start, a dead worker): it is run again next time. `dropped`: the layout failed the twin's
    stability check, so RoboDojo would not count it either; it is never booked."""

    key: EpisodeKey
    booked: bool
    success: bool = False
    score: float = 0.0
    steps: int = 0
    step_limit: int = 0
    failure: str | None = None
    error: str | None = None
    wall_s: float = 0.0
    worker: int = 0
    dropped: bool = False


def is_unstable(key: EpisodeKey) -> bool:
    """True when the layout fails the twin's stability check (asked of a fresh twin, after an episode did not run)."""
    from pyrua_dojo.twin.env import TwinEnv, UnstableLayoutError

    try:
        with TwinEnv() as env:
            env.reset(key.task, key.seed, key.layout_id)
    except UnstableLayoutError:
        return True
    return False


def _set_aside(location: RunLocation, layout_id: int) -> None:
    """Move an unbooked episode's leftover agent directory out of the way (a crash left it); nothing is deleted."""
    target = agent_record_dir(location.path, layout_id)
    if not target.exists() and not target.is_symlink():
        return
    aside = location.path / EPISODES_DIR / UNBOOKED_DIR
    aside.mkdir(parents=True, exist_ok=True)
    dest = aside / f"{target.name}.{time.strftime('%Y%m%d-%H%M%S')}"
    k = 1
    while dest.exists():
        k += 1
        dest = aside / f"{target.name}.{time.strftime('%Y%m%d-%H%M%S')}-{k}"
    shutil.move(str(target), str(dest))


def _note_outcome(location: RunLocation, layout_id: int, **fields: Any) -> None:
    """Add fields (the twin's failure reason, a policy error) to an episode's agent record; the report reads them."""
    directory = agent_record_dir(location.path, layout_id)
    try:
        record = read_agent_record(directory)
    except ValueError:
        return
    if record is None:
        return
    from dataclasses import replace

    extra = dict(record.extra)
    extra.update(fields)
    write_agent_record(location.path, replace(record, extra=MappingProxyType(extra)))


def _agent_runs_root(settings: EvalSettings, run_id: str, key: EpisodeKey) -> Path:
    return settings.out / AGENT_RUNS_DIR / run_id / f"{key.task}-seed{key.seed}-layout{key.layout_id:04d}"


def recover_agent_records(settings: EvalSettings, plan: EvalPlan) -> list[EpisodeKey]:
    """Attach the agent directory of every booked episode that lacks its agent record (a kill landed between the
    booking and the record): it is still in the episode's run root under `_agent_runs/`. Returns those attached."""
    from pyrua_dojo.harness.agent_record import attach_agent_run, find_agent_run
    from pyrua_dojo.twin.tasks import get_twin_task

    recovered = []
    for key, booked in plan.done.items():
        location = plan.locations[(key.task, key.seed)]
        target = agent_record_dir(location.path, key.layout_id)
        if target.exists():
            continue
        base = _agent_runs_root(settings, plan.run_id, key)
        candidates = sorted(p for p in base.parent.glob(f"{base.name}*") if p.is_dir())
        for run_root in reversed(candidates):
            agent_run = find_agent_run(run_root, env_idx=0, task=key.task)
            if agent_run is None or not agent_run.is_dir() or agent_run.is_symlink():
                continue
            try:
                result = json.loads((agent_run / "result.json").read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                result = {}
            steps = result.get("episode", {}).get("steps_used") if isinstance(result.get("episode"), dict) else None
            attach_agent_run(location.path, agent_run, task=key.task, seed=key.seed, layout_id=key.layout_id,
                             success=booked.success, score=booked.score, steps=steps if isinstance(steps, int) else 0,
                             step_limit=get_twin_task(key.task).step_limit)
            _note_outcome(location, key.layout_id, failure=None, recovered="the eval was interrupted between the "
                          "booking and this record; attached from _agent_runs/ on resume (twin failure unknown)")
            recovered.append(key)
            break
    return recovered


def run_episode(settings: EvalSettings, run_id: str, key: EpisodeKey, worker: int = 0) -> EpisodeDone:
    """Run one episode through `play` and book it; never raises for a failure of the episode itself."""
    from pyrua_dojo.evaluate.play import PlayOptions, play

    location = settings.location(key.task, key.seed, run_id)
    t0 = time.monotonic()
    try:
        if key.layout_id in {e.layout_id for e in ResultWriter(location).episodes()}:
            return EpisodeDone(key, False, error="already booked (another process ran it)", worker=worker)
        _set_aside(location, key.layout_id)
        run_root = _agent_runs_root(settings, run_id, key)
        if run_root.exists():
            run_root = run_root.with_name(f"{run_root.name}.{time.strftime('%Y%m%d-%H%M%S')}")
        options = PlayOptions(
            task=key.task,
            seed=key.seed,
            layout=key.layout_id,
            results=Path(settings.out),
            run_root=run_root,
            ckpt_name=settings.ckpt,
            run_id=run_id,
            **settings.run_options(),
        )
        result = play(options, echo=lambda line: log.debug("%s", line))
    except Exception as exc:  # noqa: BLE001 - one episode's failure must not stop the eval
        message = f"{type(exc).__name__}: {exc}"
        log.debug("episode %s failed:\n%s", key, traceback.format_exc())
        try:
            dropped = isinstance(exc, RuntimeError) and is_unstable(key)
        except Exception:  # noqa: BLE001 - the check is a courtesy; the episode is simply not booked
            dropped = False
        if dropped:
            message = "unstable layout: dropped from the count, as RoboDojo drops it"
        return EpisodeDone(key, False, error=message, wall_s=time.monotonic() - t0, worker=worker, dropped=dropped)
    booked = any(e.layout_id == key.layout_id for e in ResultWriter(location).episodes())
    if booked:
        noted = {"failure": result.failure, **({"error": result.error} if result.error else {})}
        _note_outcome(location, key.layout_id, **noted)
    return EpisodeDone(key, booked, result.success, result.score, result.steps, result.step_limit, result.failure,
                       result.error, time.monotonic() - t0, worker)
