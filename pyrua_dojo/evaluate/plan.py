"""What an eval runs: the settings of `pyrua-dojo eval`, its episodes (task, seed, layout), their shards,
and the run directories they are booked in (a new run id, or the latest one to resume).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pyrua_dojo.evaluate.run_options import RunOptions
from pyrua_dojo.harness.result_files import (
    BENCHMARK,
    RESULT_FILE,
    EpisodeResult,
    ResultWriter,
    RunLocation,
    additional_info,
    new_run_id,
)

__all__ = [
    "EVAL_FILE",
    "EpisodeKey",
    "EvalPlan",
    "EvalSettings",
    "Shard",
    "make_plan",
    "shard_of",
]

POLICY_NAME = "PyRUA_Dojo"
CONFIG_NAME = "arx_x5"
EVAL_FILE = "_eval.json"
IDENTITY_BEFORE = {"judging_card": False, "preset": None, "seg_noise": "none", "station": "exact"}
"""What an identity key added later means in an older `_eval.json` (runs made before the judging card, presets, mask
noise and the drawn station had none: the card off, no preset, oracle masks, the exact station)."""


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
        from pyrua_dojo.twin.tasks import get_twin_task

        if not self.tasks:
            raise ValueError("no tasks given (--tasks T1,T2)")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"a task is given twice: {list(self.tasks)}")
        for t in self.tasks:
            get_twin_task(t)  # ValueError naming the twin's tasks
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
    from pyrua_dojo.twin.tasks import get_twin_task

    n = get_twin_task(task).episodes_per_seed
    if layouts is not None:
        from pyrua_dojo.harness.eval_client import parse_layouts

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

    from pyrua_dojo.harness.result_files import RUN_ID_FORMAT

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
