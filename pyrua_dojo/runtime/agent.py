"""The per-episode agent loop: planner <-> cells <-> trace.

One `Agent` runs one episode: it writes the prompt and card to the run directory, asks the planner for a reply,
runs each tool call in order (a `python` call runs a cell; `finish` ends the episode; a malformed call gets an
error result), answers the planner with the results and their images, and repeats until the episode ends.

Counting: one LLM call per reply, whatever its number of tool calls, except a reply whose only calls are a
well-formed `finish` (the end of the episode, not a decision). A reply without a tool call counts and gets a short
reminder; retried requests never count. Several tool calls in one reply run in order; after a cell that did not end
"ok" the remaining calls of that reply are not run (the model wrote them without seeing that outcome) and are
answered "not run".

Statuses: finished (the planner called finish, or said it was done), episode_ended (the episode ended during a
cell: success, step limit, failure), call_budget, timeout (wall budget), planner_error, context_overflow,
cancelled (`cancel()` or an episode-finished cancel token while no cell ran), error (a failure of the loop itself).
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from primitives.errors import CancelToken, EpisodeFinished
from pyrua_dojo.llm.types import LLMCall, Planner, PlannerStop, Reply, ToolCall, ToolResult, Usage
from pyrua_dojo.runtime.prompt.assemble import Prompt
from prompts import load_text
from pyrua_dojo.runtime.trace import RunTrace

__all__ = ["Agent", "AgentConfig", "AgentResult", "CellRunner", "describe_end", "says_done"]

STATUSES = (
    "finished",
    "episode_ended",
    "call_budget",
    "timeout",
    "planner_error",
    "context_overflow",
    "cancelled",
    "error",
)


def describe_end(status: str, success: bool | None = None) -> str:
    """How the agent's episode ended, in words, beside the judge's verdict (`success`, None when unknown).

    "cancelled" with a success is the normal end on RoboDojo: the benchmark resets the env the moment the task
    is solved, which stops the agent wherever it was."""
    if status == "cancelled":
        return "the benchmark ended the episode" + (" the moment the task was solved" if success else "")
    return {
        "finished": "the model called finish",
        "episode_ended": "the episode ended during a cell (step limit, failure or reset)",
        "call_budget": "the LLM call budget ran out",
        "timeout": "the agent's wall-clock budget ran out",
        "planner_error": "the LLM could not be reached or answered badly",
        "context_overflow": "the conversation outgrew the model's context window",
        "error": "the agent loop failed",
        "running": "still running, or interrupted",
    }.get(status, status)


class CellRunner(Protocol):
    """What the loop needs of the cell executor (`pyrua_dojo.runtime.cells.CellExecutor`)."""

    def run(self, code: str) -> Any:  # -> cells.CellResult
        ...


@dataclass(frozen=True)
class AgentConfig:
    """Budgets and loop behaviour.

    max_llm_calls: counted LLM calls per episode (see the module docstring for what counts).
    wall_budget_s: wall clock per episode, thinking included; None for no limit. On expiry an in-flight request
        is aborted and a running cell is cancelled through the cancel token.
    calls_left_notice: when at most this many calls are left, tool results end with "[k LLM calls left]"
        (0 never; a large number always).
    detect_done_text: a reply without tool calls that plainly says the task is done ends the episode as finished
        (conservative: short, no code, no negation or future tense).
    skip_after_failure: do not run the rest of a reply's calls after a cell that did not end "ok".
    """

    max_llm_calls: int = 100
    wall_budget_s: float | None = 1800.0
    calls_left_notice: int = 0
    detect_done_text: bool = True
    skip_after_failure: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_llm_calls, bool) or not isinstance(self.max_llm_calls, int) or self.max_llm_calls < 1:
            raise ValueError(f"AgentConfig.max_llm_calls must be a positive int, got {self.max_llm_calls!r}")
        if self.wall_budget_s is not None and not self.wall_budget_s > 0:
            raise ValueError(f"AgentConfig.wall_budget_s must be positive or None, got {self.wall_budget_s!r}")
        if self.calls_left_notice < 0:
            raise ValueError("AgentConfig.calls_left_notice must be >= 0")


@dataclass(frozen=True)
class AgentResult:
    """How the episode's agent loop ended, with its counts; the same content lands in result.json."""

    status: str
    reason: str
    outcome: str | None  # EpisodeFinished reason seen by the loop ("success", "step_limit", ...), if any
    finish: Mapping[str, Any] | None  # {status, summary, via: "tool" | "text"} when the planner finished
    llm_calls: int  # counted calls (the budget)
    replies: int  # replies received
    llm_requests: int  # HTTP requests, retries included
    llm_retries: int  # failed attempts that were retried
    cells: int
    cell_statuses: Mapping[str, int]
    invalid_calls: int
    skipped_calls: int
    reminders: int
    steps_used: int | None
    usage: Usage
    cost_usd: float | None
    wall_s: float
    llm_s: float
    cells_s: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = {**asdict(self.usage), "total_tokens": self.usage.total_tokens}
        d["cell_statuses"] = dict(self.cell_statuses)
        d["finish"] = dict(self.finish) if self.finish is not None else None
        return d


