"""Wiring for loop tests: a fake robot, an executor, a run directory, a prompt and an Agent, for one episode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primitives.errors import CancelToken
from pyrua_dojo.runtime.agent import Agent, AgentConfig
from pyrua_dojo.llm import OpenAIConfig, OpenAIPlanner, RetryPolicy
from pyrua_dojo.runtime.prompt.assemble import Prompt, PromptOptions, build_prompt
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.runtime.trace import RunTrace
from tests.support.executor import make_executor
from tests.support.robot import FakeRobot

__all__ = ["Episode", "build_episode", "openai_planner", "FAST_RETRY"]

FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)

_API = "robo.move(arm: str, dz: float = 0.0, steps: int = 5) -> dict\n    Spend steps.\n\nrobo.show(camera: str) -> None"


@dataclass
class Episode:
    robot: FakeRobot
    cancel: CancelToken
    executor: Any
    trace: RunTrace
    prompt: Prompt
    agent: Agent
    planner: Any

    @property
    def run_dir(self) -> Path:
        return self.trace.path


def openai_planner(base_url: str, **overrides: Any) -> OpenAIPlanner:
    cfg: dict[str, Any] = {"model": "fake-model", "base_url": base_url, "api_key": "test-key", "retry": FAST_RETRY}
    cfg.update(overrides)
    return OpenAIPlanner(OpenAIConfig(**cfg))


def build_episode(
    root: Path,
    planner: Any,
    *,
    name: str = "run",
    config: AgentConfig = AgentConfig(max_llm_calls=20, wall_budget_s=60.0),
    options: PromptOptions = PromptOptions(),
    robot: dict[str, Any] | None = None,
    task: str = "stack_blocks",
    trace_config: dict[str, Any] | None = None,
) -> Episode:
    cancel = CancelToken()
    run_dir = root / name
    trace = RunTrace(run_dir, config=trace_config or {"test": True}, meta={"task": task, "episode": name})
    bot = FakeRobot(cancel=cancel, record_call=trace.record_call, **(robot or {}))
    executor = make_executor({"robo": bot}, workspace=run_dir / "workspace", cancel=cancel, drain_images=bot.drain_images,
                             on_event=trace.event)
    card = TaskCard.for_task(task, images=bot.first_images())
    prompt = build_prompt(card, api=_API, options=options)
    agent = Agent(planner, executor, prompt, trace=trace, config=config, cancel=cancel, steps=lambda: bot.steps_used)
    return Episode(bot, cancel, executor, trace, prompt, agent, planner)
