"""RoboDojo's result files: where they live, writing one episode at a time, and finding the runs summarize reads.

Layout (upstream `src/eval_client/eval_env.py`), under a root that is usually `eval_result/RoboDojo`:

    <task>/<policy_name>/<config_name>/<seed>_<additional_info>/<run_id>/_result.json

`_result.json` is JSON with indent 2: `success_rate` (0..1), `eval_time` (episodes), `score` (0..100) and `details`,
a map from the episode index (a string) to `{layout_id, success, score}` with the episode score in 0..1. RoboDojo
rewrites it (temp file, then rename) after every batch; `ResultWriter` does the same after every episode.

Our agent keeps one record per episode next to it, keyed by layout so the trace can be written while the episode
runs (the index is only known once the episode is booked):

    <run_id>/episodes/layout_0007/result.json      (AgentRecord; RoboDojo's own runs have none)

`scan_results` picks, for each (task, policy, config_name, seed), the run summarize_result.py reads: in every
`<seed>_*` directory the latest `<run_id>` holding a `_result.json` (names sort chronologically), and across
several `<seed>_*` directories for the same seed the one whose run id is greatest (the first in name order on a tie).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any
from pyrua_dojo.runtime.atomic_files import write_atomic

__all__ = [
    "AGENT_RECORD_FILE",
    "BENCHMARK",
    "EPISODES_DIR",
    "RESULT_FILE",
    "AgentRecord",
    "EpisodeResult",
    "ResultFileError",
    "ResultTree",
    "ResultWriter",
    "RunKey",
    "RunLocation",
    "RunResult",
    "additional_info",
    "agent_record_dir",
    "load_agent_records",
    "new_run_id",
    "read_agent_record",
    "read_result_file",
    "resolve_root",
    "scan_results",
    "write_agent_record",
]

BENCHMARK = "RoboDojo"
RESULT_FILE = "_result.json"
EPISODES_DIR = "episodes"
AGENT_RECORD_FILE = "result.json"
RUN_ID_FORMAT = "%Y-%m-%d_%H-%M-%S"
_SEED_RE = re.compile(r"^(\d+)_")
_LAYOUT_DIR_RE = re.compile(r"^layout_(\d+)$")


class ResultFileError(ValueError):
    """A result or agent record file that cannot be read as one; the message names the file and the problem."""


@dataclass(frozen=True)
class EpisodeResult:
    """One booked episode: RoboDojo's episode index, the layout it ran, success and the episode score (0..1)."""

    index: int
    layout_id: int | None
    success: bool
    score: float


@dataclass(frozen=True, order=True)
class RunKey:
    """What summarize groups by: one task run by one policy on one embodiment config at one layout seed."""

    task: str
    policy: str
    config_name: str
    seed: int


@dataclass(frozen=True)
class RunLocation:
    """Where one run lives: `root/task/policy/config_name/<seed>_<additional_info>/run_id`."""

    root: Path
    task: str
    policy: str
    config_name: str
    seed: int
    additional_info: str
    run_id: str

    def __post_init__(self) -> None:
        for name in ("task", "policy", "config_name", "run_id"):
            value = getattr(self, name)
            if not value or "/" in value or value in (".", ".."):
                raise ValueError(f"{name} must be a non-empty single path component, got {value!r}")
        if "/" in self.additional_info:
            raise ValueError(f"additional_info must not contain '/', got {self.additional_info!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")

    @property
    def key(self) -> RunKey:
        return RunKey(self.task, self.policy, self.config_name, self.seed)

    @property
    def path(self) -> Path:
        """The run directory (RoboDojo's `save_dir`)."""
        return (
            self.root / self.task / self.policy / self.config_name / f"{self.seed}_{self.additional_info}" / self.run_id
        )

    @property
    def result_path(self) -> Path:
        return self.path / RESULT_FILE

    @classmethod
    def from_path(cls, run_dir: Path | str) -> RunLocation:
        """Parse a run directory path (the one holding `_result.json`); raises ValueError if it is not one."""
        p = Path(run_dir)
        parts = p.parts
        if len(parts) < 6:
            raise ValueError(f"{p} is not <root>/<task>/<policy>/<config>/<seed>_<info>/<run_id>")
        task, policy, config_name, seed_dir, run_id = parts[-5:]
        m = _SEED_RE.match(seed_dir)
        if m is None:
            raise ValueError(f"{p}: {seed_dir!r} does not start with '<seed>_'")
        return cls(
            root=Path(*parts[:-5]),
            task=task,
            policy=policy,
            config_name=config_name,
            seed=int(m.group(1)),
            additional_info=seed_dir[m.end() :],
            run_id=run_id,
        )


