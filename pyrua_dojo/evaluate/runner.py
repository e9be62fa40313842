"""`pyrua-dojo eval`: many twin episodes of our agent, in parallel, resumable, sharded across machines.

Each episode goes through `pyrua_dojo.play.play`: our Model behind a policy server on a free port, the twin client
running the plugin's own deploy.py against a fresh twin over the websocket protocol, RoboDojo's `_result.json` booked
by the twin client, and the agent's run directory moved next to it with its agent record. This module decides
which episodes to run, runs them in worker processes, shows progress and reports.

- **Plan**: for every task and seed, layouts 0..N-1 (N = `--episodes`, at most the task's `eval_nums`; default all),
  one run directory per (task, seed): `<out>/RoboDojo/<task>/PyRUA_Dojo/arx_x5/<seed>_ckpt_name=<ckpt>,action_type=
  joint/<run_id>/`. One run id for the whole eval: `--run-id`, else the latest run already there for this
  configuration (so running the same command again resumes), else a new one (`--new-run` forces a new one).
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

import hashlib
import json
import logging
import multiprocessing as mp
import os
import queue
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

from pyrua_dojo.files import create_once
from pyrua_dojo.run_options import RunOptions, run_options_from_args
from pyrua_dojo.evaluate.results import (
    BENCHMARK,
    EPISODES_DIR,
    RESULT_FILE,
    EpisodeResult,
    ResultWriter,
    RunLocation,
    additional_info,
    agent_record_dir,
    new_run_id,
    read_agent_record,
    write_agent_record,
)

__all__ = [
    "EVAL_FILE",
    "EpisodeDone",
    "EpisodeKey",
    "EvalPlan",
    "EvalReport",
    "EvalSettings",
    "Shard",
    "make_plan",
    "run_cli",
    "run_eval",
    "shard_of",
]

log = logging.getLogger(__name__)

POLICY_NAME = "PyRUA_Dojo"
CONFIG_NAME = "arx_x5"
EVAL_FILE = "_eval.json"
IDENTITY_BEFORE = {"judging_card": False, "preset": None, "seg_noise": "none", "station": "exact"}
"""What an identity key added later means in an older `_eval.json` (runs made before the judging card, presets, mask
noise and the drawn station had none: the card off, no preset, oracle masks, the exact station)."""
AGENT_RUNS_DIR = "_agent_runs"  # next to the RoboDojo root: the agent's live run directories
UNBOOKED_DIR = "_unbooked"  # under episodes/: agent directories of episodes that were never booked
MAX_RESTARTS_PER_WORKER = 3


@dataclass(frozen=True, order=True)
class EpisodeKey:
    """One episode of the plan: a task, a layout seed and a layout id."""

    task: str
    seed: int
    layout_id: int

    def __str__(self) -> str:
        return f"{self.task} seed {self.seed} layout {self.layout_id}"


def _offset(task: str, seed: int) -> int:
    return int(hashlib.sha256(f"{task}/{seed}".encode()).hexdigest()[:8], 16)


def shard_of(key: EpisodeKey, count: int) -> int:
    """The shard (1..count) that runs `key`: layout ids of a (task, seed) dealt round-robin from a hashed offset."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    return (key.layout_id + _offset(key.task, key.seed)) % count + 1


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based, as written on the command line: 1/2, 2/2)."""

    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(f"a shard is i/n with 1 <= i <= n, got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            i, n = (int(part) for part in text.split("/"))
        except ValueError:
            raise ValueError(f"--shard takes i/n (e.g. 1/4), got {text!r}") from None
        return cls(i, n)

    def owns(self, key: EpisodeKey) -> bool:
        return shard_of(key, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class EvalSettings(RunOptions):
    """One `eval` invocation: tasks, seeds, layouts, workers, where results go, and the options `play` shares
    (RunOptions). `episodes`: layouts per (task, seed), None for the task's own count."""

    tasks: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    episodes: int | None = None
    workers: int = 1
    shard: Shard = Shard()
    out: Path = Path("eval_result")
    run_id: str | None = None
    new_run: bool = False
    ckpt_name: str | None = None
    layouts: str | None = None  # --layouts "3" / "0-9" / "0,3,5-7": these layout ids instead of 0..episodes-1
    request_timeout_s: float = field(default=3600.0, kw_only=True)
    judging_card: bool | None = field(default=True, kw_only=True)  # recorded in _eval.json

    def __post_init__(self) -> None:
        from pyrua_dojo.twin.tasks import get_task as twin_task

        if not self.tasks:
            raise ValueError("no tasks given (--tasks T1,T2)")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"a task is given twice: {list(self.tasks)}")
        for t in self.tasks:
            twin_task(t)  # ValueError naming the twin's tasks
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds must be integers >= 0, got {list(self.seeds)}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"a seed is given twice: {list(self.seeds)}")
        if self.episodes is not None and self.episodes < 1:
            raise ValueError(f"--episodes must be >= 1, got {self.episodes}")
        if self.layouts is not None:
            if self.episodes is not None:
                raise ValueError("give either --episodes or --layouts, not both")
            for t in self.tasks:
                _layouts(t, None, self.layouts)  # ValueError on a bad or out-of-range id
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        super().__post_init__()
        if self.run_id is not None and (not self.run_id or "/" in self.run_id or self.run_id in (".", "..")):
            raise ValueError(f"--run-id must be a plain name, got {self.run_id!r}")
        if self.run_id is not None and self.new_run:
            raise ValueError("give either --run-id or --new-run, not both")
        if self.shard.count > 1 and self.run_id is None:
            raise ValueError("shards merge by path, so every shard needs the same --run-id "
                             f"(for example --run-id {new_run_id()})")
        ckpt = self.ckpt
        if not ckpt or "/" in ckpt:
            raise ValueError(f"ckpt name must be a non-empty name without '/', got {ckpt!r}")

    @property
    def ckpt(self) -> str:
        """The `ckpt_name` of RoboDojo's result path: --ckpt-name, else the model, else the planner."""
        return self.ckpt_name or (self.model or self.preset if self.planner == "openai" else self.planner) or self.planner

    @property
    def root(self) -> Path:
        return Path(self.out) / BENCHMARK

    def identity(self) -> dict[str, Any]:
        """What makes two invocations the same run (resuming with anything else is refused)."""
        program = None
        if self.program is not None:
            data = Path(self.program).read_bytes()
            program = {"name": Path(self.program).name, "sha256": hashlib.sha256(data).hexdigest()}
        return {
            "planner": self.planner,
            "preset": self.preset,
            "model": self.model,
            "base_url": self.base_url,
            "program": program,
            "replay_from": None if self.replay_from is None else str(self.replay_from),
            "llm_call_budget": self.llm_call_budget,
            "depth": self.depth,
            "segmentation": self.segmentation if self.segmentation in ("twin", "none") else "url",
            "seg_noise": self.seg_noise if self.segmentation == "twin" else "n/a",
            "station": self.station,
            "overrides": sorted(self.overrides),
            "ckpt_name": self.ckpt,
            "judging_card": self.judging_card,
        }

    def location(self, task: str, seed: int, run_id: str) -> RunLocation:
        return RunLocation(self.root, task, POLICY_NAME, CONFIG_NAME, seed, additional_info(self.ckpt, "joint"),
                           run_id)