_DONE = re.compile(
    r"\b(?:the\s+)?(?:task|job|goal)\s+(?:is\s+|has\s+been\s+|was\s+)?(?:now\s+)?"
    r"(?:complete|completed|done|finished|accomplished|solved)\b"
    r"|\bi(?:'m|\s+am)\s+(?:all\s+)?(?:done|finished)\b"
    r"|^\s*(?:all\s+)?(?:done|finished|task complete)[.!]?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_NOT_DONE = re.compile(
    r"\?|\b(?:not|no|isn't|isnt|wasn't|hasn't|haven't|cannot|can't|unable|fail\w*|yet|will|going|next|then|"
    r"let\s+me|let's|i'll|need|needs|should|try|trying|almost|nearly|once|after|before|until|if)\b",
    re.IGNORECASE,
)


def says_done(text: str) -> bool:
    """True when a reply without tool calls plainly says the task is done. Conservative: at most 600 characters,
    no code, and its last paragraph has a done phrase and no negation, condition or future."""
    t = text.strip()
    if not t or len(t) > 600 or "```" in t:
        return False
    last = [p for p in re.split(r"\n\s*\n", t) if p.strip()][-1]
    return bool(_DONE.search(last)) and not _NOT_DONE.search(last)


class _NullTrace:
    """Stands in when no run directory is wanted: accepts every record and keeps nothing."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def ignore(*args: Any, **kwargs: Any) -> Any:
            return {} if name in ("record_turn", "finish") else None

        return ignore


class _Stop:
    """The signal planners poll: set by `Agent.cancel()`, or by an EpisodeFinished on the cancel token."""

    def __init__(self, event: threading.Event, token: CancelToken | None) -> None:
        self._event = event
        self._token = token

    def is_set(self) -> bool:
        if self._event.is_set():
            return True
        return self._token is not None and isinstance(self._token.exception, EpisodeFinished)


@dataclass
class _Counts:
    replies: int = 0
    counted: int = 0
    requests: int = 0
    retries: int = 0
    cells: int = 0
    invalid: int = 0
    skipped: int = 0
    reminders: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    cost_known: bool = True
    llm_s: float = 0.0
    cells_s: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)


class Agent:
    """Runs one episode's loop. `run()` once, from the agent thread; `cancel()` from any thread.

    planner: any Planner (openai, scripted, replay).
    cells: the episode's cell executor.
    prompt: the assembled prompt (system text and task card).
    trace: the run directory writer; None to write nothing.
    cancel: the episode's cancel token, shared with the executor and the primitives: `cancel()` and the wall
        budget cancel it with EpisodeFinished so a running cell stops; an EpisodeFinished put on it by the episode
        host (a reset) also stops the loop, and aborts an in-flight LLM request.
    steps: returns the episode's steps used so far (the bridge's counter), to record steps per cell.
    """

    def __init__(
        self,
        planner: Planner,
        cells: CellRunner,
        prompt: Prompt,
        *,
        trace: RunTrace | None = None,
        config: AgentConfig = AgentConfig(),
        cancel: CancelToken | None = None,
        steps: Callable[[], int] | None = None,
    ) -> None:
        self.planner = planner
        self.cells = cells
        self.prompt = prompt
        self.config = config
        self._trace: Any = trace if trace is not None else _NullTrace()
        self._token = cancel
        self._steps = steps
        self._stop_event = threading.Event()
        self._stop = _Stop(self._stop_event, cancel)
        self._lock = threading.Lock()
        self._cancel_reason: str | None = None
        self._wall_expired = False
        self._started = False
        self._outcome: str | None = None
        self._finish: dict[str, Any] | None = None
        self._c = _Counts()

    # -- control --------------------------------------------------------------------------------------------

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the episode's loop from any thread: abort an in-flight LLM request, end a running cell (through the
        cancel token, with EpisodeFinished(reason)), and make `run()` return with status "cancelled"."""
        with self._lock:
            if self._cancel_reason is None:
                self._cancel_reason = reason
        self._stop_event.set()
        if self._token is not None:
            self._token.cancel(EpisodeFinished(reason))
        self.planner.close()

    def _on_wall(self) -> None:
        self._wall_expired = True
        self._trace.event("wall_budget", budget_s=self.config.wall_budget_s)
        if self._token is not None:
            self._token.cancel(EpisodeFinished("budget", "wall-clock budget"))

    def _stopped(self, reason: str | None = None) -> tuple[str, str]:
        """The status once the loop was stopped or the episode ended; `reason` is an EpisodeFinished reason seen
        in a cell. An explicit cancel wins, then the wall budget, then the episode's own end."""
        if self._cancel_reason is not None:
            return "cancelled", f"cancelled ({self._cancel_reason})"
        if self._wall_expired:
            return "timeout", f"wall budget of {self.config.wall_budget_s:g} s spent"
        if reason is None:
            exc = self._token.exception if self._token is not None else None
            reason = exc.reason if isinstance(exc, EpisodeFinished) else None
        if reason is None:
            return "cancelled", "cancelled"
        self._outcome = self._outcome or reason
        if reason in ("reset", "cancelled"):
            return "cancelled", f"the episode was stopped ({reason})"
        return "episode_ended", f"the episode ended ({reason})"

    # -- the loop -------------------------------------------------------------------------------------------

    def run(self) -> AgentResult:
        """Run the episode's loop to its end and return how it ended (also written to result.json)."""
        if self._started:
            raise RuntimeError("an Agent runs one episode once; make a new Agent")
        self._started = True
        t0 = time.monotonic()
        budget = self.config.wall_budget_s
        deadline = None if budget is None else t0 + budget
        timer: threading.Timer | None = None
        if budget is not None:
            timer = threading.Timer(budget, self._on_wall)
            timer.daemon = True
            timer.start()
        status, reason, error = "error", "the loop did not finish", None
        steps0 = self._read_steps()
        try:
            self._start_trace()
            self.planner.begin(self.prompt, on_request=self._on_request)
            status, reason = self._loop(deadline)
        except EpisodeFinished as ef:  # an executor that let it escape
            self._outcome = ef.reason
            status, reason = "episode_ended", str(ef)
        except Exception as exc:  # noqa: BLE001 - the loop's own failure becomes the episode's status
            status, reason, error = "error", f"{type(exc).__name__}: {exc}", traceback.format_exc()
            self._trace.event("error", error=reason, traceback=error)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: record, then let it propagate
            status, reason = "error", f"interrupted: {type(exc).__name__}"
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self.planner.close()
            steps1 = self._read_steps()
            result = self._result(status, reason, error, time.monotonic() - t0, steps0, steps1)
            try:
                self._trace.finish(status, **self._result_fields(result))
            except Exception:  # noqa: BLE001 - a broken disk must not hide the outcome from the caller
                pass
        return result

    def _loop(self, deadline: float | None) -> tuple[str, str]:
        c = self._c
        while True:
            if self._stop.is_set():
                return self._stopped()
            if c.counted >= self.config.max_llm_calls:
                self._trace.event("call_budget", llm_calls=c.counted)
                return "call_budget", f"all {self.config.max_llm_calls} LLM calls used"
            try:
                reply = self.planner.next(self._stop, deadline)
            except PlannerStop as stop:
                if stop.kind == "timeout":
                    self._wall_expired = True
                if stop.kind in ("cancelled", "timeout"):
                    return self._stopped()
                return stop.kind, stop.message or stop.kind
            c.replies += 1
            if not (reply.tool_calls and all(tc.name == "finish" and tc.ok for tc in reply.tool_calls)):
                c.counted += 1
            if not reply.tool_calls:
                ended = self._text_reply(reply)
                if ended is not None:
                    return ended
                continue
            ended = self._tool_calls(reply)
            self._progress()
            if ended is not None:
                return ended

    def _text_reply(self, reply: Reply) -> tuple[str, str] | None:
        c = self._c
        if self.config.detect_done_text and says_done(reply.text):
            self._finish = {"status": "done", "summary": reply.text.strip(), "via": "text"}
            self._trace.record_turn({"kind": "done_text", "reply": c.replies, "assistant_text": reply.text})
            return "finished", "the model said the task is done"
        c.reminders += 1
        note = load_text("reminder") + self._calls_left_line()
        self._trace.record_turn({"kind": "reminder", "reply": c.replies, "assistant_text": reply.text, "text": note})
        self.planner.respond([], note=note)
        self._progress()
        return None

    def _tool_calls(self, reply: Reply) -> tuple[str, str] | None:
        c = self._c
        results: list[ToolResult] = []
        ended: tuple[str, str] | None = None
        skip: str | None = None
        for call in reply.tool_calls:
            base = {"reply": c.replies, "call_id": call.id, "tool": call.name}
            if skip is not None:
                c.skipped += 1
                text = f"Not run: {skip}."
                results.append(ToolResult(call.id, text))
                self._trace.record_turn({"kind": "skipped", **base, "arguments": call.arguments, "text": text})
                continue
            if not call.ok:
                c.invalid += 1
                text = f"Error: {call.error}"
                results.append(ToolResult(call.id, text))
                self._trace.record_turn({"kind": "invalid", **base, "arguments": call.arguments, "text": text})
                continue
            if call.name == "finish":
                self._finish = {"status": call.finish_status, "summary": call.finish_summary, "via": "tool"}
                text = "Finished. The episode is over for you."
                results.append(ToolResult(call.id, text))
                self._trace.record_turn({"kind": "finish", **base, "status": call.finish_status, "summary": call.finish_summary, "text": text})
                ended = ("finished", f"finish({call.finish_status})")
                skip = "finish was called before it"
                continue
            result = self._run_cell(call, base)
            results.append(result)
            if result.status == "episode_finished" or self._stop.is_set():
                ended = self._stopped(self._outcome if result.status == "episode_finished" else None)
                skip = "the episode ended"
            elif result.status != "ok" and self.config.skip_after_failure:
                skip = f"an earlier call of this reply ended with {result.status}, so its code did not run"
        if ended is None and results:
            line = self._calls_left_line()
            if line:
                last = results[-1]
                results[-1] = ToolResult(last.call_id, last.text + line, last.images, last.status)
        self.planner.respond(results)
        return ended

    def _run_cell(self, call: ToolCall, base: dict[str, Any]) -> ToolResult:
        c = self._c
        c.cells += 1
        index = c.cells
        steps_before = self._read_steps()
        self._trace.begin_cell(index)
        t_start = time.monotonic()
        try:
            assert call.code is not None
            res = self.cells.run(call.code)
        finally:
            self._trace.end_cell()
        wall = time.monotonic() - t_start
        c.cells_s += wall
        steps_after = self._read_steps()
        status = str(res.status)
        c.statuses[status] += 1
        if res.episode_finished:
            self._outcome = str(res.episode_finished)
            status = "episode_finished"
        text = res.to_text()
        images = tuple(res.images)
        record = {
            "kind": "cell",
            "cell": index,
            **base,
            "code": call.code,
            "status": status,
            "text": text,
            "stdout": res.stdout,
            "stderr": res.stderr,
            "stdout_chars": res.stdout_chars,
            "stderr_chars": res.stderr_chars,
            "value": res.value,
            "exception": res.exception,
            "episode_finished": res.episode_finished,
            "audit_flags": list(res.audit_flags),
            "dropped_images": res.dropped_images,
            "executor_index": res.index,
            "elapsed_s": res.elapsed_s,
            "wall_s": round(wall, 4),
            "steps_before": steps_before,
            "steps_after": steps_after,
            "steps_used": None if steps_before is None or steps_after is None else steps_after - steps_before,
        }
        self._trace.record_turn(record, images)
        return ToolResult(call.id, text, images, status)

    # -- accounting ------------------------------------------------------------------------------------------

    def _on_request(self, call: LLMCall) -> None:
        c = self._c
        c.requests += 1
        c.llm_s += call.latency_s
        if not call.ok and call.retry_in_s is not None:
            c.retries += 1
            self._trace.event("llm_retry", request=call.request, error=call.error, retry_in_s=call.retry_in_s)
        if call.usage is not None:
            c.usage = c.usage + call.usage
        if call.ok:
            if call.cost_usd is None:
                c.cost_known = False
            else:
                c.cost += call.cost_usd
        self._trace.record_llm_call(call)

    def _calls_left_line(self) -> str:
        n = self.config.calls_left_notice
        left = self.config.max_llm_calls - self._c.counted
        return f"\n[{left} LLM calls left]" if n and left <= n else ""

    def _read_steps(self) -> int | None:
        if self._steps is None:
            return None
        try:
            return int(self._steps())
        except Exception:  # noqa: BLE001 - a step counter that fails must not end the episode
            return None

    def _start_trace(self) -> None:
        p = self.prompt
        self._trace.write_prompt(p.text, sections=dict(p.sections))
        self._trace.write_card(
            {**p.card.to_json(), "text": p.card_text, "attached": [a.label for a in p.card_images]},
            [(im.source, im.image) for im in p.card.images],
        )
        planner_config = getattr(getattr(self.planner, "config", None), "public", None)
        self._trace.update_result(
            planner=getattr(self.planner, "name", type(self.planner).__name__),
            planner_config=planner_config() if callable(planner_config) else None,
            agent_config=asdict(self.config),
            task=p.card.task,
        )

    def _progress(self) -> None:
        c = self._c
        self._trace.update_result(
            progress={
                "llm_calls": c.counted,
                "replies": c.replies,
                "cells": c.cells,
                "steps_used": self._read_steps(),
                "prompt_tokens": c.usage.prompt_tokens,
                "completion_tokens": c.usage.completion_tokens,
            }
        )

    def _result(
        self, status: str, reason: str, error: str | None, wall: float, steps0: int | None, steps1: int | None
    ) -> AgentResult:
        c = self._c
        return AgentResult(
            status=status,
            reason=reason,
            outcome=self._outcome,
            finish=dict(self._finish) if self._finish is not None else None,
            llm_calls=c.counted,
            replies=c.replies,
            llm_requests=c.requests,
            llm_retries=c.retries,
            cells=c.cells,
            cell_statuses=dict(c.statuses),
            invalid_calls=c.invalid,
            skipped_calls=c.skipped,
            reminders=c.reminders,
            steps_used=None if steps1 is None else steps1 - (steps0 or 0),
            usage=c.usage,
            cost_usd=round(c.cost, 6) if c.cost_known else None,
            wall_s=round(wall, 4),
            llm_s=round(c.llm_s, 4),
            cells_s=round(c.cells_s, 4),
            error=error,
        )

    @staticmethod
    def _result_fields(r: AgentResult) -> dict[str, Any]:
        j = r.to_json()
        return {
            "reason": j["reason"],
            "outcome": j["outcome"],
            "finish": j["finish"],
            "counts": {
                k: j[k]
                for k in (
                    "llm_calls", "replies", "llm_requests", "llm_retries", "cells", "cell_statuses",
                    "invalid_calls", "skipped_calls", "reminders", "steps_used",
                )
            },
            "tokens": j["usage"],
            "cost_usd": j["cost_usd"],
            "timing": {"agent_wall_s": j["wall_s"], "llm_s": j["llm_s"], "cells_s": j["cells_s"]},
            "error": j["error"],
        }