@dataclass(frozen=True)
class RunResult:
    """One run's `_result.json`, episodes sorted by index; the header values are as written in the file."""

    location: RunLocation
    episodes: tuple[EpisodeResult, ...]
    success_rate: float
    eval_time: int
    score: float

    @property
    def key(self) -> RunKey:
        return self.location.key

    @property
    def successes(self) -> int:
        return sum(1 for e in self.episodes if e.success)

    def by_layout(self) -> dict[int, EpisodeResult]:
        """Episodes keyed by layout id (episodes without one are left out)."""
        return {e.layout_id: e for e in self.episodes if e.layout_id is not None}


def additional_info(ckpt_name: str, action_type: str) -> str:
    """The `<additional_info>` RoboDojo's eval script builds: `ckpt_name=<ckpt>,action_type=<type>`."""
    return f"ckpt_name={ckpt_name},action_type={action_type}"


def new_run_id(now: datetime | None = None) -> str:
    """A run id like RoboDojo's ROBODOJO_RUN_ID (`YYYY-mm-dd_HH-MM-SS`, local time)."""
    return (now or datetime.now()).strftime(RUN_ID_FORMAT)


# --------------------------------------------------------------------------------------------------- reading


def _load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def _parse_details(path: Path, data: Any) -> tuple[EpisodeResult, ...]:
    """Episodes from a parsed `_result.json`, read as summarize does (non-integer keys skipped, defaults)."""
    if not isinstance(data, dict):
        raise ResultFileError(f"{path}: expected a JSON object, got {type(data).__name__}")
    details = data.get("details", {})
    if not isinstance(details, dict):
        raise ResultFileError(f"{path}: 'details' must be an object, got {type(details).__name__}")
    episodes = []
    for key, entry in details.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            continue  # summarize ignores such keys too
        if not isinstance(entry, dict):
            raise ResultFileError(f"{path}: details[{key!r}] must be an object, got {type(entry).__name__}")
        try:
            score = float(entry.get("score", 0.0) or 0.0)
        except (TypeError, ValueError) as exc:
            raise ResultFileError(f"{path}: details[{key!r}].score is not a number: {entry.get('score')!r}") from exc
        layout = entry.get("layout_id")
        if layout is not None and (isinstance(layout, bool) or not isinstance(layout, int)):
            raise ResultFileError(f"{path}: details[{key!r}].layout_id must be an integer, got {layout!r}")
        episodes.append(EpisodeResult(index, layout, bool(entry.get("success", False)), score))
    episodes.sort(key=lambda e: e.index)
    return tuple(episodes)


