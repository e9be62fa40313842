"""Planners without an LLM: `scripted` plays a given list of cell sources (a task's reference program), `replay`
plays the cells of a recorded run (its turns.jsonl), so a run can be reproduced against the same robot."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from pyrua_dojo.llm.types import LLMCall, PlannerStop, PromptText, Reply, StopSignal, ToolCall, ToolResult

__all__ = ["ReplayPlanner", "ScriptedPlanner"]

_FAILED = ("error", "syntax_error", "refused", "timeout")


class ScriptedPlanner:
    """Plays `cells` one per reply, then calls finish(status="done").

    stop_on_error: after a cell that failed (error, syntax error, refused, timeout), finish with status
        "failure" instead of playing the rest (a reference program is meant to run clean).
    """

    name = "scripted"

    def __init__(self, cells: Sequence[str], *, stop_on_error: bool = True, label: str = "scripted") -> None:
        cells = list(cells)
        for i, c in enumerate(cells):
            if not isinstance(c, str) or not c.strip():
                raise ValueError(f"{label} planner: cell {i + 1} is not a non-empty string")
        self._cells = cells
        self._stop_on_error = stop_on_error
        self._label = label
        self._next_index = 0
        self._failed: str | None = None
        self._closed = False

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(self._cells)

    def begin(self, prompt: PromptText, on_request: Callable[[LLMCall], None] | None = None) -> None:
        self._next_index = 0
        self._failed = None

    def next(self, stop: StopSignal, deadline: float | None) -> Reply:
        if self._closed or stop.is_set():
            raise PlannerStop("cancelled", f"{self._label} planner stopped")
        if self._failed is not None:
            return self._finish("failure", self._failed)
        if self._next_index >= len(self._cells):
            return self._finish("done", f"{self._label}: all {len(self._cells)} cells played")
        i = self._next_index
        self._next_index += 1
        code = self._cells[i]
        call = ToolCall(f"{self._label}_{i + 1}", "python", json.dumps({"code": code}), code=code)
        return Reply(text="", tool_calls=(call,))

    def respond(self, results: Sequence[ToolResult], note: str | None = None) -> None:
        if not self._stop_on_error:
            return
        for r in results:
            if r.status in _FAILED:
                self._failed = f"{self._label}: cell {self._next_index} ended with {r.status}"

    def close(self) -> None:
        self._closed = True

    def _finish(self, status: str, summary: str) -> Reply:
        call = ToolCall(
            f"{self._label}_finish",
            "finish",
            json.dumps({"status": status, "summary": summary}),
            finish_status=status,
            finish_summary=summary,
        )
        return Reply(text="", tool_calls=(call,))


class ReplayPlanner(ScriptedPlanner):
    """Plays the cells of a recorded run, in their recorded order, whatever their recorded outcome."""

    name = "replay"

    def __init__(self, cells: Sequence[str], *, source: str = "") -> None:
        super().__init__(cells, stop_on_error=False, label="replay")
        self.source = source
