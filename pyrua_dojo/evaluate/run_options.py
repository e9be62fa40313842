"""What `play` and `eval` share: who plans each episode, with which model, what the twin simulates, and what the
plugin is told (deploy.yml settings). One definition of the fields, their checks, their command-line flags and
the policy settings they become, so that the two commands cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["PLANNERS", "SEG_NOISE_LEVELS", "STATION_MODES", "RunOptions", "add_run_arguments", "add_twin_conditions",
           "run_options_from_args"]

#: Planners every command offers; `play` adds "console" (a person at the terminal).
PLANNERS: tuple[str, ...] = ("scripted", "openai", "replay", "relay")
# The command line names these without importing the twin (tests check them against the modules that own them).
SEG_NOISE_LEVELS = ("none", "mild", "realistic", "harsh")  # pyrua_dojo.seg_service.twin_backend.NOISE_LEVELS
STATION_MODES = ("unknown", "exact")  # pyrua_dojo.twin.station_draw.STATION_MODES


def add_twin_conditions(p: argparse.ArgumentParser) -> None:
    """--seg-noise and --station: how far the twin is from an oracle (defaults estimate RoboDojo)."""
    p.add_argument("--seg-noise", default="realistic", choices=SEG_NOISE_LEVELS,
                   help="twin mask noise modelling SAM 3's failures (default realistic; none = the oracle)")
    p.add_argument("--station", default="unknown", choices=STATION_MODES,
                   help="unknown (default): each layout's true station drawn around the defaults the agent assumes; "
                   "exact: the twin simulates the agent's station")


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The agent-side options of a twin run. `segmentation`: "twin", "none" or a service URL; `seg_noise`: the
    twin server's mask noise level ("realistic" by default, "none" is the oracle); `station`: "unknown" (the twin
    simulates a station drawn per layout, the agent keeps its own) or "exact"; `judging_card`: the policy setting
    (None: deploy.yml's, which is on)."""

    planners: ClassVar[tuple[str, ...]] = PLANNERS

    planner: str = "scripted"
    preset: str | None = None  # a model preset (deploy.yml's `preset`); explicit settings win over it
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    replay_from: Path | None = None
    program: Path | None = None
    llm_call_budget: int | None = None
    depth: bool = False
    segmentation: str = "twin"
    seg_noise: str = "realistic"
    station: str = "unknown"
    videos: bool = False
    overrides: tuple[str, ...] = ()  # extra deploy.yml overrides, key=value
    judging_card: bool | None = None
    request_timeout_s: float = 120.0
    answer_timeout_s: float = 1800.0  # relay / console: seconds one turn may wait for its answer

    def __post_init__(self) -> None:
        if self.planner not in self.planners:
            raise ValueError(f"planner must be one of {', '.join(self.planners)}, got {self.planner!r}")
        if self.planner == "openai" and not self.model and not self.preset:
            raise ValueError("the openai planner needs --model or --preset")
        if self.planner == "replay" and self.replay_from is None:
            raise ValueError("the replay planner needs --replay-from (a recorded run directory)")
        if self.program is not None and not Path(self.program).is_file():
            raise ValueError(f"program file not found: {self.program}")
        if not self.answer_timeout_s > 0:
            raise ValueError(f"answer_timeout_s must be positive, got {self.answer_timeout_s!r}")
        if not self.request_timeout_s > 0:
            raise ValueError(f"request_timeout_s must be positive, got {self.request_timeout_s!r}")
        if self.llm_call_budget is not None and self.llm_call_budget < 1:
            raise ValueError(f"llm_call_budget must be >= 1, got {self.llm_call_budget}")
        seg = self.segmentation
        if seg not in ("twin", "none") and not seg.startswith(("http://", "https://")):
            raise ValueError(f"segmentation must be twin, none or an http(s) URL, got {seg!r}")
        from pyrua_dojo.seg_service.twin_backend import noise_level
        from pyrua_dojo.twin.station_draw import STATION_MODES

        noise_level(self.seg_noise)  # ValueError naming the levels
        if self.station not in STATION_MODES:
            raise ValueError(f"station must be one of {STATION_MODES}, got {self.station!r}")
        if self.judging_card is not None and any(o.partition("=")[0].strip() == "judging_card" for o in self.overrides):
            raise ValueError("judging_card is set twice: use --judging-card / --no-judging-card, not --set")
        if self.preset is not None:
            from pyrua_dojo.plugin.presets import load_preset

            load_preset(self.preset)  # ValueError naming the known presets

    def run_options(self) -> dict[str, Any]:
        """These options as keyword arguments (to hand them on: eval's settings to each episode's play)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(RunOptions)}

    def policy_settings(self) -> dict[str, Any]:
        """The deploy.yml settings these options give the Model (those left unset keep deploy.yml's)."""
        values = {
            "preset": self.preset,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "replay_from": None if self.replay_from is None else str(self.replay_from),
            "program": None if self.program is None else str(self.program),
            "llm_call_budget": self.llm_call_budget,
            "judging_card": self.judging_card,
        }
        return {"planner": self.planner, "depth": self.depth, **{k: v for k, v in values.items() if v is not None}}


def add_run_arguments(p: argparse.ArgumentParser, *, planners: tuple[str, ...], judging_card_default: bool | None,
                      relay_help: str) -> None:
    """The command-line flags of RunOptions (each command adds its own: tasks, layouts, where results go)."""
    p.add_argument("--planner", choices=planners, default="scripted", help=relay_help)
    p.add_argument("--answer-timeout", type=float, default=1800.0, metavar="S",
                   help="relay/console: seconds a turn waits for its answer (default 1800)")
    p.add_argument("--preset", help="model preset (coder-4b, hosted-reasoning, open-weights-chat, or a .yml): "
                   "fills in the LLM settings not given otherwise")
    p.add_argument("--model", help="LLM name (openai planner)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (openai planner)")
    p.add_argument("--api-key-env", help="environment variable holding the API key (openai planner)")
    p.add_argument("--replay-from", metavar="RUN_DIR", help="recorded run to replay (replay planner)")
    p.add_argument("--program", metavar="FILE", help="percent-format program instead of the task's (scripted planner)")
    p.add_argument("--llm-call-budget", type=int, help="LLM calls per episode (deploy.yml: 100)")
    p.add_argument("--depth", action="store_true", help="depth and camera matrices in observations and prompt")
    p.add_argument("--segmentation", default="twin", metavar="twin|URL|none",
                   help="twin (default): a segmentation server over the twin's masks; a URL; or none")
    add_twin_conditions(p)
    p.add_argument("--videos", action="store_true", help="one mp4 per camera per episode (RoboDojo's names)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides",
                   help="extra deploy.yml override for the Model (repeatable)")
    on = "on" if judging_card_default is not False else "off"
    p.add_argument("--judging-card", action=argparse.BooleanOptionalAction, default=judging_card_default,
                   help=f"the task card says what RoboDojo's success check accepts (default: {on})")


def run_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """RunOptions' keyword arguments from flags added by `add_run_arguments`."""
    return {
        "planner": args.planner,
        "preset": args.preset,
        "model": args.model,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "replay_from": Path(args.replay_from) if args.replay_from else None,
        "program": Path(args.program) if args.program else None,
        "llm_call_budget": args.llm_call_budget,
        "depth": args.depth,
        "segmentation": args.segmentation,
        "seg_noise": args.seg_noise,
        "station": args.station,
        "videos": args.videos,
        "overrides": tuple(args.overrides or ()),
        "judging_card": args.judging_card,
        "answer_timeout_s": args.answer_timeout,
    }