@dataclass(frozen=True)
class EvalPlan:
    """What this invocation covers: its run id, every episode of this shard, and those already booked."""

    run_id: str
    keys: tuple[EpisodeKey, ...]
    done: Mapping[EpisodeKey, EpisodeResult]
    locations: Mapping[tuple[str, int], RunLocation]
    resumed: bool

    @property
    def pending(self) -> tuple[EpisodeKey, ...]:
        return tuple(k for k in self.keys if k not in self.done)


def _layouts(task: str, episodes: int | None, layouts: str | None = None) -> Sequence[int]:
    from pyrua_dojo.twin.tasks import get_task as twin_task

    n = twin_task(task).eval_nums
    if layouts is not None:
        from pyrua_dojo.harness.client import parse_layouts

        return parse_layouts(layouts, n)
    return range(min(n, episodes) if episodes is not None else n)


def _latest_run_id(settings: EvalSettings) -> str | None:
    """The greatest run id that already holds this configuration's results for one of the planned (task, seed)."""
    found: list[str] = []
    for task in settings.tasks:
        for seed in settings.seeds:
            seed_dir = settings.location(task, seed, "x").path.parent
            if seed_dir.is_dir():
                found += [d.name for d in seed_dir.iterdir()
                          if d.is_dir() and ((d / EVAL_FILE).is_file() or (d / RESULT_FILE).is_file())]
    return max(found) if found else None


