"""`pyrua-dojo play`: one twin episode of our agent, driven through the wire protocol exactly as RoboDojo drives it.

In one process: our `Model` (configured from the plugin's deploy.yml, XPolicyLab's overrides and the command's
options) behind a `PolicyServer` thread on a free port; the twin client with the plugin's own deploy.py on the env
side; with `segmentation="twin"` a segmentation server answering from the twin's instance masks of the current
scene. After the episode the Model is reset (its trace is finished), the agent's run directory moves next to
RoboDojo's `_result.json` (`episodes/layout_NNNN/`) with its agent record, and the outcome is printed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from pyrua_dojo.evaluate.run_options import PLANNERS, RunOptions, run_options_from_args

__all__ = ["PlayOptions", "PlayResult", "play", "run_cli"]

log = logging.getLogger(__name__)

POLICY_NAME = "PyRUA_Dojo"


@dataclass(frozen=True)
class PlayOptions(RunOptions):
    """One `play` episode: the task, seed and layout, where results go, and the options `eval` shares
    (RunOptions)."""

    planners: ClassVar[tuple[str, ...]] = (*PLANNERS, "console")

    task: str
    seed: int = 0
    layout: int = 0
    results: Path = Path("eval_result")
    run_root: Path | None = None  # None: a fresh temporary directory
    ckpt_name: str = "play"
    run_id: str | None = None
    policy_dir: Path | None = None  # default: the packaged plugin (submission/PyRUA_Dojo)

    def __post_init__(self) -> None:
        from pyrua_dojo.twin.tasks import get_twin_task

        get_twin_task(self.task)  # ValueError naming the twin's tasks
        super().__post_init__()


@dataclass(frozen=True)
class PlayResult:
    """What happened: the twin's verdict, where RoboDojo's result file and the agent's run directory are."""

    success: bool
    score: float
    steps: int
    step_limit: int
    failure: str | None
    error: str | None  # a policy error that ended the episode early (see _errors.json)
    result_path: Path
    agent_dir: Path | None  # <run_id>/episodes/layout_NNNN (None if the Model started no episode)
    videos: tuple[Path, ...] = field(default_factory=tuple)


def _model_cfg(options: PlayOptions, policy: Any, segmentation_url: str | None, run_root: Path,
               relay_url: str | None = None) -> dict[str, Any]:
    from pyrua_dojo.harness.policydir import merge_overrides, robodojo_overrides

    cfg = policy.model_cfg(
        robodojo_overrides(
            port=0, task=options.task, seed=options.seed, policy_name=policy.name, ckpt_name=options.ckpt_name,
            action_type="joint", env_cfg_type="arx_x5_depth" if options.depth else "arx_x5", host="127.0.0.1",
        )
    )
    cfg.update(options.policy_settings(), segmentation_url=segmentation_url, run_root=str(run_root))
    if relay_url is not None:
        from pyrua_dojo.relay.planners import relay_model_cfg

        cfg.update(relay_model_cfg(relay_url, options.answer_timeout_s))
    return merge_overrides(cfg, options.overrides)


def play(options: PlayOptions, *, echo: Any = None) -> PlayResult:
    """Run the episode (see module docstring). Raises ValueError for bad options, RuntimeError if it cannot run."""
    from pyrua_dojo.plugin.model import Model
    from pyrua_dojo.harness.eval_client import ClientSettings, TwinEvalClient
    from pyrua_dojo.harness.policydir import PolicyDir
    from pyrua_dojo.wire import PolicyServer

    say = echo or (lambda line: print(line, flush=True))
    if options.policy_dir is not None:
        policy = PolicyDir.load(options.policy_dir)
    else:
        from submission.install import plugin_dir

        policy = PolicyDir.load(plugin_dir())
    run_root = Path(options.run_root) if options.run_root else Path(tempfile.mkdtemp(prefix="pyrua-play-"))
    oracle = None
    seg_server = None
    if options.segmentation == "twin":
        from pyrua_dojo.harness.scene_oracle import start_twin_segmentation

        seg_server, oracle = start_twin_segmentation(noise=options.seg_noise, seed=options.seed)
        seg_url: str | None = seg_server.url
    else:
        seg_url = None if options.segmentation == "none" else options.segmentation
    relay = None
    if options.planner in ("relay", "console"):
        from pyrua_dojo.relay.planners import start_relay

        relay = start_relay(options, run_root)
    try:
        settings = ClientSettings(
            url="ws://127.0.0.1:0",  # replaced by the server's once it listens
            task=options.task,
            seed=options.seed,
            layouts=(options.layout,),
            policy_dir=policy.path,
            policy_name=POLICY_NAME,
            ckpt_name=options.ckpt_name,
            action_type="joint",
            env_cfg="arx_x5_depth" if options.depth else "arx_x5",
            results=Path(options.results),
            run_id=options.run_id,
            videos=options.videos,
            depth=options.depth,
            segmentation=oracle is not None,
            station=options.station,
            eval_batch=False,
            request_timeout_s=options.request_timeout_s if relay is None
            else max(options.request_timeout_s, options.answer_timeout_s + 900.0),  # the twin waits while one thinks
        )
        model = Model(_model_cfg(options, policy, seg_url, run_root, None if relay is None else relay.url))
        started = time.time()
        try:
            server = PolicyServer(model, host="127.0.0.1", port=0, name="pyrua_dojo_play").start_background()
            try:
                client = TwinEvalClient(replace(settings, url=server.url), echo=say)
                report = client.run(on_reset=oracle.follow if oracle is not None else None)
            finally:
                server.shutdown(timeout_s=30.0)
        finally:
            model.reset()  # finish the episode's trace before its directory moves
            model.close()
    except BaseException as exc:
        if relay is not None:
            relay.end({"status": "error", "detail": f"the episode could not run: {type(exc).__name__}: {exc}"})
        raise
    finally:
        if seg_server is not None:
            seg_server.close()
    try:
        return _conclude(options, report, run_root, started, relay)
    except BaseException as exc:
        if relay is not None:  # idempotent: after a recorded outcome this changes nothing
            relay.end({"status": "error", "detail": f"{type(exc).__name__}: {exc}"})
        raise


