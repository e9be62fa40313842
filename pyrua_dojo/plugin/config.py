"""The policy's configuration: the plugin's `deploy.yml` merged with XPolicyLab's overrides.

XPolicyLab passes `task_name`, `seed`, `action_type`, `ckpt_name`, ... as overrides whose values went through
`ast.literal_eval` (so `true` stays the string "true" and a numeric `ckpt_name` becomes an int); this module
normalises them and refuses unknown keys of our own with a clear message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyrua_dojo.runtime.agent import AgentConfig
from pyrua_dojo.runtime.cells import CellConfig
from pyrua_dojo.kernel.host import KernelConfig
from pyrua_dojo.llm.openai_planner import OpenAIConfig
from pyrua_dojo.plugin.presets import Preset, apply_preset
from pyrua_dojo.runtime.prompt.assemble import PromptOptions

#: Keys XPolicyLab itself puts into model_cfg (deploy.yml defaults and server overrides); accepted, mostly unused.
XPOLICYLAB_KEYS = frozenset(
    {
        "policy_name", "protocol", "host", "port", "bench_name", "task_name", "ckpt_name", "env_cfg_type", "seed",
        "action_type", "gpu_id", "eval_batch", "relay_url", "ws_ping_interval_s", "ws_ping_timeout_s",
    }
)

PLANNERS = ("openai", "scripted", "replay", "calibrate")  # calibrate: the calibration routine, no LLM


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "no", "0", "off"):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{key} must be true or false, got {value!r}")


def _opt_float(value: Any, key: str) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "")):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a number, got {value!r}") from None


@dataclass(frozen=True)
class PolicyConfig:
    """Everything one Model needs, validated."""

    task: str
    seed: int | None
    action_type: str = "joint"
    planner: str = "scripted"
    llm: OpenAIConfig | None = None
    replay_from: Path | None = None
    program: Path | None = None  # scripted planner: a percent-format program file instead of the task's own
    agent: AgentConfig = AgentConfig()
    cells: CellConfig = CellConfig()
    kernel: KernelConfig = KernelConfig()  # how cell kernels are started and confined
    prompt: PromptOptions = PromptOptions()
    segmentation_url: str | None = None
    calibration_file: Path | None = None
    run_root: Path = Path("runs")
    step_limit: int | None = None  # default: the task catalogue's
    get_action_timeout_s: float | None = None  # None: wait for the agent as long as it needs
    reset_join_s: float = 30.0
    hold_steps: int = 10  # actions per hold chunk once the agent has finished
    preset: Preset | None = None  # the model preset whose settings filled in what the configuration left out
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the resolved settings (preset applied)

    @classmethod
    def from_model_cfg(cls, cfg: Mapping[str, Any]) -> PolicyConfig:
        """Parse XPolicyLab's model_cfg (deploy.yml + overrides), with its preset's settings filled in."""
        cfg, preset = apply_preset(cfg)
        known = XPOLICYLAB_KEYS | {
            "preset", "max_tokens_field", "context_window", "replay_reasoning",
            "planner", "model", "base_url", "api_key_env", "reasoning_effort", "temperature", "top_p",
            "max_tokens", "tool_choice", "extra_body", "llm", "llm_call_budget", "episode_wall_budget_s",
            "card_images", "images", "images_on_demand", "depth", "cell_deadline_s", "segmentation_url",
            "run_root", "request_timeout_s", "obs_every_step", "calibration_file", "replay_from", "step_limit",
            "calls_left_notice", "get_action_timeout_s", "image_max_side", "max_images_per_cell", "program", "hold_steps",
            "kernel_seccomp", "kernel_filesystem",
            "judging_card",
        }
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown policy settings {unknown}; known: {sorted(known)}")
        task = cfg.get("task_name")
        if not isinstance(task, str) or not task:
            raise ValueError("model_cfg needs task_name (XPolicyLab passes it as an override)")
        seed = cfg.get("seed")
        seed = None if seed in (None, "None", "null") else int(seed)
        action_type = str(cfg.get("action_type") or "joint")
        if action_type not in ("joint", "ee"):
            raise ValueError(f"action_type must be joint or ee, got {action_type!r}")
        planner = str(cfg.get("planner", "scripted"))
        if planner not in PLANNERS:
            raise ValueError(f"planner must be one of {PLANNERS}, got {planner!r}")
        llm = None
        if planner == "openai":
            llm_cfg: dict[str, Any] = dict(cfg.get("llm") or {})
            for key in ("model", "base_url", "api_key_env", "reasoning_effort", "temperature", "top_p",
                        "max_tokens", "max_tokens_field", "tool_choice", "extra_body", "context_window"):
                if cfg.get(key) is not None:
                    llm_cfg[key] = cfg[key]
            if "images" in cfg:
                llm_cfg["images"] = _bool(cfg["images"], "images")
            if cfg.get("replay_reasoning") is not None:
                llm_cfg["replay_reasoning"] = _bool(cfg["replay_reasoning"], "replay_reasoning")
            if cfg.get("context_window") is not None:
                llm_cfg["context_window"] = int(cfg["context_window"])
            if not llm_cfg.get("model"):
                raise ValueError(
                    "the openai planner needs a model: set `model` (deploy.yml, an override or --model)"
                    + (f"; preset {preset.name!r} leaves it to you" if preset is not None else " or choose a preset")
                )
            llm = OpenAIConfig.from_mapping(llm_cfg)
        replay_from = Path(str(cfg["replay_from"])) if cfg.get("replay_from") else None
        if planner == "replay" and replay_from is None:
            raise ValueError("planner: replay needs replay_from (a recorded run directory)")
        wall = _opt_float(cfg.get("episode_wall_budget_s", 1800.0), "episode_wall_budget_s")
        budget = cfg.get("llm_call_budget")
        agent = AgentConfig(
            max_llm_calls=100 if budget in (None, "None", "null") else int(budget),
            wall_budget_s=wall,
            calls_left_notice=int(cfg.get("calls_left_notice", 0)),
        )
        deadline = float(cfg.get("cell_deadline_s", 120.0))
        max_side = cfg.get("image_max_side", 640)
        cells = CellConfig(
            deadline_s=deadline,
            image_max_side=None if max_side in (None, "None") else int(max_side),
            max_images_per_cell=int(cfg.get("max_images_per_cell", 4)),
        )
        images = _bool(cfg.get("images", True), "images")
        prompt = PromptOptions(
            depth=_bool(cfg.get("depth", False), "depth"),
            card_images=_bool(cfg.get("card_images", True), "card_images"),
            images=images,
            cell_deadline_s=deadline,
            calls_left_notice=int(cfg.get("calls_left_notice", 0)) > 0,
            image_max_side=cells.image_max_side,
            max_images_per_cell=cells.max_images_per_cell,
            judging_card=_bool(cfg.get("judging_card", True), "judging_card"),
        )
        step_limit = cfg.get("step_limit")
        kernel = KernelConfig(seccomp=_bool(cfg.get("kernel_seccomp", True), "kernel_seccomp"),
                              landlock=_bool(cfg.get("kernel_filesystem", True), "kernel_filesystem"))
        return cls(
            task=task,
            seed=seed,
            action_type=action_type,
            planner=planner,
            llm=llm,
            replay_from=replay_from,
            program=Path(str(cfg["program"])) if cfg.get("program") else None,
            agent=agent,
            cells=cells,
            kernel=kernel,
            prompt=prompt,
            segmentation_url=cfg.get("segmentation_url") or None,
            calibration_file=Path(str(cfg["calibration_file"])) if cfg.get("calibration_file") else None,
            run_root=Path(str(cfg.get("run_root") or "runs")),
            step_limit=None if step_limit in (None, "None") else int(step_limit),
            get_action_timeout_s=_opt_float(cfg.get("get_action_timeout_s"), "get_action_timeout_s"),
            hold_steps=int(cfg.get("hold_steps", 10)),
            preset=preset,
            raw=dict(cfg),
        )

    def public(self) -> dict[str, Any]:
        """The configuration as recorded in result.json (no secrets)."""
        out = {k: v for k, v in self.raw.items() if "key" not in k.lower() or k == "api_key_env"}
        out["planner"] = self.planner
        out["judging_card"] = self.prompt.judging_card  # the effective value, recorded even when defaulted
        if self.preset is not None:
            out["preset"] = {"name": self.preset.name, "file": str(self.preset.path), "source": self.preset.source,
                             "settings": dict(self.preset.settings)}
        if self.llm is not None:
            out["llm"] = self.llm.public()
        return out