def _fresh_run_id(settings: EvalSettings) -> str:
    """A new timestamp run id that no planned (task, seed) has yet, and later than any it has (summarize reads the
    latest): now, or the next free second after the latest existing one."""
    from datetime import datetime, timedelta

    from pyrua_dojo.evaluate.results import RUN_ID_FORMAT

    stamp = datetime.now().replace(microsecond=0)
    latest = _latest_run_id(settings)
    if latest is not None:
        try:
            stamp = max(stamp, datetime.strptime(latest, RUN_ID_FORMAT) + timedelta(seconds=1))
        except ValueError:
            pass  # a hand-named run id: any timestamp is a new name
    while any(settings.location(t, s, new_run_id(stamp)).path.exists() for t in settings.tasks for s in settings.seeds):
        stamp += timedelta(seconds=1)
    return new_run_id(stamp)


def _check_identity(settings: EvalSettings, location: RunLocation) -> None:
    path = location.path / EVAL_FILE
    if not path.is_file():
        return
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the run's settings ({exc}); not touching this run") from None
    mine = settings.identity()
    theirs = saved.get("identity", {}) if isinstance(saved, dict) else {}
    theirs = {**IDENTITY_BEFORE, **theirs} if isinstance(theirs, dict) else {}
    diffs = [f"{k}: {theirs.get(k)!r} there, {mine[k]!r} now" for k in mine if theirs.get(k) != mine[k]]
    if diffs:
        raise ValueError(
            f"run {location.run_id} at {location.path} was made with other settings ({'; '.join(diffs)}); "
            "resume it with the same ones, or start another run with --new-run"
        )


def make_plan(settings: EvalSettings) -> EvalPlan:
    """The episodes of this shard and which of them are already booked (see the module docstring)."""
    resumed = False
    if settings.run_id is not None:
        run_id = settings.run_id
    elif not settings.new_run and (latest := _latest_run_id(settings)) is not None:
        run_id, resumed = latest, True
    else:
        run_id = _fresh_run_id(settings)
    keys: list[EpisodeKey] = []
    done: dict[EpisodeKey, EpisodeResult] = {}
    locations: dict[tuple[str, int], RunLocation] = {}
    for task in settings.tasks:
        for seed in settings.seeds:
            loc = settings.location(task, seed, run_id)
            locations[(task, seed)] = loc
            _check_identity(settings, loc)
            booked = {e.layout_id: e for e in ResultWriter(loc).episodes()}
            for layout in _layouts(task, settings.episodes, settings.layouts):
                key = EpisodeKey(task, seed, layout)
                if not settings.shard.owns(key):
                    continue
                keys.append(key)
                if layout in booked:
                    done[key] = booked[layout]
    return EvalPlan(run_id, tuple(keys), MappingProxyType(done), MappingProxyType(locations), resumed)


# ------------------------------------------------------------------------------------------------ one episode


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
    from pyrua_dojo.twin.tasks import get_task as twin_task

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
                             step_limit=twin_task(key.task).step_lim)
            _note_outcome(location, key.layout_id, failure=None, recovered="the eval was interrupted between the "
                          "booking and this record; attached from _agent_runs/ on resume (twin failure unknown)")
            recovered.append(key)
            break
    return recovered


def run_episode(settings: EvalSettings, run_id: str, key: EpisodeKey, worker: int = 0) -> EpisodeDone:
    """Run one episode through `play` and book it; never raises for a failure of the episode itself."""
    from pyrua_dojo.play import PlayOptions, play

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


# ---------------------------------------------------------------------------------------------------- workers


