"""The two tools the model sees, `python(code)` and `finish(status, summary)`, and parsing of its tool calls."""

from __future__ import annotations

import json
from typing import Any

from pyrua_dojo.llm.types import ToolCall
from prompts import load_text, render

__all__ = ["FINISH_STATUSES", "TOOL_NAMES", "parse_tool_call", "tool_specs"]

FINISH_STATUSES: tuple[str, ...] = ("success", "failure", "stuck")
TOOL_NAMES: tuple[str, ...] = ("python", "finish")


def tool_specs(*, images: bool = True) -> list[dict[str, Any]]:
    """The `tools` parameter of a chat completions request. Descriptions come from prompts/ and follow the run's
    mode: with `images=False` the python tool does not promise images."""
    python_desc = render("tool_python", images=load_text("tool_python_images") if images else "")
    return [
        {
            "type": "function",
            "function": {
                "name": "python",
                "description": python_desc,
                "parameters": {
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": load_text("tool_python_code")}},
                    "required": ["code"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "finish",
                "description": load_text("tool_finish"),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": list(FINISH_STATUSES)},
                        "summary": {"type": "string", "description": "One or two sentences: what was achieved."},
                    },
                    "required": ["status", "summary"],
                },
            },
        },
    ]


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def parse_tool_call(call_id: str, name: str, arguments: str | None) -> ToolCall:
    """Parse one tool call; a malformed call gets `error` set to a message the model can act on."""
    raw = arguments if isinstance(arguments, str) else ("" if arguments is None else str(arguments))
    if name not in TOOL_NAMES:
        return ToolCall(call_id, name, raw, error=f"unknown tool {name!r}; the tools are `python(code)` and `finish(status, summary)`. Nothing ran.")
    try:
        args = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolCall(
            call_id,
            name,
            raw,
            error=f"the arguments of `{name}` are not valid JSON ({exc.msg} at char {exc.pos}): {_short(raw)!r}. "
            f"Send a JSON object such as {{\"code\": \"print(1)\"}}. Nothing ran.",
        )
    if not isinstance(args, dict):
        return ToolCall(call_id, name, raw, error=f"the arguments of `{name}` must be a JSON object, got {type(args).__name__}. Nothing ran.")
    if name == "python":
        code = args.get("code")
        if not isinstance(code, str):
            return ToolCall(
                call_id,
                name,
                raw,
                error="`python` needs a string field \"code\" with the cell's source"
                + ("" if code is None else f" (got {type(code).__name__})")
                + ". Nothing ran.",
            )
        if not code.strip():
            return ToolCall(call_id, name, raw, error="`python` got empty code. Nothing ran.")
        return ToolCall(call_id, name, raw, code=code)
    status = args.get("status")
    summary = args.get("summary", "")
    if status not in FINISH_STATUSES:
        return ToolCall(
            call_id, name, raw, error=f"`finish` needs status one of {', '.join(FINISH_STATUSES)} (got {status!r}). The episode continues."
        )
    if not isinstance(summary, str):
        summary = json.dumps(summary)
    return ToolCall(call_id, name, raw, finish_status=status, finish_summary=summary)
