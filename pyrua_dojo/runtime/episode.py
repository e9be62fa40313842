"""One episode: the agent thread, its stepping, its command engine and `robo`, its cells and its run directory.

Created on the first observation after a reset; `on_infer` serves every INFER; `hold_from_now` stops serving the
agent after a failure; `close` ends it (on the next reset), cancelling the agent and an in-flight LLM request, and
joins the thread within a bound. What the Model needs it asks the Episode; the stepping and the engine stay inside.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from calibration import CAMERAS, Station
from calibration.transforms import quat_angle
from primitives.actions import Action, Observation
from primitives.command_engine import CommandEngine
from primitives.errors import CancelToken
from primitives.kinematics import X5Kinematics
from primitives.perception import Perception
from primitives.results import CapturedImage
from primitives.robot import Robo
from primitives.seg_client import SegmentationClient
from pyrua_dojo.runtime.agent import Agent, AgentResult
from pyrua_dojo.runtime.stepping import StepBridge
from pyrua_dojo.catalog import get_task
from pyrua_dojo.kernel.host import KernelExecutor
from pyrua_dojo.plugin.config import PolicyConfig
from pyrua_dojo.llm.types import Planner
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.runtime.prompt.assemble import build_prompt
from pyrua_dojo.runtime.prompt.reference import robo_api_reference, station_facts
from pyrua_dojo.runtime.trace import RunTrace, recorded_cells

class EpisodeRunner(Protocol):
    """What drives an episode's robot: the LLM agent loop, or the calibration routine."""

    def run(self) -> Any: ...

    def cancel(self, reason: str = "cancelled") -> None: ...


FK_WARN_M = 0.002
FK_WARN_DEG = 1.0


def make_planner(config: PolicyConfig) -> Planner:
    """The planner the configuration names."""
    if config.planner == "openai":
        from pyrua_dojo.llm.openai_planner import OpenAIPlanner

        assert config.llm is not None
        return OpenAIPlanner(config.llm)
    if config.planner == "replay":
        from pyrua_dojo.llm.scripted_planners import ReplayPlanner

        assert config.replay_from is not None
        return ReplayPlanner(recorded_cells(config.replay_from), source=str(config.replay_from))
    from pyrua_dojo.llm.scripted_planners import ScriptedPlanner
    from pyrua_dojo.programs import cells, split_cells

    if config.program is not None:
        return ScriptedPlanner(split_cells(config.program.read_text()))
    return ScriptedPlanner(cells(config.task))