def _worker_main(worker: int, settings: EvalSettings, run_id: str, jobs: Any, results: Any) -> None:
    """A worker process: run the episodes it is sent, one at a time, until it gets None."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt means
    os.environ.setdefault("MUJOCO_GL", "egl")
    logging.basicConfig(level=logging.WARNING, format=f"worker {worker}: %(levelname)s %(name)s: %(message)s")
    while True:
        item = jobs.get()
        if item is None:
            results.put(("exit", worker, None))
            return
        key = EpisodeKey(*item)
        results.put(("start", worker, asdict(key)))
        done = run_episode(settings, run_id, key, worker)
        results.put(("done", worker, asdict(done) | {"key": asdict(done.key)}))


def _done_from(payload: Mapping[str, Any]) -> EpisodeDone:
    data = dict(payload)
    data["key"] = EpisodeKey(**data["key"])
    return EpisodeDone(**data)


@dataclass
class _Worker:
    """The parent's view of one worker process (mutable; owned by `_Pool`)."""

    ident: int
    process: Any
    jobs: Any
    current: EpisodeKey | None = None
    restarts: int = 0
    exited: bool = False


class _Pool:
    """K spawned worker processes, each fed one episode at a time from the parent's queue."""

    def __init__(self, settings: EvalSettings, run_id: str, keys: Sequence[EpisodeKey]) -> None:
        self._ctx = mp.get_context("spawn")
        self._settings = settings
        self._run_id = run_id
        self._todo = list(keys)
        self._results = self._ctx.Queue()
        self._workers = [self._start(i + 1) for i in range(min(settings.workers, len(keys)))]

    def _start(self, ident: int, restarts: int = 0) -> _Worker:
        jobs = self._ctx.Queue()
        p = self._ctx.Process(target=_worker_main, args=(ident, self._settings, self._run_id, jobs, self._results),
                              name=f"pyrua-eval-worker-{ident}", daemon=True)
        p.start()
        w = _Worker(ident, p, jobs, restarts=restarts)
        self._feed(w)
        return w

    def _feed(self, w: _Worker) -> None:
        if self._todo:
            key = self._todo.pop(0)
            w.current = key
            w.jobs.put((key.task, key.seed, key.layout_id))
        else:
            w.current = None
            w.jobs.put(None)

    @property
    def running(self) -> list[EpisodeKey]:
        return [w.current for w in self._workers if w.current is not None and not w.exited]

    def events(self, poll_s: float = 0.5) -> Any:
        """Yield ("start", key) and ("done", EpisodeDone) until every worker has exited."""
        while not all(w.exited for w in self._workers):
            try:
                kind, ident, payload = self._results.get(timeout=poll_s)
            except queue.Empty:
                yield from self._check_dead()
                continue
            w = next(x for x in self._workers if x.ident == ident)
            if kind == "start":
                yield "start", EpisodeKey(**payload)
            elif kind == "done":
                done = _done_from(payload)
                self._feed(w)
                yield "done", done
            elif kind == "exit":
                w.exited = True
                w.process.join(timeout=10)

    def _check_dead(self) -> Any:
        for i, w in enumerate(self._workers):
            if w.exited or w.process.is_alive():
                continue
            w.exited = True
            code = w.process.exitcode
            if w.current is not None:
                yield "done", EpisodeDone(w.current, False, error=f"worker {w.ident} died (exit code {code})",
                                          worker=w.ident)
                w.current = None
            if self._todo and w.restarts < MAX_RESTARTS_PER_WORKER:
                log.warning("worker %d died (exit code %s); starting a replacement", w.ident, code)
                self._workers[i] = self._start(w.ident, w.restarts + 1)

    def close(self) -> None:
        """Stop every worker now (an interrupt): the episodes they were running stay unbooked."""
        for w in self._workers:
            if w.process.is_alive():
                w.process.terminate()
        for w in self._workers:
            w.process.join(timeout=10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=5)


# -------------------------------------------------------------------------------------------------- the run


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
    from pyrua_dojo.play import conditions_line

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
                    pool = _Pool(settings, plan.run_id, pending)
                    try:
                        for kind, payload in pool.events():
                            handle(kind, payload)
                    finally:
                        pool.close()
            except KeyboardInterrupt:
                interrupted = True
                console.print("eval: interrupted; finished episodes are booked, the rest run next time", soft_wrap=True)
    return EvalReport(plan, tuple(finished), tuple(not_run), interrupted, MappingProxyType(_booked(plan)))


