"""The worker processes of an eval: each runs one episode at a time; a dead worker loses only its episode and is
replaced.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pyrua_dojo.evaluate.episode_run import EpisodeDone, run_episode
from pyrua_dojo.evaluate.plan import EpisodeKey, EvalSettings

log = logging.getLogger(__name__)

MAX_RESTARTS_PER_WORKER = 3


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
    """The parent's view of one worker process (mutable; owned by `WorkerPool`)."""

    ident: int
    process: Any
    jobs: Any
    current: EpisodeKey | None = None
    restarts: int = 0
    exited: bool = False


class WorkerPool:
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
