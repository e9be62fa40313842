"""`pyrua-dojo eval`: many twin episodes of our agent, in parallel, resumable, sharded across machines.

Each episode goes through `pyrua_dojo.evaluate.play.play`: our Model behind a policy server on a free port, the twin client
running the plugin's own deploy.py against a fresh twin over the websocket protocol, RoboDojo's `_result.json` booked
by the twin client, and the agent's run directory moved next to it with its agent record. This module decides
which episodes to run, runs them in worker processes, shows progress and reports.

- **Plan**: for every task and seed, layouts 0..N-1 (N = `--episodes`, at most the task's `episodes_per_seed`,
  RoboDojo's `eval_nums`; default all), one run directory per (task, seed):
  `<out>/RoboDojo/<task>/PyRUA_Dojo/arx_x5/<seed>_ckpt_name=<ckpt>,action_type=joint/<run_id>/`. One run id for
  the whole eval: `--run-id`, else the latest run already there for this configuration (so running the same command
  again resumes), else a new one (`--new-run` forces a new one).
- **Resume**: the results on disk are the state. An episode is finished once it is booked in `_result.json`
  (written atomically, fsynced, under a lock); anything else is run again, and the agent directory an interrupted
  episode left behind is moved aside (`episodes/_unbooked/`), never deleted. `_eval.json` in each run directory
  records the settings that make a run what it is; resuming with different ones is refused.
- **Workers**: `--workers K` processes (multiprocessing "spawn"), each running one episode at a time, each episode
  with its own twin and policy server. A worker that dies loses only the episode it was running (it stays
  unbooked and is run by the next invocation); a replacement is started.
- **Shards**: `--shard i/n` runs the episodes whose (task, seed, layout) falls in shard i of n: layout ids are
  dealt round-robin from an offset fixed by a hash of (task, seed), so every machine computes the same partition
  and each (task, seed) is split evenly. Shards must share `--run-id`; `pyrua-dojo merge` joins their trees by path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pyrua_dojo.runtime.atomic_files import create_once
from pyrua_dojo.harness.result_files import EpisodeResult, ResultWriter
from pyrua_dojo.evaluate.plan import EVAL_FILE, EpisodeKey, EvalPlan, EvalSettings, make_plan
from pyrua_dojo.evaluate.episode_run import EpisodeDone, recover_agent_records, run_episode
from pyrua_dojo.evaluate.pool import WorkerPool

__all__ = [
    "EvalReport",
    "run_eval",
]



@dataclass(frozen=True)
class EvalReport:
    """How an invocation went: the plan, what it ran, and what is still to do."""

    plan: EvalPlan
    finished: tuple[EpisodeDone, ...]  # booked by this invocation
    not_run: tuple[EpisodeDone, ...]  # attempted, not booked (run again next time)
    interrupted: bool
    booked: Mapping[EpisodeKey, EpisodeResult] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def complete(self) -> bool:
        """Every planned episode is booked, or dropped as an unstable layout."""
        dropped = {d.key for d in self.not_run if d.dropped}
        return all(k in self.booked or k in dropped for k in self.plan.keys)


def _write_eval_files(settings: EvalSettings, plan: EvalPlan) -> None:
    """`_eval.json` in each run directory this invocation will write to (first writer wins; never rewritten)."""
    pending = {(k.task, k.seed) for k in plan.pending}
    for (task, seed), loc in plan.locations.items():
        if (task, seed) not in pending or (loc.path / EVAL_FILE).exists():
            continue
        loc.path.mkdir(parents=True, exist_ok=True)
        data = {
            "schema": "pyrua-dojo-eval-v1",
            "identity": settings.identity(),
            "run_id": plan.run_id,
            "task": task,
            "seed": seed,
            "episodes": settings.episodes,
            "created_at": time.time(),
            "note": "written by pyrua-dojo eval; a resumed run must have the same identity",
        }
        create_once(loc.path / EVAL_FILE, json.dumps(data, indent=2) + "\n")  # another shard may have won


def _booked(plan: EvalPlan) -> dict[EpisodeKey, EpisodeResult]:
    out: dict[EpisodeKey, EpisodeResult] = {}
    wanted = set(plan.keys)
    for (task, seed), loc in plan.locations.items():
        for e in ResultWriter(loc).episodes():
            if e.layout_id is not None and (key := EpisodeKey(task, seed, e.layout_id)) in wanted:
                out[key] = e
    return out


def _describe(done: EpisodeDone) -> str:
    if done.dropped:
        return f"{done.key}: dropped - {done.error}"
    if not done.booked:
        return f"{done.key}: not booked - {done.error}"
    verdict = "[green]success[/]" if done.success else f"[red]fail[/] ({done.error or done.failure})"
    return (f"{done.key}: {verdict}, score {done.score:.2f}, {done.steps}/{done.step_limit} steps, "
            f"{done.wall_s:.1f} s (worker {done.worker})")


def run_eval(
    settings: EvalSettings,
    *,
    console: Any = None,
    on_event: Callable[[str, Any], None] | None = None,
) -> EvalReport:
    """Run the plan's pending episodes with a live progress bar; Ctrl-C stops cleanly (finished episodes stay
    booked). `on_event(kind, payload)` sees every ("start", key) and ("done", EpisodeDone)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console or Console(stderr=True)
    plan = make_plan(settings)
    pending = plan.pending
    root = settings.root
    from pyrua_dojo.evaluate.play import conditions_line

    console.print(
        f"eval: {conditions_line(settings.segmentation, settings.seg_noise, settings.station)}; "
        f"run {plan.run_id}{' (resumed)' if plan.resumed else ''}, {len(settings.tasks)} task(s) x "
        f"{len(settings.seeds)} seed(s), shard {settings.shard}: {len(plan.keys)} episode(s), "
        f"{len(plan.done)} already booked, {len(pending)} to run on {min(settings.workers, max(1, len(pending)))} "
        f"worker(s); results under {root}",
        soft_wrap=True,
        highlight=False,
    )
    recovered = recover_agent_records(settings, plan)
    if recovered:
        console.print(f"eval: recovered the agent records of {len(recovered)} booked episode(s) interrupted before "
                      "their record was written", soft_wrap=True)
    finished: list[EpisodeDone] = []
    not_run: list[EpisodeDone] = []
    interrupted = False
    if pending:
        _write_eval_files(settings, plan)
        successes = sum(1 for e in plan.done.values() if e.success)
        booked_count = len(plan.done)
        running: set[EpisodeKey] = set()
        columns = (
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("SR {task.fields[sr]}"),
            TextColumn("running {task.fields[running]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )

        def sr_text() -> str:
            return f"{successes / booked_count * 100:.1f}% ({successes}/{booked_count})" if booked_count else "-"

        with Progress(*columns, console=console, transient=False) as progress:
            bar = progress.add_task("episodes", total=len(plan.keys), completed=len(plan.done), sr=sr_text(),
                                    running=0)

            def handle(kind: str, payload: Any) -> None:
                nonlocal successes, booked_count
                if on_event is not None:
                    on_event(kind, payload)
                if kind == "start":
                    running.add(payload)
                else:
                    done: EpisodeDone = payload
                    running.discard(done.key)
                    (finished if done.booked else not_run).append(done)
                    if done.booked:
                        booked_count += 1
                        successes += int(done.success)
                        progress.advance(bar)
                    progress.console.print(_describe(done), highlight=False, soft_wrap=True)
                progress.update(bar, sr=sr_text(), running=len(running))

            try:
                if settings.workers == 1:
                    for key in pending:
                        handle("start", key)
                        handle("done", run_episode(settings, plan.run_id, key, 1))
                else:
                    pool = WorkerPool(settings, plan.run_id, pending)
                    try:
                        for kind, payload in pool.events():
                            handle(kind, payload)
                    finally:
                        pool.close()
            except KeyboardInterrupt:
                interrupted = True
                console.print("eval: interrupted; finished episodes are booked, the rest run next time", soft_wrap=True)
    return EvalReport(plan, tuple(finished), tuple(not_run), interrupted, MappingProxyType(_booked(plan)))
