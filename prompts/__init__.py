"""Prompt texts (contract, operating notes, judging notes, task card template), read as package data."""

from __future__ import annotations

import string
from importlib import resources
from typing import Any

__all__ = ["load_text", "render"]


def load_text(name: str) -> str:
    """The text of `prompts/<name>.md`, without its trailing newlines."""
    try:
        text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"prompt text prompts/{name}.md is missing") from None
    return text.rstrip("\n")


def render(name: str, **values: Any) -> str:
    """`prompts/<name>.md` with its `$placeholders` filled; a missing value raises ValueError (never a silent gap)."""
    template = string.Template(load_text(name))
    try:
        return template.substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise ValueError(f"prompts/{name}.md needs a value for ${exc.args[0]}") from None
    except ValueError as exc:
        raise ValueError(f"prompts/{name}.md: bad placeholder ({exc})") from None