class Episode:
    """The agent side of one episode of one env index."""

    def __init__(
        self,
        config: PolicyConfig,
        *,
        env_idx: int,
        first_observation: Mapping[str, Any],
        run_dir: Path,
        station: Station,
        segmentation: SegmentationClient | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.config = config
        self.env_idx = env_idx
        self.run_dir = run_dir
        self._log = logger or logging.getLogger("pyrua_dojo.runtime.episode")
        self.cancel = CancelToken()
        self._stepping = StepBridge(self.cancel, first_observation, hold_steps=config.hold_steps)
        self.result: AgentResult | Any | None = None
        self._images: list[CapturedImage] = []
        self._images_lock = threading.Lock()
        self._closed = False
        spec_limit = config.step_limit if config.step_limit is not None else get_task(config.task).step_limit
        self.trace = RunTrace(
            run_dir,
            config=config.public(),
            meta={
                "task": config.task,
                "seed": config.seed,
                "env_idx": env_idx,
                "planner": config.planner,
                "model": config.llm.model if config.llm is not None else None,
                "step_limit": spec_limit,
            },
        )
        try:
            # The one owner of the step count: `robo` and the calibration routine both send through it.
            self._commands = CommandEngine(
                self._stepping, first_observation, station=station, step_limit=spec_limit, cancel=self.cancel
            )
            first = self._commands.observation
            kin = X5Kinematics(station)
            perception = Perception(station, kin, segmentation)
            self.robo = Robo(
                self._commands,
                first_observation,
                station=station,
                step_limit=spec_limit,
                perception=perception,
                cancel=self.cancel,
                on_image=self._capture,
                record_call=self.trace.record_call,
            )
            self._check_kinematics(kin, first)
            self.executor: KernelExecutor | None = None
            if config.planner != "calibrate":
                # The kernel process starts now and comes up while the task card and the prompt are built.
                self.executor = KernelExecutor(
                    {"robo": self.robo},
                    workspace=run_dir / "workspace",
                    config=config.cells,
                    cancel=self.cancel,
                    drain_images=self._drain,
                    kernel=config.kernel,
                    on_event=self._kernel_event,
                )
            card = TaskCard.for_task(
                config.task,
                first.instruction or None,
                images=[CapturedImage(cam, 0, first.images[cam], "start") for cam in CAMERAS],
                step_limit=spec_limit,
                seed=config.seed,
            )
            prompt = build_prompt(card, api=robo_api_reference(station), options=config.prompt,
                                  facts=station_facts(station))
            self.agent: EpisodeRunner
            if config.planner == "calibrate":
                from pyrua_dojo.runtime.calibration_routine import CalibrationRoutine

                self.agent = CalibrationRoutine(self.robo, self._commands, self.trace, self.cancel, station=station)
            else:
                assert self.executor is not None
                self.agent = Agent(
                    make_planner(config),
                    self.executor,
                    prompt,
                    trace=self.trace,
                    config=config.agent,
                    cancel=self.cancel,
                    steps=lambda: self._commands.steps_used,
                )
        except Exception:
            executor = getattr(self, "executor", None)
            if executor is not None:
                executor.close()
            self.trace.event("error", where="episode start", traceback=traceback.format_exc())
            self.trace.finish("error", error=traceback.format_exc())
            self.trace.close()
            raise
        self._thread = threading.Thread(target=self._run, name=f"agent-env{env_idx}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # ---------------------------------------------------------------- served by the Model
    def on_infer(self, obs: Mapping[str, Any]) -> list[Action]:
        """Deliver the observation to the agent and return the chunk to execute (a hold once it has finished)."""
        return self._stepping.on_infer(obs, timeout_s=self.config.get_action_timeout_s)

    def hold_from_now(self) -> None:
        """Serving this episode failed: the agent stops being served and every later INFER gets a hold chunk."""
        self._stepping.agent_finished()

    def record_error(self, where: str, traceback_text: str) -> None:
        """An error of the serving side, into this episode's events."""
        self.trace.event("error", where=where, traceback=traceback_text)

    def close(self, reason: str = "reset") -> None:
        """End the episode: wake the agent with EpisodeFinished, abort its LLM request, join, close the trace."""
        if self._closed:
            return
        self._closed = True
        self._stepping.end(reason)
        if self._thread.is_alive():
            self.agent.cancel(reason)
            self._thread.join(self.config.reset_join_s)
            if self._thread.is_alive():
                self._log.error("agent thread of env %d did not stop within %.0f s", self.env_idx,
                                self.config.reset_join_s)
                self.trace.event("error", where="close", error="agent thread did not stop in time")
        if self.executor is not None:
            self.executor.close()  # kills a kernel still running
        # The agent's finish may already have closed the files; result.json can still be updated.
        self.trace.update_result(episode={
            "closed_by": reason,
            "steps_used": self.steps_used,
            "chunks": self._stepping.chunks_sent,
            "hold_chunks": self._stepping.hold_chunks_sent,
        })
        self.trace.close()

    @property
    def steps_used(self) -> int:
        """Actions the station ran in this episode (the command engine's count, whoever drove it)."""
        return self._commands.steps_used

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # ---------------------------------------------------------------- internals
    def _run(self) -> None:
        try:
            self.result = self.agent.run()
        except BaseException:  # noqa: BLE001 - the agent thread must never die silently
            self._log.exception("agent of env %d failed", self.env_idx)
            self.trace.event("error", where="agent thread", traceback=traceback.format_exc())
        finally:
            self._stepping.agent_finished()

    def _kernel_event(self, kind: str, **fields: Any) -> None:
        """Kernel start / restart / fault into events.jsonl; the confinement layers also into result.json."""
        self.trace.event(kind, **fields)
        if kind == "kernel_start":
            self.trace.update_result(kernel={"layers": fields.get("layers"), "summary": fields.get("summary"),
                                             "start_s": fields.get("start_s")})
        elif kind == "kernel_restart":
            self.trace.update_result(kernel_restarts=fields.get("restarts"))
        if kind == "kernel_restart":
            self._log.warning("env %d: cell kernel restarted (%s)", self.env_idx, fields.get("why"))

    def _capture(self, image: CapturedImage) -> None:
        """Keep what robo.show captured for the end of the cell; a cell that shows in a loop keeps the latest."""
        cap = max(1, 2 * self.config.cells.max_images_per_cell)
        with self._images_lock:
            self._images.append(image)
            if len(self._images) > cap:
                del self._images[: len(self._images) - cap]

    def _drain(self) -> list[CapturedImage]:
        with self._images_lock:
            out, self._images = self._images, []
        return out

    def _check_kinematics(self, kin: X5Kinematics, obs: Observation) -> None:
        """Forward kinematics of the measured joints must agree with the ee poses RoboDojo reports."""
        report: dict[str, Any] = {}
        worst_m, worst_deg = 0.0, 0.0
        for arm in ("left", "right"):
            fk = kin.arm(arm).fk_pose(obs.joints[arm])
            seen = obs.ee_pose[arm]
            dm = float(np.linalg.norm(fk[:3] - seen[:3]))
            ddeg = float(np.degrees(quat_angle(fk[3:], seen[3:])))
            report[arm] = {"position_m": round(dm, 6), "angle_deg": round(ddeg, 4)}
            worst_m, worst_deg = max(worst_m, dm), max(worst_deg, ddeg)
        ok = worst_m <= FK_WARN_M and worst_deg <= FK_WARN_DEG
        self.trace.event("fk_check", ok=ok, **report)
        if not ok:
            self._log.warning(
                "forward kinematics disagrees with the observed ee poses by %.1f mm / %.2f deg: "
                "the station model (ee link, bases) may not match; run `pyrua-dojo calibrate`",
                1000 * worst_m, worst_deg,
            )