def _header_number(data: Mapping[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def read_result_file(path: Path | str, location: RunLocation | None = None) -> RunResult:
    """Read one `_result.json`; `location` defaults to the one parsed from its path. Raises ResultFileError."""
    p = Path(path)
    data = _load_json(p)
    episodes = _parse_details(p, data)
    if location is None:
        try:
            location = RunLocation.from_path(p.parent)
        except ValueError as exc:
            raise ResultFileError(f"{p}: not inside a RoboDojo results tree ({exc})") from exc
    return RunResult(
        location=location,
        episodes=episodes,
        success_rate=_header_number(data, "success_rate", 0.0),
        eval_time=int(_header_number(data, "eval_time", len(episodes))),
        score=_header_number(data, "score", 0.0),
    )


def _subdirs(path: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(path) if e.is_dir())
    except OSError:
        return []


@dataclass(frozen=True)
class ResultTree:
    """The runs summarize would read under `root`, one per RunKey, plus what was skipped and why."""

    root: Path
    runs: Mapping[RunKey, RunResult]
    warnings: tuple[str, ...] = ()
    task_dirs: tuple[str, ...] = ()
    policy_seeds: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Seeds seen per policy in any non-`_random` task directory (summarize's `collect_policy_seeds`)."""

    def __iter__(self) -> Iterator[RunResult]:
        return iter(self.runs[k] for k in sorted(self.runs))

    def for_task(self, task: str) -> dict[RunKey, RunResult]:
        return {k: v for k, v in self.runs.items() if k.task == task}

    @property
    def policies(self) -> tuple[str, ...]:
        return tuple(sorted({k.policy for k in self.runs}))


def resolve_root(path: Path | str) -> Path:
    """The results root under `path`: `path` itself, or `path/RoboDojo`, or `path/eval_result/RoboDojo`.

    A directory is taken as the root when any of its subdirectories is a RoboDojo task name. Raises ValueError.
    """
    from pyrua_dojo.catalog import TASKS

    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"results directory not found: {p}")
    for candidate in (p, p / BENCHMARK, p / "eval_result" / BENCHMARK):
        if candidate.is_dir() and any(name in TASKS for name in _subdirs(candidate)):
            return candidate
    raise ValueError(
        f"no RoboDojo results under {p}: expected <task>/<policy>/<config>/<seed>_<info>/<run_id>/{RESULT_FILE} "
        f"there, or under {p}/{BENCHMARK} or {p}/eval_result/{BENCHMARK}"
    )


def scan_results(root: Path | str) -> ResultTree:
    """Find the latest run per (task, policy, config_name, seed) under a results root, as summarize does.

    A latest run whose `_result.json` cannot be read is skipped with a warning, like summarize (which does not
    fall back to an older run of that directory either).
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise ValueError(f"results directory not found: {root_path}")
    runs: dict[RunKey, RunResult] = {}
    chosen_seed_dir: dict[RunKey, str] = {}
    warnings: list[str] = []
    policy_seeds: dict[str, set[int]] = {}
    task_dirs = _subdirs(root_path)
    for task in task_dirs:
        for policy in _subdirs(root_path / task):
            for config_name in _subdirs(root_path / task / policy):
                emb = root_path / task / policy / config_name
                for seed_dir in _subdirs(emb):
                    m = _SEED_RE.match(seed_dir)
                    if m is None:
                        continue
                    seed = int(m.group(1))
                    if not task.endswith("_random"):
                        policy_seeds.setdefault(policy, set()).add(seed)
                    candidates = [r for r in _subdirs(emb / seed_dir) if (emb / seed_dir / r / RESULT_FILE).is_file()]
                    if not candidates:
                        continue
                    run_id = candidates[-1]
                    location = RunLocation(
                        root=root_path,
                        task=task,
                        policy=policy,
                        config_name=config_name,
                        seed=seed,
                        additional_info=seed_dir[m.end() :],
                        run_id=run_id,
                    )
                    try:
                        run = read_result_file(location.result_path, location)
                    except ResultFileError as exc:
                        warnings.append(f"skipped the latest run of {task}/{policy}/{config_name}/{seed_dir}: {exc}")
                        continue
                    key = location.key
                    previous = runs.get(key)
                    if previous is None:
                        runs[key] = run
                        chosen_seed_dir[key] = seed_dir
                        continue
                    if run_id > previous.location.run_id:
                        runs[key] = run
                        chosen_seed_dir[key] = seed_dir
                    warnings.append(
                        f"{task}/{policy}/{config_name}: seed {seed} has runs under more than one directory; "
                        f"using {chosen_seed_dir[key]}/{runs[key].location.run_id}"
                    )
    return ResultTree(
        root=root_path,
        runs=MappingProxyType(runs),
        warnings=tuple(warnings),
        task_dirs=tuple(task_dirs),
        policy_seeds=MappingProxyType({p: tuple(sorted(s)) for p, s in policy_seeds.items()}),
    )


# --------------------------------------------------------------------------------------------------- writing


def _validate_episode(layout_id: int, success: bool, score: float) -> None:
    if isinstance(layout_id, bool) or not isinstance(layout_id, int) or layout_id < 0:
        raise ValueError(f"layout_id must be a non-negative int, got {layout_id!r}")
    if not isinstance(success, bool):
        raise ValueError(f"success must be a bool, got {success!r}")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise ValueError(f"score must be a finite number, got {score!r}")
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score is the episode score in 0..1, got {score!r}")
    if success and score != 1.0:
        raise ValueError(f"a successful episode scores 1.0 (RoboDojo), got {score!r}")
    if not success and score >= 1.0:
        raise ValueError("a failed episode never gets the top score tier (score must be < 1.0)")


def _atomic_write_text(path: Path, text: str) -> None:
    write_atomic(path, text)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class _DirLock:
    """An exclusive flock on a directory: serialises writers of one run across threads and processes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> None:
        self._fd = os.open(self._path, os.O_RDONLY)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


class ResultWriter:
    """Books episodes into one run's `_result.json`, one at a time, as RoboDojo's eval client does per batch.

    Each `record` re-reads the file under a lock on the run directory, adds the episode under the next index,
    recomputes the header and replaces the file atomically, so concurrent workers of one run never lose an
    episode and an interrupted run resumes from what is on disk. A file it cannot read is never overwritten.
    """

    def __init__(self, location: RunLocation) -> None:
        self.location = location

    @property
    def path(self) -> Path:
        return self.location.result_path

    def episodes(self) -> tuple[EpisodeResult, ...]:
        """The episodes booked so far (empty before the first)."""
        if not self.path.exists():
            return ()
        return _parse_details(self.path, _load_json(self.path))

    def record(self, layout_id: int, success: bool, score: float) -> EpisodeResult:
        """Book one finished episode and return it with its index; raises ValueError on bad input or a layout
        booked twice, ResultFileError if the file on disk is unreadable (it is then left untouched)."""
        _validate_episode(layout_id, success, score)
        self.location.path.mkdir(parents=True, exist_ok=True)
        with _DirLock(self.location.path):
            data: dict[str, Any] = {"details": {}}
            if self.path.exists():
                data = _load_json(self.path)
                if not isinstance(data, dict) or not isinstance(data.get("details", {}), dict):
                    raise ResultFileError(f"{self.path}: not a RoboDojo result file; refusing to overwrite it")
            details: dict[str, Any] = dict(data.get("details", {}))
            existing = _parse_details(self.path, {"details": details})
            for episode in existing:
                if episode.layout_id == layout_id:
                    raise ValueError(
                        f"{self.path}: layout {layout_id} is already booked as episode {episode.index}"
                    )
            index = max((e.index for e in existing), default=-1) + 1
            details[str(index)] = {"layout_id": layout_id, "success": success, "score": float(score)}
            booked = _parse_details(self.path, {"details": details})
            n = len(booked)
            successes = sum(1 for e in booked if e.success)
            out = {
                "success_rate": successes / n,
                "eval_time": n,
                "score": sum(e.score for e in booked) / n * 100,
                "details": details,
            }
            _atomic_write_text(self.path, json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return EpisodeResult(index, layout_id, success, float(score))


# --------------------------------------------------------------------------------------------- agent records

_RECORD_FIELDS: Mapping[str, tuple[type, ...]] = MappingProxyType(
    {
        "task": (str,),
        "seed": (int,),
        "layout_id": (int,),
        "success": (bool,),
        "score": (int, float),
        "status": (str,),
        "llm_calls": (int,),
        "input_tokens": (int,),
        "cached_tokens": (int,),
        "output_tokens": (int,),
        "cost_usd": (int, float, type(None)),
        "steps_used": (int,),
        "step_limit": (int,),
        "wall_s": (int, float),
    }
)


@dataclass(frozen=True)
class AgentRecord:
    """Our agent's own account of one episode (`episodes/layout_<id>/result.json`); `cost_usd` is None when the
    model's price is unknown. Keys beyond the required ones are kept, read-only, in `extra`."""

    task: str
    seed: int
    layout_id: int
    success: bool
    score: float
    status: str
    llm_calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float | None
    steps_used: int
    step_limit: int
    wall_s: float
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False, compare=False)

    def __post_init__(self) -> None:
        problems = _record_problems(
            {name: getattr(self, name) for name in _RECORD_FIELDS}, require_all=True
        )
        if problems:
            raise ValueError("invalid agent record: " + "; ".join(problems))

    @classmethod
    def from_json(cls, data: Any, source: str = "agent record") -> AgentRecord:
        """Build from a parsed `result.json`; raises ResultFileError naming every missing or mistyped field."""
        if not isinstance(data, dict):
            raise ResultFileError(f"{source}: expected a JSON object, got {type(data).__name__}")
        problems = _record_problems(data, require_all=True)
        if problems:
            raise ResultFileError(f"{source}: " + "; ".join(problems))
        values = {name: data[name] for name in _RECORD_FIELDS}
        values["score"] = float(values["score"])
        values["wall_s"] = float(values["wall_s"])
        if values["cost_usd"] is not None:
            values["cost_usd"] = float(values["cost_usd"])
        extra = {k: v for k, v in data.items() if k not in _RECORD_FIELDS}
        return cls(**values, extra=MappingProxyType(extra))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out.update({name: getattr(self, name) for name in _RECORD_FIELDS})
        return out


def _record_problems(data: Mapping[str, Any], *, require_all: bool) -> list[str]:
    problems = []
    for name, types in _RECORD_FIELDS.items():
        if name not in data:
            if require_all:
                problems.append(f"missing {name!r}")
            continue
        value = data[name]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
            ok = math.isfinite(value) and value >= 0 and (name != "score" or value <= 1)
        if not ok:
            problems.append(f"{name!r} has an invalid value {value!r}")
    return problems


def agent_record_dir(run_dir: Path | str, layout_id: int) -> Path:
    """The agent's episode directory inside a run directory: `<run_dir>/episodes/layout_0007`."""
    if isinstance(layout_id, bool) or not isinstance(layout_id, int) or layout_id < 0:
        raise ValueError(f"layout_id must be a non-negative int, got {layout_id!r}")
    return Path(run_dir) / EPISODES_DIR / f"layout_{layout_id:04d}"


def write_agent_record(run_dir: Path | str, record: AgentRecord) -> Path:
    """Write `record` atomically to its place in `run_dir`; returns the file's path."""
    directory = agent_record_dir(run_dir, record.layout_id)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / AGENT_RECORD_FILE
    _atomic_write_text(path, json.dumps(record.to_json(), indent=2, ensure_ascii=False) + "\n")
    return path


def read_agent_record(path: Path | str) -> AgentRecord | None:
    """Read an agent record (a `result.json` or the directory holding it); None when there is none."""
    p = Path(path)
    if p.is_dir():
        p = p / AGENT_RECORD_FILE
    if not p.exists():
        return None
    return AgentRecord.from_json(_load_json(p), source=str(p))


def load_agent_records(run: RunResult) -> tuple[dict[int, AgentRecord], tuple[str, ...]]:
    """The agent records of a run's booked episodes, keyed by layout id, and warnings.

    Missing records are simply absent (RoboDojo's own runs have none). A record that is unreadable, or that names
    another task, seed or layout, is left out with a warning; one whose success differs from RoboDojo's booking is
    kept (RoboDojo's booking counts) with a warning.
    """
    records: dict[int, AgentRecord] = {}
    warnings: list[str] = []
    where = f"{run.key.task}/{run.key.policy}/seed {run.key.seed}"
    for episode in run.episodes:
        if episode.layout_id is None:
            continue
        try:
            record = read_agent_record(agent_record_dir(run.location.path, episode.layout_id))
        except ResultFileError as exc:
            warnings.append(f"{where}: agent record ignored: {exc}")
            continue
        if record is None:
            continue
        if (record.task, record.seed, record.layout_id) != (run.key.task, run.key.seed, episode.layout_id):
            warnings.append(
                f"{where}: agent record for layout {episode.layout_id} names task {record.task!r}, seed "
                f"{record.seed}, layout {record.layout_id}; ignored"
            )
            continue
        if record.success != episode.success:
            warnings.append(
                f"{where}: layout {episode.layout_id}: agent record says success={record.success}, RoboDojo booked "
                f"success={episode.success}"
            )
        records[episode.layout_id] = record
    return records, tuple(warnings)