def _conclude(options: PlayOptions, report: Any, run_root: Path, started: float, relay: Any) -> PlayResult:
    """File the agent's run directory next to RoboDojo's result, tell the relay how it ended, build the result."""
    from pyrua_dojo.harness.agent_record import attach_agent_run, find_agent_run

    if not report.episodes:
        reasons = "; ".join(f"layout {lid}: {why}" for lid, why in report.skipped) or "nothing ran"
        raise RuntimeError(f"the episode did not run ({reasons})")
    episode = report.episodes[0]
    agent_dir = None
    agent_run = find_agent_run(run_root, env_idx=0, task=options.task, since=started - 1.0)
    if agent_run is not None and episode.booked:
        agent_dir = attach_agent_run(
            report.location.path, agent_run, task=options.task, seed=options.seed, layout_id=options.layout,
            success=episode.success, score=episode.score, steps=episode.steps, step_limit=episode.step_limit,
            conditions=twin_conditions(options),
        )
    elif agent_run is not None:
        agent_dir = agent_run
    err = episode.error
    error = None if err is None else f"{err.kind}: {err.error_type}: {err.message}"
    if relay is not None:
        from pyrua_dojo.relay.planners import end_relay

        end_relay(relay, agent_dir, success=episode.success, score=episode.score, steps=episode.steps,
                  step_limit=episode.step_limit, failure=episode.failure, error=error)
    return PlayResult(
        success=episode.success,
        score=episode.score,
        steps=episode.steps,
        step_limit=episode.step_limit,
        failure=episode.failure,
        error=error,
        result_path=report.result_path,
        agent_dir=agent_dir,
        videos=episode.videos,
    )


def twin_conditions(options: PlayOptions) -> dict[str, str]:
    """How far the twin was from an oracle in this episode (recorded in the agent record as `twin`)."""
    seg = options.segmentation if options.segmentation in ("twin", "none") else "url"
    return {"segmentation": seg, "seg_noise": options.seg_noise if seg == "twin" else "n/a",
            "station": options.station}


def conditions_line(segmentation: str, seg_noise: str, station: str) -> str:
    """The words every run prints first: which masks and which station the figures were measured with."""
    seg = segmentation if segmentation in ("twin", "none") else "url"
    masks = f"twin masks, noise {seg_noise}" if seg == "twin" else ("no segmentation" if seg == "none" else
                                                                    f"segmentation at {segmentation}")
    return f"{masks}; station {station}"


def run_cli(args: argparse.Namespace) -> int:
    """The `pyrua-dojo play` command: 0 when the episode ran, 1 when a policy error ended it, 2 for bad options."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        options = PlayOptions(
            task=args.task,
            seed=args.seed,
            layout=args.layout,
            results=Path(args.results),
            run_root=Path(args.run_root) if args.run_root else None,
            **run_options_from_args(args),
        )
        print(f"play: {options.task} seed {options.seed} layout {options.layout}; "
              f"{conditions_line(options.segmentation, options.seg_noise, options.station)}", flush=True)
        if options.planner == "console":
            from pyrua_dojo.relay.planners import play_console

            result = play_console(options, play)
        else:
            result = play(options)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"play: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, ConnectionError, OSError) as exc:
        print(f"play: {exc}", file=sys.stderr)
        return 1
    print(_describe(options, result))
    return 1 if result.error else 0


def _describe(options: PlayOptions, r: PlayResult) -> str:
    verdict = "success" if r.success else f"fail ({r.error or r.failure})"
    lines = [
        f"play: {options.task} seed {options.seed} layout {options.layout}: {verdict}, score {r.score:.2f}, "
        f"{r.steps}/{r.step_limit} steps",
        f"  run directory: {r.agent_dir if r.agent_dir is not None else '(the Model started no episode)'}",
        f"  RoboDojo result: {r.result_path}",
    ]
    lines += [f"  video: {v}" for v in r.videos]
    return "\n".join(lines)

