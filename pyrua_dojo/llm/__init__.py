"""The planners behind one interface: `openai` (our loop on the OpenAI-compatible chat completions API), `scripted`
(plays given cells) and `replay` (plays a recorded run); plus usage, cost and request records."""

from pyrua_dojo.llm.errors import classify, is_context_overflow
from pyrua_dojo.llm.openai_planner import OpenAIConfig, OpenAIPlanner, RetryPolicy
from pyrua_dojo.llm.pricing import Price, PriceTable
from pyrua_dojo.llm.scripted_planners import ReplayPlanner, ScriptedPlanner
from pyrua_dojo.llm.tools import FINISH_STATUSES, parse_tool_call, tool_specs
from pyrua_dojo.llm.types import LLMCall, Planner, PlannerStop, Reply, StopSignal, ToolCall, ToolResult, Usage

__all__ = [
    "FINISH_STATUSES",
    "LLMCall",
    "OpenAIConfig",
    "OpenAIPlanner",
    "Planner",
    "PlannerStop",
    "Price",
    "PriceTable",
    "ReplayPlanner",
    "Reply",
    "RetryPolicy",
    "ScriptedPlanner",
    "StopSignal",
    "ToolCall",
    "ToolResult",
    "Usage",
    "classify",
    "is_context_overflow",
    "parse_tool_call",
    "tool_specs",
]
