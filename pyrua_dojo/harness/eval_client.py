"""The twin as RoboDojo's eval client: run a task's layouts against a running XPolicyLab policy server.

What RoboDojo's `src/eval_client/main.py` + `eval_env.py` do, with the MuJoCo twin as the simulator:

- one websocket `ModelClient` for the whole run, with RoboDojo's ids (`evaluation_id` = run id, `trial_id` =
  `<task>-<run_id>`, `action_case_id` = `<task>_case`) and XPolicyLab's client defaults (120 s request timeout);
- layouts in batches of `num_envs` (1 unless the policy's deploy.yml says `eval_batch: true`; `_random` tasks at
  most 5); per batch: reset the env (an all-unstable batch is skipped, unstable envs are not counted), send the
  env's `reset` to the policy, then call the policy's own `deploy.eval_one_episode(TASK_ENV, model_client)` (or
  `eval_one_episode_batch`; XPolicyLab's reference loop when no policy directory is given) with a `TaskEnvView`;
- book every env of the batch in env order into `_result.json` through `ResultWriter` (RoboDojo's layout and
  format), and with `videos` one mp4 per camera per episode under RoboDojo's names.

Where the twin differs from RoboDojo, on purpose (all of it reported in `<run_dir>/_errors.json`, a sidecar
RoboDojo does not have):
- an exception during an episode (an error frame from the policy, a timeout, a dropped connection, an action
  that fails validation, anything else raised in deploy.py) makes RoboDojo print it and move on: that layout is
  neither scored nor retried, and every env of the batch is lost. The twin books each env that had not ended as
  failed (score = the process tier reached so far), and each env that had already ended with its real outcome;
  `on_error="skip"` leaves errored episodes out of `_result.json` as RoboDojo does;
- a deploy.py that returns while an env is still running: RoboDojo books that env as a **success** (its
  `success` flag starts True and only an end check clears it); the twin books it as failed, kind "unfinished".
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pyrua_dojo.harness.result_files import BENCHMARK, ResultWriter, RunLocation, additional_info, new_run_id
from pyrua_dojo.harness import reference_loop
from pyrua_dojo.twin.env import EpisodeOutcome, TwinConfig, TwinEnv, UnstableLayoutError
from pyrua_dojo.harness.policydir import PolicyDir
from pyrua_dojo.twin.station_draw import STATION_MODES, StationSpread
from pyrua_dojo.harness.taskenv import EnvAccessError, TaskEnvView, ViewState
from pyrua_dojo.twin.tasks import get_twin_task
from pyrua_dojo.harness.videos import EpisodeVideos, check_video_support
from pyrua_dojo.wire import ErrorCode, ModelClient, WireError
from pyrua_dojo.runtime.atomic_files import write_atomic

__all__ = [
    "CONFIG_NAME",
    "ERRORS_FILE",
    "ClientReport",
    "ClientSettings",
    "EpisodeReport",
    "PolicyError",
    "TwinEvalClient",
    "classify_error",
    "parse_layouts",
]

log = logging.getLogger(__name__)

ERRORS_FILE = "_errors.json"
RANDOM_ENV_LIMIT = 5  # RoboDojo's sim.scene.clutter_env_limit for `_random` tasks
DEFAULT_NUM_ENVS = 10  # RoboDojo's sim_config.yml scene.num_envs
CONFIG_NAME = "arx_x5"  # the station's config_name: RoboDojo's results path segment (arx_x5_depth keeps it too)

ErrorKind = Literal[
    "policy_error", "timeout", "connection", "invalid_action", "env_access", "deploy_error", "unfinished", "aborted"
]


def parse_layouts(spec: str | None, episodes_per_seed: int) -> tuple[int, ...]:
    """Layout ids from "all" / None (0..episodes_per_seed-1), "7", "0-9" or "0,3,5-7"; ValueError on anything else."""
    if spec is None or spec.strip().lower() == "all":
        return tuple(range(episodes_per_seed))
    ids: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None:
            raise ValueError(f"layouts: {part!r} is not N or N-M (e.g. 0-9 or 0,3,5-7)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"layouts: {part!r} runs backwards")
        ids.extend(range(lo, hi + 1))
    bad = [i for i in ids if i >= episodes_per_seed]
    if bad:
        raise ValueError(f"layouts {bad} out of range: this task has layouts 0..{episodes_per_seed - 1} per seed")
    if len(set(ids)) != len(ids):
        raise ValueError(f"layouts: {spec!r} names a layout twice")
    return tuple(ids)


@dataclass(frozen=True)
class PolicyError:
    """Why an episode ended without its own end: what kind of failure, the exception, where, its traceback."""

    kind: ErrorKind
    error_type: str
    message: str
    where: str
    traceback: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "error_type": self.error_type,
            "message": self.message,
            "where": self.where,
            "traceback": self.traceback,
        }


def classify_error(exc: BaseException, *, where: str, invalid_action: BaseException | None = None) -> PolicyError:
    """Sort an exception raised while an episode ran into the kinds the run reports."""
    kind: ErrorKind
    if invalid_action is not None and exc is invalid_action:
        kind = "invalid_action"
    elif isinstance(exc, EnvAccessError):
        kind = "env_access"
    elif isinstance(exc, WireError):
        if exc.code is ErrorCode.TIMEOUT:
            kind = "timeout"
        elif exc.code is ErrorCode.INTERNAL and "connection" in exc.message:
            kind = "connection"
        else:
            kind = "policy_error"
    elif isinstance(exc, (ConnectionError, OSError)):
        kind = "connection"
    else:
        kind = "deploy_error"
    message = str(exc)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return PolicyError(kind, type(exc).__name__, message, where, tb)


@dataclass(frozen=True)
class ClientSettings:
    """One `twin client` run. Defaults follow RoboDojo's eval client and XPolicyLab's websocket client."""

    url: str
    task: str
    seed: int
    layouts: tuple[int, ...]
    policy_dir: Path | None = None
    policy_name: str | None = None  # default: the policy directory's name, else "policy"
    ckpt_name: str = "twin"
    action_type: str = "joint"
    env_cfg: str = "arx_x5"  # RoboDojo's env config name (the server's env_cfg_type; arx_x5_depth with depth)
    results: Path = Path("eval_result")  # RoboDojo writes eval_result/RoboDojo/<task>/...
    run_id: str | None = None  # default: a new ROBODOJO_RUN_ID-style timestamp
    videos: bool = False
    depth: bool = False  # float depth + camera matrices in the observation (RoboDojo's depth env config)
    segmentation: bool = False  # keep the twin's instance masks (for a twin segmentation server)
    station: str = "exact"  # "unknown": each layout's true station drawn around the defaults (twin/station_draw.py)
    eval_batch: bool | None = None  # None: from deploy.yml (false without a policy directory)
    num_envs: int = DEFAULT_NUM_ENVS  # parallel envs when eval_batch is on
    on_error: Literal["book", "skip"] = "book"
    dispatch: Literal["infer", "call"] = "infer"  # XPolicyLab 7198143 ("infer") or newer clients ("call")
    request_timeout_s: float = 120.0
    connect_timeout_s: float = 30.0
    max_connect_attempts: int = 10
    connect_retry_delay_s: float = 5.0

    def __post_init__(self) -> None:
        spec = get_twin_task(self.task)  # ValueError naming the known tasks
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if not self.layouts:
            raise ValueError("no layouts to run")
        bad = [i for i in self.layouts if not 0 <= i < spec.episodes_per_seed]
        if bad:
            raise ValueError(f"layouts {bad} out of range: {self.task} has layouts 0..{spec.episodes_per_seed - 1}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if self.station not in STATION_MODES:
            raise ValueError(f"station must be one of {STATION_MODES}, got {self.station!r}")
        if self.on_error not in ("book", "skip"):
            raise ValueError(f"on_error must be 'book' or 'skip', got {self.on_error!r}")
        if self.action_type not in ("joint", "ee"):
            raise ValueError(f"action_type must be joint or ee, got {self.action_type!r}")
        for name in ("ckpt_name", "env_cfg"):
            value = getattr(self, name)
            if not value or "/" in value:
                raise ValueError(f"{name} must be a non-empty name without '/', got {value!r}")


@dataclass(frozen=True)
class EpisodeReport:
    """One layout of the run: the twin's measured outcome, how it was booked, and the policy's error if any."""

    layout_id: int
    env_idx: int
    index: int | None  # RoboDojo's episode index in _result.json; None when not booked
    success: bool
    score: float
    steps: int
    step_limit: int
    failure: str | None  # the twin's reason ("step limit", "query violated: ..."), None otherwise
    error: PolicyError | None = None
    blocked_attributes: tuple[str, ...] = ()
    videos: tuple[Path, ...] = ()

    @property
    def booked(self) -> bool:
        return self.index is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "layout_id": self.layout_id,
            "env_idx": self.env_idx,
            "index": self.index,
            "success": self.success,
            "score": self.score,
            "steps": self.steps,
            "step_limit": self.step_limit,
            "failure": self.failure,
        }
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.blocked_attributes:
            out["blocked_attributes"] = list(self.blocked_attributes)
        return out


@dataclass(frozen=True)
class ClientReport:
    """A finished run: where its results are and what happened to each layout."""

    location: RunLocation
    episodes: tuple[EpisodeReport, ...]
    skipped: tuple[tuple[int, str], ...] = ()  # (layout_id, why): unstable or already booked
    errors_path: Path | None = None

    @property
    def result_path(self) -> Path:
        return self.location.result_path

    @property
    def booked(self) -> tuple[EpisodeReport, ...]:
        return tuple(e for e in self.episodes if e.booked)

    @property
    def successes(self) -> int:
        return sum(1 for e in self.booked if e.success)

    @property
    def errors(self) -> tuple[EpisodeReport, ...]:
        return tuple(e for e in self.episodes if e.error is not None)


@dataclass
class _Batch:
    """One batch's bookkeeping (mutable, local to TwinEvalClient.run)."""

    layouts: list[int]
    error: PolicyError | None = None
    view: ViewState | None = None
    reports: list[EpisodeReport] = field(default_factory=list)