# ---------------------------------------------------------------------------------------------------- output


def summary_rows(report: EvalReport) -> list[tuple[str, int, int, int, float | None, float | None]]:
    """(task, seed, booked, planned, SR %, Score) per (task, seed) of the plan, over the episodes booked."""
    rows = []
    for (task, seed), _loc in sorted(report.plan.locations.items()):
        keys = [k for k in report.plan.keys if (k.task, k.seed) == (task, seed)]
        eps = [report.booked[k] for k in keys if k in report.booked]
        sr = sum(e.success for e in eps) / len(eps) * 100 if eps else None
        score = sum(e.score for e in eps) / len(eps) * 100 if eps else None
        rows.append((task, seed, len(eps), len(keys), sr, score))
    return rows


def print_summary(report: EvalReport, settings: EvalSettings, out: TextIO) -> None:
    """The per (task, seed) table over booked episodes, what is left, and where to look next."""
    from rich.console import Console
    from rich.table import Table

    from pyrua_dojo.play import conditions_line

    conditions = conditions_line(settings.segmentation, settings.seg_noise, settings.station)
    table = Table(title=f"run {report.plan.run_id}: booked episodes (shard {settings.shard}); {conditions}")
    for name in ("task", "seed", "booked / planned", "SR %", "Score"):
        table.add_column(name, justify="left" if name == "task" else "right")
    total_b = total_p = 0
    succ = 0.0
    score = 0.0
    for task, seed, booked, planned, sr, sc in summary_rows(report):
        table.add_row(task, str(seed), f"{booked} / {planned}", "-" if sr is None else f"{sr:.1f}",
                      "-" if sc is None else f"{sc:.1f}")
        total_b += booked
        total_p += planned
        succ += (sr or 0.0) * booked / 100
        score += (sc or 0.0) * booked / 100
    if total_b:
        table.add_row("all", "", f"{total_b} / {total_p}", f"{succ / total_b * 100:.1f}",
                      f"{score / total_b * 100:.1f}")
    con = Console(file=out, width=120)
    con.print(table)
    for d in report.not_run:
        con.print(f"{'dropped' if d.dropped else 'not booked'}: {d.key}: {d.error}", highlight=False, soft_wrap=True)
    dropped = {d.key for d in report.not_run if d.dropped}
    left = [k for k in report.plan.keys if k not in report.booked and k not in dropped]
    if left:
        con.print(f"{len(left)} episode(s) not booked yet: run the same command again to run them.", soft_wrap=True)
    con.print(f"next: pyrua-dojo summarize {settings.out}   |   pyrua-dojo report {settings.out}", soft_wrap=True,
              highlight=False)


def _split(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"{what}: give a comma-separated list, got {text!r}")
    return items


def settings_from_args(args: Any) -> EvalSettings:
    """EvalSettings from the parsed `eval` command line; ValueError on bad input."""
    try:
        seeds = tuple(int(s) for s in _split(args.seeds, "--seeds"))
    except ValueError as exc:
        raise ValueError(f"--seeds takes integers like 0,1,2 ({exc})") from None
    return EvalSettings(
        tasks=tuple(_split(args.tasks, "--tasks")),
        seeds=seeds,
        episodes=args.episodes,
        workers=args.workers,
        shard=Shard.parse(args.shard) if args.shard else Shard(),
        out=Path(args.out),
        run_id=args.run_id,
        new_run=args.new_run,
        ckpt_name=args.ckpt_name,
        layouts=args.layouts,
        **run_options_from_args(args),
    )


def run_cli(args: Any, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`pyrua-dojo eval ...`: 0 when every planned episode is booked, 1 when some are not (yet), 2 on bad input,
    130 when interrupted."""
    out = out or sys.stdout
    err = err or sys.stderr
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args)
        from rich.console import Console

        report = run_eval(settings, console=Console(file=err))
    except ValueError as exc:
        print(f"pyrua-dojo eval: {exc}", file=err)
        return 2
    print_summary(report, settings, out)
    if report.interrupted:
        return 130
    return 0 if report.complete else 1
