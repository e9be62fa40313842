"""The vocabulary shared by planners and the agent loop: tool calls, replies, tool results, usage, request records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pyrua_dojo.runtime.images import ImageAttachment

__all__ = [
    "ImageAttachment",
    "LLMCall",
    "Planner",
    "PlannerStop",
    "PromptText",
    "Reply",
    "StopKind",
    "StopSignal",
    "ToolCall",
    "ToolResult",
    "Usage",
]


class PromptText(Protocol):
    """What a planner sends of an assembled prompt (`pyrua_dojo.runtime.prompt.assemble.Prompt`): the system text, then the task
    card's text and images as the first user message."""

    @property
    def system(self) -> str: ...

    @property
    def card_text(self) -> str: ...

    @property
    def card_images(self) -> tuple[ImageAttachment, ...]: ...


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply, parsed. `error` is None when the call is well formed.

    name: "python", "finish" or whatever the model wrote.
    arguments: the raw JSON text exactly as the model wrote it.
    code: the cell source of a well-formed `python` call.
    finish_status, finish_summary: the arguments of a well-formed `finish` call.
    """

    id: str
    name: str
    arguments: str
    code: str | None = None
    finish_status: str | None = None
    finish_summary: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Usage:
    """Token usage of one request (or a sum). `prompt_tokens` includes `cached_tokens`; `completion_tokens`
    includes `reasoning_tokens` (the OpenAI accounting, which vLLM and SGLang follow)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.completion_tokens + other.completion_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMCall:
    """One HTTP request to the LLM (every attempt, retried or not), as written to llm_calls.jsonl.

    request: 1-based number of this request in the episode (attempts included).
    reply: the number of the reply this request is for (1-based); retries of one reply share it.
    attempt: 1 for the first try of a reply, 2 for its first retry, ...
    error_kind: None when ok; else "transient" (retried or retries exhausted), "context_overflow", "fatal",
        "cancelled" or "timeout" (the episode's wall budget ran out during the request).
    retry_in_s: the backoff before the next attempt, when one follows.
    """

    request: int
    reply: int
    attempt: int
    ok: bool
    model: str
    started_at: float  # unix time
    latency_s: float
    usage: Usage | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    status_code: int | None = None
    retry_in_s: float | None = None
    messages: int = 0  # messages sent
    images: int = 0  # images in the messages sent
    response_id: str | None = None
    text: str | None = None  # the assistant's text content
    reasoning: str | None = None  # reasoning content, when the server returns it
    tool_calls: tuple[dict[str, str], ...] = ()  # [{id, name, arguments}] as returned
    reasoning_tokens_estimated: bool = False  # the server returned reasoning text but no count: usage estimates it
    context_estimate: int | None = None  # estimated prompt tokens of this request (with a context_window)
    shortening: dict[str, int] | None = None  # what was dropped to fit the window before this request


@dataclass(frozen=True)
class Reply:
    """One assistant reply: its text and tool calls (possibly none). `call` is the request that produced it
    (None for planners that do not call an LLM)."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    call: LLMCall | None = None


@dataclass(frozen=True)
class ToolResult:
    """What the loop answers to one tool call: the text the model reads, the images the code asked for, and the
    cell's status (None for calls that ran no cell)."""

    call_id: str
    text: str
    images: tuple[ImageAttachment, ...] = ()
    status: str | None = None


StopKind = Literal["cancelled", "timeout", "planner_error", "context_overflow"]


class PlannerStop(Exception):
    """The planner cannot produce another reply; `kind` becomes the episode status."""

    def __init__(self, kind: StopKind, message: str = "") -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind
        self.message = message


class StopSignal(Protocol):
    """Polled by planners while they wait; true once the episode is cancelled."""

    def is_set(self) -> bool: ...


class Planner(Protocol):
    """Decides the next tool calls. The agent loop calls `begin` once, then alternates `next` and `respond`
    until the episode ends; `close` may be called from any thread at any time and makes a pending `next` raise
    PlannerStop("cancelled") promptly (an in-flight HTTP request is aborted)."""

    name: str

    def begin(self, prompt: PromptText, on_request: Callable[[LLMCall], None] | None = None) -> None: ...

    def next(self, stop: StopSignal, deadline: float | None) -> Reply:
        """The next reply. `deadline` is a time.monotonic() instant (the episode's wall budget). Raises
        PlannerStop."""
        ...

    def respond(self, results: Sequence[ToolResult], note: str | None = None) -> None:
        """Answer the last reply: one result per tool call, in order; `note` is extra user text (a reminder)."""
        ...

    def close(self) -> None: ...