class TwinEvalClient:
    """Runs `ClientSettings` against a policy server (see module docstring). One run per instance."""

    def __init__(self, settings: ClientSettings, *, echo: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self._echo = echo or (lambda line: print(line, flush=True))
        self.policy = PolicyDir.load(settings.policy_dir) if settings.policy_dir is not None else None
        task = get_twin_task(settings.task)
        batch = settings.eval_batch if settings.eval_batch is not None else (
            self.policy.eval_batch if self.policy is not None else False
        )
        self.eval_batch = bool(batch)
        n = settings.num_envs if self.eval_batch else 1
        if settings.task.endswith("_random"):
            n = min(n, RANDOM_ENV_LIMIT)
        self.num_envs = max(1, min(n, len(settings.layouts)))
        if self.policy is not None:
            self.deploy = self.policy.deploy_function(self.eval_batch)
        else:
            self.deploy = reference_loop.eval_one_episode_batch if self.eval_batch else reference_loop.eval_one_episode
        self.policy_name = settings.policy_name or (self.policy.name if self.policy is not None else "policy")
        self.run_id = settings.run_id or os.environ.get("ROBODOJO_RUN_ID") or new_run_id()  # as RoboDojo's main.py
        self.location = RunLocation(
            root=Path(settings.results) / BENCHMARK,
            task=task.name,
            policy=self.policy_name,
            config_name=CONFIG_NAME,
            seed=settings.seed,
            additional_info=additional_info(settings.ckpt_name, settings.action_type),
            run_id=self.run_id,
        )
        self.writer = ResultWriter(self.location)

    @property
    def run_dir(self) -> Path:
        return self.location.path

    # ---------------------------------------------------------------------------------------------- the run

    def run(
        self,
        *,
        on_reset: Callable[[TwinEnv], None] | None = None,
        stop_check: Callable[[], str | None] | None = None,
    ) -> ClientReport:
        """Run every layout; returns the report. Raises only for setup failures (no connection, bad files).

        on_reset: called after every env reset (e.g. to point a twin segmentation server at the new scene).
        stop_check: called before every batch; a non-None reason (e.g. "the policy server exited") books the
            remaining layouts as failed with kind "aborted" instead of trying them.
        """
        s = self.settings
        client = ModelClient(  # connects now (with retries), as RoboDojo's EvalEnv does when it is built
            s.url,
            evaluation_id=self.run_id,
            trial_id=f"{s.task}-{self.run_id}",
            action_case_id=f"{s.task}_case",
            repeat_index=None,
            dispatch=s.dispatch,
            connect_timeout_s=s.connect_timeout_s,
            request_timeout_s=s.request_timeout_s,
            max_connect_attempts=s.max_connect_attempts,
            connect_retry_delay_s=s.connect_retry_delay_s,
        )
        reports: list[EpisodeReport] = []
        unstable: list[tuple[int, str]] = []
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if s.videos:
                check_video_support(self.run_dir)
            booked_before = {e.layout_id for e in self.writer.episodes()}
            pending = [lid for lid in s.layouts if lid not in booked_before]
            already = [(lid, "already booked in this run") for lid in s.layouts if lid in booked_before]
            self._echo(
                f"twin client: {s.task} seed {s.seed}, {len(pending)} layout(s), policy {self.policy_name} at "
                f"{s.url}, {'batch of ' + str(self.num_envs) if self.eval_batch else 'one env'}; results in "
                f"{self.run_dir}"
            )
            config = TwinConfig(
                num_envs=self.num_envs,
                depth=s.depth,
                intrinsic_matrix=s.depth,
                extrinsic_matrix=s.depth,
                segmentation=s.segmentation,
                station_spread=StationSpread() if s.station == "unknown" else None,
            )
            with TwinEnv(config) as env:
                for start in range(0, len(pending), self.num_envs):
                    ids = pending[start : start + self.num_envs]
                    reason = stop_check() if stop_check is not None else None
                    if reason is not None:
                        reports += [self._book_aborted(lid, reason) for lid in pending[start:]]
                        self._write_errors(reports, unstable)
                        break
                    batch_reports, batch_unstable = self._run_batch(env, client, ids, on_reset)
                    reports += batch_reports
                    unstable += batch_unstable
                    self._write_errors(reports, unstable)
        finally:
            client.close()
        skipped = already + unstable
        errors_path = self.run_dir / ERRORS_FILE
        sidecar = errors_path if errors_path.exists() else None
        report = ClientReport(self.location, tuple(reports), tuple(skipped), sidecar)
        booked = report.booked
        self._echo(
            f"twin client: {report.successes}/{len(booked)} succeeded, "
            f"{len(report.errors)} with policy errors; {self.location.result_path}"
            + (f" (errors: {report.errors_path})" if report.errors_path is not None else "")
        )
        return report

    def _run_batch(
        self,
        env: TwinEnv,
        client: ModelClient,
        ids: list[int],
        on_reset: Callable[[TwinEnv], None] | None,
    ) -> tuple[list[EpisodeReport], list[tuple[int, str]]]:
        s = self.settings
        try:
            env.reset(s.task, s.seed, ids)
        except UnstableLayoutError as exc:
            self._echo(f"  layouts {ids}: unstable, skipped as RoboDojo skips them ({exc})")
            return [], [(lid, "unstable layout") for lid in ids]
        if on_reset is not None:
            on_reset(env)
        live = [i for i in range(len(ids)) if not env.truth(i).outcome().unstable]
        skipped = [(ids[i], "unstable layout") for i in range(len(ids)) if i not in live]
        videos = EpisodeVideos(self.run_dir) if s.videos else None
        state = ViewState(env, videos)
        error: PolicyError | None = None
        try:
            client.call("reset")  # EvalEnv.reset's call, before deploy.py's own reset
        except Exception as exc:  # noqa: BLE001 - reported per episode, the run goes on
            error = classify_error(exc, where="reset")
        if error is None:
            try:
                self.deploy(TASK_ENV=TaskEnvView(state), model_client=client)
            except Exception as exc:  # noqa: BLE001 - reported per episode, the run goes on
                error = classify_error(exc, where="deploy", invalid_action=state.invalid_action)
                if error.kind == "invalid_action" and state.invalid_where:
                    error = replace(error, where=state.invalid_where)
        reports = [self._book(env, i, ids[i], error, state, videos) for i in live]
        if videos is not None:
            videos.abort()
        return reports, skipped

    def _book(
        self,
        env: TwinEnv,
        env_idx: int,
        layout_id: int,
        error: PolicyError | None,
        state: ViewState,
        videos: EpisodeVideos | None,
    ) -> EpisodeReport:
        outcome: EpisodeOutcome = env.truth(env_idx).outcome()
        episode_error = None
        if not outcome.finished:
            episode_error = error or PolicyError(
                "unfinished",
                "EpisodeNotFinished",
                f"deploy.py returned after {outcome.steps} of {outcome.step_limit} steps while the episode was still "
                "running (RoboDojo would book it as a success: its success flag starts True)",
                "deploy",
            )
        blocked = tuple(dict.fromkeys(state.blocked))
        index: int | None = None
        saved: tuple[Path, ...] = ()
        success = outcome.success and outcome.finished
        score = 1.0 if success else outcome.process_score / 100.0  # the tier reached; the top one needs success
        if episode_error is None or self.settings.on_error == "book":
            index = self.writer.record(layout_id, success, float(score)).index
            if videos is not None:
                saved = videos.save(env_idx, index, success)
        elif videos is not None:
            videos.abort(env_idx)
        report = EpisodeReport(
            layout_id=layout_id,
            env_idx=env_idx,
            index=index,
            success=success,
            score=float(score),
            steps=outcome.steps,
            step_limit=outcome.step_limit,
            failure=outcome.failure,
            error=episode_error,
            blocked_attributes=blocked,
            videos=saved,
        )
        self._echo(_describe(report))
        return report

    def _book_aborted(self, layout_id: int, reason: str) -> EpisodeReport:
        error = PolicyError("aborted", "RunAborted", reason, "before reset")
        index = self.writer.record(layout_id, False, 0.0).index if self.settings.on_error == "book" else None
        limit = get_twin_task(self.settings.task).step_limit
        report = EpisodeReport(layout_id, 0, index, False, 0.0, 0, limit, None, error)
        self._echo(_describe(report))
        return report

    # ---------------------------------------------------------------------------------------------- sidecar

    def _write_errors(self, reports: Sequence[EpisodeReport], skipped: Sequence[tuple[int, str]]) -> None:
        """`_errors.json` next to `_result.json`: every episode with an error or a blocked env access, and the
        layouts not booked; merged with what an earlier invocation of the same run wrote."""
        path = self.run_dir / ERRORS_FILE
        noted = [r for r in reports if r.error is not None or r.blocked_attributes]
        if not noted and not skipped and not path.exists():
            return
        fd = os.open(self.run_dir, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # other processes may book into the same run (pyrua-dojo eval workers)
            self._merge_errors(path, reports, noted, skipped)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @staticmethod
    def _merge_errors(
        path: Path,
        reports: Sequence[EpisodeReport],
        noted: Sequence[EpisodeReport],
        skipped: Sequence[tuple[int, str]],
    ) -> None:
        data: dict[str, Any] = {"episodes": [], "not_booked": []}
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(old, dict):
                    data["episodes"] = [e for e in old.get("episodes", []) if isinstance(e, dict)]
                    data["not_booked"] = [e for e in old.get("not_booked", []) if isinstance(e, dict)]
            except (OSError, json.JSONDecodeError) as exc:
                raise RuntimeError(f"{path}: unreadable error sidecar ({exc}); not overwriting it") from exc
        mine = {r.layout_id for r in reports}
        data["episodes"] = [e for e in data["episodes"] if e.get("layout_id") not in mine]
        data["episodes"] += [r.to_json() for r in noted]
        data["episodes"].sort(key=lambda e: (e.get("index") is None, e.get("index") or 0, e.get("layout_id", 0)))
        seen = {(e.get("layout_id"), e.get("reason")) for e in data["not_booked"]}
        for lid, why in skipped:
            if (lid, why) not in seen:
                data["not_booked"].append({"layout_id": lid, "reason": why})
        for r in reports:
            if not r.booked and r.error is not None and (r.layout_id, r.error.kind) not in seen:
                data["not_booked"].append({"layout_id": r.layout_id, "reason": r.error.kind})
        data["note"] = (
            "pyrua-dojo twin client: episodes that ended with a policy error (booked as failed in _result.json "
            "unless the run used on_error=skip), env attributes a deploy.py reached for, and layouts not booked. "
            "RoboDojo writes no such file: it skips an errored layout without booking it."
        )
        write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _describe(r: EpisodeReport) -> str:
    head = f"  layout {r.layout_id}"
    if r.index is not None:
        head += f" (episode {r.index})"
    if r.error is not None:
        booked = "failed" if r.booked else "not booked"
        return (
            f"{head}: {booked} after {r.steps}/{r.step_limit} steps - {r.error.kind}: {r.error.error_type}: "
            f"{r.error.message.splitlines()[0] if r.error.message else ''}"
        )
    verdict = "success" if r.success else f"fail ({r.failure})"
    extra = f"; blocked env access: {', '.join(r.blocked_attributes)}" if r.blocked_attributes else ""
    return f"{head}: {verdict}, score {r.score:.2f}, {r.steps}/{r.step_limit} steps{extra}"
