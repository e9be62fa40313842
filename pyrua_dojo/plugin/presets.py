"""Model presets: named sets of policy settings for one kind of model, kept beside the plugin.

A preset is a YAML file in `submission/PyRUA_Dojo/presets/` (`coder-4b`, `hosted-reasoning`, `open-weights-chat`)
whose comment names where its numbers come from. `preset: NAME` in deploy.yml (or as an override, or `--preset` on
`play` and `eval`) fills in every setting the configuration does not give itself: a key present in deploy.yml or
in the overrides wins over the preset, even when its value is null. A path to a YAML file works as a name too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PRESET_KEYS", "Preset", "apply_preset", "available_presets", "load_preset", "presets_dir"]

#: The settings a preset may give: how to reach and drive the model, and the budgets that go with it.
PRESET_KEYS = frozenset(
    {
        "model", "base_url", "api_key_env", "max_tokens", "max_tokens_field", "tool_choice", "temperature", "top_p",
        "extra_body", "reasoning_effort", "images", "card_images", "llm_call_budget", "episode_wall_budget_s",
        "context_window", "replay_reasoning", "cell_deadline_s", "image_max_side", "max_images_per_cell",
    }
)


@dataclass(frozen=True)
class Preset:
    """One preset: its name, its file, the settings it gives and the source its comment names."""

    name: str
    path: Path
    settings: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


def presets_dir() -> Path:
    """The packaged presets folder (submission/PyRUA_Dojo/presets)."""
    from submission.install import plugin_dir

    return plugin_dir() / "presets"


def available_presets() -> tuple[str, ...]:
    """The names of the packaged presets."""
    return tuple(sorted(p.stem for p in presets_dir().glob("*.yml")))


def load_preset(name: str) -> Preset:
    """Read a preset by name (or a path to a YAML file); ValueError naming the known presets when there is none."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"preset must name a preset, got {name!r}; known: {', '.join(available_presets())}")
    candidate = Path(name)
    path = candidate if candidate.suffix in (".yml", ".yaml") and candidate.is_file() else presets_dir() / f"{name}.yml"
    if not path.is_file():
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(available_presets())} (or a path to a .yml file)")
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, Mapping):
        raise ValueError(f"preset {path} must be a mapping of settings")
    unknown = sorted(set(data) - PRESET_KEYS)
    if unknown:
        raise ValueError(f"preset {path} sets {unknown}, which a preset may not set; allowed: {sorted(PRESET_KEYS)}")
    comment = [ln.lstrip("# ").rstrip() for ln in text.splitlines() if ln.startswith("#")]
    return Preset(name=path.stem, path=path, settings=dict(data), source=" ".join(c for c in comment if c))


def apply_preset(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], Preset | None]:
    """The configuration with its preset's settings filled in where the configuration has no key of its own."""
    name = cfg.get("preset")
    if name in (None, "", "None", "null"):
        return dict(cfg), None
    preset = load_preset(str(name))
    resolved = dict(preset.settings)
    resolved.update(cfg)
    resolved["preset"] = preset.name
    return resolved, preset
