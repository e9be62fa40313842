"""The `openai` planner: our own tool-calling loop on the OpenAI-compatible chat completions API.

Works with SGLang, vLLM and hosted APIs through the `openai` client. Messages: the system prompt; a first user
message with the task card text and the first camera images; then each assistant reply with its tool calls, one
`tool` message per call, and a user message right after them carrying the images the code asked for (tool
messages cannot carry images on most servers), each image preceded by its label.

Requests run on an event loop owned by the planner, driven from the agent's thread; `close()` from any other
thread makes the pending request be cancelled within ~50 ms, which aborts the HTTP request and closes its
connection. Transient failures are retried per request with exponential backoff and jitter; each attempt is
reported through `on_request` (and so written to llm_calls.jsonl), and none of them counts as an LLM call.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar

import openai

from pyrua_dojo.llm.context import estimate_message_tokens, fit_to_window
from pyrua_dojo.llm.errors import MalformedResponse, classify, completion_room
from pyrua_dojo.llm.pricing import PriceTable
from pyrua_dojo.llm.tools import parse_tool_call, tool_specs
from pyrua_dojo.llm.types import LLMCall, PlannerStop, PromptText, Reply, StopSignal, ToolCall, ToolResult, Usage

__all__ = ["OpenAIConfig", "OpenAIPlanner", "RetryPolicy"]

logger = logging.getLogger(__name__)

_POLL_S = 0.05
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for transient request failures.

    Attempt k (k = 1 for the first retry) waits min(max_delay_s, base_delay_s * 2**(k-1)), reduced by a random
    fraction of up to `jitter`; a server's Retry-After is honoured (capped at max_delay_s). After `max_attempts`
    failed attempts for one reply the episode ends with status planner_error.
    """

    max_attempts: int = 8
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("RetryPolicy delays must be non-negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("RetryPolicy.jitter must be within 0..1")

    def delay(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        d = min(self.max_delay_s, self.base_delay_s * (2 ** (retry - 1)))
        d *= 1.0 - self.jitter * rng.random()
        if retry_after is not None:
            d = max(d, min(retry_after, self.max_delay_s))
        return d


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach the model and what to send with every request.

    api_key: given directly (tests, local servers), else read from the environment variable `api_key_env`; a
        server at a custom `base_url` with neither gets "EMPTY" (what SGLang and vLLM accept).
    tool_choice: "auto", "required" (the PyRUA-Lean-Coder model wants it) or None to omit the parameter.
    max_tokens: new tokens per call, sent as `max_tokens_field`. When the server rejects a request because
        prompt + max_tokens exceed the context and says how long the prompt is (vLLM, SGLang), the request is
        retried at once with max_tokens lowered to what is left, as long as that is at least `min_max_tokens`;
        the lower cap stays for the rest of the episode.
    temperature, top_p, seed, reasoning_effort, parallel_tool_calls: sent when not None.
    extra_body: merged into the request body as is (server-specific sampling: top_k, min_p, chat_template_kwargs).
    images: the model takes images (False: card and cell images are not sent; the text says so).
    image_detail: the `detail` of image parts ("low", "high", "auto"), omitted when None.
    max_cell_images: keep at most this many images from cells in the conversation; older ones are replaced by
        "[image no longer shown]" after their label (saves context; breaks the server's prefix cache from the first
        replaced image on). None keeps all. The card's images always stay.
    request_timeout_s: one HTTP request's timeout (a timed-out request is retried).
    prices_path: a YAML price table searched before the packaged one.
    context_window: the model's context in tokens. Before each request the conversation is measured and, when it
        would not fit with max_tokens to spare, shortened by the rule in `pyrua_dojo.llm.context` (the model is
        told what was dropped). None: no measuring; a server's overflow error then ends the episode.
    context_margin: the estimate of messages the server has not counted yet is raised by this fraction.
    replay_reasoning: send the server's reasoning_content back with each assistant message (off by default: the
        reasoning is kept in the run directory only).
    """

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api_key: str | None = field(default=None, repr=False)
    tool_choice: Literal["auto", "required"] | None = "auto"
    max_tokens: int | None = 16384
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_completion_tokens"
    min_max_tokens: int = 1024
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    parallel_tool_calls: bool | None = None
    extra_body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    images: bool = True
    image_detail: Literal["auto", "low", "high"] | None = None
    max_cell_images: int | None = None
    request_timeout_s: float = 900.0
    retry: RetryPolicy = RetryPolicy()
    prices_path: str | None = None
    context_window: int | None = None
    context_margin: float = 0.1
    replay_reasoning: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("OpenAIConfig.model must name a model")
        if self.tool_choice not in ("auto", "required", None):
            raise ValueError(f"OpenAIConfig.tool_choice must be 'auto', 'required' or None, got {self.tool_choice!r}")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens <= 0):
            raise ValueError(f"OpenAIConfig.max_tokens must be a positive int or None, got {self.max_tokens!r}")
        if not isinstance(self.min_max_tokens, int) or self.min_max_tokens < 1:
            raise ValueError(f"OpenAIConfig.min_max_tokens must be a positive int, got {self.min_max_tokens!r}")
        if self.max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("OpenAIConfig.max_tokens_field must be 'max_tokens' or 'max_completion_tokens'")
        if self.image_detail not in (None, "auto", "low", "high"):
            raise ValueError(f"OpenAIConfig.image_detail must be auto, low, high or None, got {self.image_detail!r}")
        if self.max_cell_images is not None and (not isinstance(self.max_cell_images, int) or self.max_cell_images < 0):
            raise ValueError(f"OpenAIConfig.max_cell_images must be a non-negative int or None, got {self.max_cell_images!r}")
        if not self.request_timeout_s > 0:
            raise ValueError("OpenAIConfig.request_timeout_s must be positive")
        if self.extra_body is not None and not isinstance(self.extra_body, Mapping):
            raise ValueError("OpenAIConfig.extra_body must be a mapping")
        if self.context_window is not None and (not isinstance(self.context_window, int) or self.context_window < 1024):
            raise ValueError(f"OpenAIConfig.context_window must be an int of at least 1024 tokens or None, got {self.context_window!r}")
        if not 0.0 <= self.context_margin <= 1.0:
            raise ValueError(f"OpenAIConfig.context_margin must be within 0..1, got {self.context_margin!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> OpenAIConfig:
        """Build from configuration data (deploy.yml); unknown keys raise ValueError listing the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown LLM settings {unknown}; known: {sorted(known)}")
        values = dict(data)
        if isinstance(values.get("retry"), Mapping):
            values["retry"] = RetryPolicy(**values["retry"])
        return cls(**values)

    def resolve_api_key(self) -> str:
        if self.api_key:
            return self.api_key
        key = os.environ.get(self.api_key_env, "")
        if key:
            return key
        if self.base_url:
            return "EMPTY"
        raise ValueError(
            f"no API key: set the environment variable {self.api_key_env} or give api_key (or a base_url for a local server)"
        )

    def public(self) -> dict[str, Any]:
        """The configuration without secrets, for result.json."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "api_key":
                continue
            v = getattr(self, f.name)
            out[f.name] = dict(v) if isinstance(v, Mapping) else v
        out["retry"] = {f.name: getattr(self.retry, f.name) for f in fields(self.retry)}
        return out


class _Abort(Exception):
    def __init__(self, kind: Literal["cancelled", "timeout"]) -> None:
        super().__init__(kind)
        self.kind: Literal["cancelled", "timeout"] = kind


def _image_part(img: Any, detail: str | None) -> dict[str, Any]:
    url = f"data:{img.mime};base64,{base64.b64encode(img.data).decode('ascii')}"
    image_url: dict[str, Any] = {"url": url}
    if detail:
        image_url["detail"] = detail
    return {"type": "image_url", "image_url": image_url}


class OpenAIPlanner:
    """Plans with an LLM behind an OpenAI-compatible chat completions endpoint. One instance per episode."""

    name = "openai"

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        prices: PriceTable | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._api_key = config.resolve_api_key()
        self._prices = prices if prices is not None else PriceTable.load(config.prices_path)
        self._rng = rng if rng is not None else random.Random()
        self._tools = tool_specs(images=config.images)
        self._loop = asyncio.new_event_loop()
        self._client: openai.AsyncOpenAI | None = None
        self._closed = threading.Event()
        self._run_lock = threading.Lock()
        self._shut = False
        self._messages: list[dict[str, Any]] = []
        self._images_sent = 0
        self._on_request: Callable[[LLMCall], None] | None = None
        self._requests = 0
        self._replies = 0
        self._max_tokens_cap: int | None = None
        self._tools_tokens = sum(estimate_message_tokens({"content": json.dumps(t)}) for t in self._tools)
        self._counted: tuple[int, int] | None = None  # (messages, prompt tokens) the server counted last
        self._scale = 1.0  # server tokens per estimated token on the last counted request (>= 1)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (the exact messages the next request sends)."""
        return self._messages

    # -- Planner protocol ------------------------------------------------------------------------------------

    def begin(self, prompt: PromptText, on_request: Callable[[LLMCall], None] | None = None) -> None:
        self._on_request = on_request
        first: Any = prompt.card_text
        images = list(prompt.card_images) if self.config.images else []
        if images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": prompt.card_text}]
            for img in images:
                parts.append({"type": "text", "text": img.label})
                parts.append(_image_part(img, self.config.image_detail))
            first = parts
            self._images_sent += len(images)
        self._messages = [{"role": "system", "content": prompt.system}, {"role": "user", "content": first}]

    def next(self, stop: StopSignal, deadline: float | None) -> Reply:
        with self._run_lock:
            if self._closed.is_set():
                self._shutdown()
                raise PlannerStop("cancelled", "the planner was closed")
            try:
                return self._loop.run_until_complete(self._next(stop, deadline))
            finally:
                if self._closed.is_set():
                    self._shutdown()

    def respond(self, results: Sequence[ToolResult], note: str | None = None) -> None:
        omitted = not self.config.images
        for r in results:
            text = r.text
            if omitted and r.images:
                text += f"\n[{len(r.images)} image(s) not shown: this model reads text only]"
            self._messages.append({"role": "tool", "tool_call_id": r.call_id, "content": text})
        with_images = [r for r in results if r.images] if self.config.images else []
        if not with_images:
            if note:
                self._messages.append({"role": "user", "content": note})
            return
        parts: list[dict[str, Any]] = []
        for r in with_images:
            head = "Images from the last cell:" if len(with_images) == 1 else f"Images from tool call {r.call_id}:"
            parts.append({"type": "text", "text": head})
            for img in r.images:
                parts.append({"type": "text", "text": img.label})
                parts.append(_image_part(img, self.config.image_detail))
                self._images_sent += 1
        if note:
            parts.append({"type": "text", "text": note})
        self._messages.append({"role": "user", "content": parts})
        self._prune_images()

    def _prune_images(self) -> None:
        limit = self.config.max_cell_images
        if limit is None:
            return
        slots = [
            (m, i)
            for m in self._messages[2:]
            if m["role"] == "user" and isinstance(m["content"], list)
            for i, part in enumerate(m["content"])
            if part.get("type") == "image_url"
        ]
        for m, i in slots[: max(0, len(slots) - limit)]:
            m["content"][i] = {"type": "text", "text": "[image no longer shown]"}
            self._images_sent -= 1

    def close(self) -> None:
        """Cancel a pending request (from any thread) and release the client; idempotent."""
        self._closed.set()
        if self._run_lock.acquire(blocking=False):
            try:
                self._shutdown()
            finally:
                self._run_lock.release()

    # -- internals --------------------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        if self._shut:
            return
        self._shut = True
        try:
            if self._client is not None:
                self._loop.run_until_complete(self._client.close())
        except Exception:  # closing a broken client must not mask the episode's outcome
            logger.debug("closing the OpenAI client failed", exc_info=True)
        finally:
            self._client = None
            self._loop.close()

    def _log(self, record: LLMCall) -> None:
        if self._on_request is not None:
            self._on_request(record)

    def _kwargs(self) -> dict[str, Any]:
        c = self.config
        kw: dict[str, Any] = {"model": c.model, "messages": self._messages, "tools": self._tools, "timeout": c.request_timeout_s}
        if c.tool_choice is not None:
            kw["tool_choice"] = c.tool_choice
        max_tokens = self._max_tokens()
        if max_tokens is not None:
            kw[c.max_tokens_field] = max_tokens
        for name in ("temperature", "top_p", "seed", "reasoning_effort", "parallel_tool_calls"):
            value = getattr(c, name)
            if value is not None:
                kw[name] = value
        if c.extra_body:
            kw["extra_body"] = dict(c.extra_body)
        if c.headers:
            kw["extra_headers"] = dict(c.headers)
        return kw

    def _fit_context(self) -> dict[str, Any]:
        """Measure the conversation against context_window and shorten it when needed (see llm.context).

        Returns the fields recorded with the request: the estimate and any shortening. Raises PlannerStop
        (context_overflow) when even the shortest conversation the rule allows does not fit."""
        window = self.config.context_window
        if window is None:
            return {}
        fit = fit_to_window(
            self._messages,
            window=window,
            max_tokens=self._max_tokens() or 0,
            fixed_tokens=self._tools_tokens,
            known_prefix=self._counted,
            margin=self.config.context_margin,
            scale=self._scale,
        )
        out: dict[str, Any] = {"context_estimate": fit.estimated_tokens}
        if fit.shortening is not None:
            self._counted = None  # earlier messages changed: the server's last count no longer applies
            self._images_sent -= fit.shortening.images_dropped
            out["shortening"] = {
                "images_dropped": fit.shortening.images_dropped,
                "outputs_trimmed": fit.shortening.outputs_trimmed,
                "chars_dropped": fit.shortening.chars_dropped,
                "exchanges_dropped": fit.shortening.exchanges_dropped,
                "tokens_before": fit.shortening.tokens_before,
                "tokens_after": fit.shortening.tokens_after,
                "window": window,
            }
            logger.info("conversation shortened to fit %d tokens: %s", window, out["shortening"])
        if not fit.fits:
            self._log(
                LLMCall(
                    request=self._requests + 1, reply=self._replies, attempt=0, ok=False, model=self.config.model,
                    started_at=time.time(), latency_s=0.0, error_kind="context_overflow",
                    error=f"the conversation needs about {fit.estimated_tokens:,} tokens with nothing left to drop; "
                    f"the window is {window:,} with {self._max_tokens() or 0:,} kept for the reply",
                    messages=len(self._messages), images=self._images_sent, **out,
                )
            )
            raise PlannerStop("context_overflow", f"the conversation cannot fit the {window:,}-token window")
        return out

    def _max_tokens(self) -> int | None:
        caps = [v for v in (self.config.max_tokens, self._max_tokens_cap) if v is not None]
        return min(caps) if caps else None

    async def _race(self, aw: Awaitable[T], stop: StopSignal, deadline: float | None) -> T:
        """Await `aw` unless the planner is closed, `stop` is set or the deadline passes first (then the
        awaitable is cancelled, which aborts an HTTP request and closes its connection)."""
        task = asyncio.ensure_future(aw)
        try:
            while True:
                wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic()))
                done, _ = await asyncio.wait({task}, timeout=wait)
                if task in done:
                    return task.result()
                if self._closed.is_set() or stop.is_set():
                    raise _Abort("cancelled")
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Abort("timeout")
        finally:
            if not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the request is being abandoned
                    pass

    async def _next(self, stop: StopSignal, deadline: float | None) -> Reply:
        self._replies += 1
        reply_no = self._replies
        attempt = 0
        while True:
            attempt += 1
            if self._closed.is_set() or stop.is_set():
                raise PlannerStop("cancelled", "cancelled before the request")
            if deadline is not None and time.monotonic() >= deadline:
                raise PlannerStop("timeout", "the episode's wall budget ran out")
            if self._client is None:
                self._client = openai.AsyncOpenAI(
                    api_key=self._api_key, base_url=self.config.base_url, max_retries=0, timeout=self.config.request_timeout_s
                )
            context = self._fit_context()
            self._requests += 1
            base = {
                "request": self._requests,
                "reply": reply_no,
                "attempt": attempt,
                "model": self.config.model,
                "started_at": time.time(),
                "messages": len(self._messages),
                "images": self._images_sent,
                **context,
            }
            t0 = time.monotonic()
            try:
                response = await self._race(self._client.chat.completions.create(**self._kwargs()), stop, deadline)
                reply, record = self._parse(response, base, time.monotonic() - t0)
            except _Abort as abort:
                what = "cancelled" if abort.kind == "cancelled" else "the episode's wall budget ran out"
                self._log(LLMCall(**base, ok=False, latency_s=time.monotonic() - t0, error_kind=abort.kind, error=f"request aborted: {what}"))
                raise PlannerStop(abort.kind, f"request aborted: {what}") from None
            except Exception as exc:  # noqa: BLE001 - every request failure is classified below
                latency = time.monotonic() - t0
                err = classify(exc)
                if err.kind == "context_overflow":
                    room = completion_room(err.message)
                    current = self._max_tokens()
                    if room is not None and room - 16 >= self.config.min_max_tokens and (current is None or room - 16 < current):
                        self._max_tokens_cap = room - 16
                        self._log(
                            LLMCall(
                                **base, ok=False, latency_s=latency, error_kind="context_overflow",
                                error=f"{err.message} | retrying with max_tokens={self._max_tokens_cap}",
                                status_code=err.status_code, retry_in_s=0.0,
                            )
                        )
                        logger.info("context nearly full: max_tokens lowered to %d", self._max_tokens_cap)
                        continue
                if err.kind != "transient" or attempt >= self.config.retry.max_attempts:
                    self._log(LLMCall(**base, ok=False, latency_s=latency, error_kind=err.kind, error=err.message, status_code=err.status_code))
                    if err.kind == "context_overflow":
                        raise PlannerStop("context_overflow", err.message) from None
                    if err.kind == "transient":
                        raise PlannerStop("planner_error", f"{attempt} attempts failed; the last: {err.message}") from None
                    raise PlannerStop("planner_error", err.message) from None
                delay = self.config.retry.delay(attempt, self._rng, err.retry_after_s)
                self._log(
                    LLMCall(
                        **base, ok=False, latency_s=latency, error_kind="transient", error=err.message,
                        status_code=err.status_code, retry_in_s=round(delay, 3),
                    )
                )
                logger.warning("LLM request %d failed (%s); retry %d in %.2f s", self._requests, err.message[:200], attempt, delay)
                try:
                    await self._race(asyncio.sleep(delay), stop, deadline)
                except _Abort as abort:
                    raise PlannerStop(abort.kind, "stopped while waiting to retry") from None
                continue
            self._log(record)
            if record.usage is not None and record.usage.prompt_tokens > 0:
                self._counted = (len(self._messages), record.usage.prompt_tokens)
                if self.config.context_window is not None:
                    ours = self._tools_tokens + sum(estimate_message_tokens(m) for m in self._messages)
                    self._scale = max(1.0, record.usage.prompt_tokens / max(1, ours))
            assistant: dict[str, Any] = {"role": "assistant", "content": reply.text or (None if reply.tool_calls else "")}
            if self.config.replay_reasoning and record.reasoning:
                assistant["reasoning_content"] = record.reasoning
            if reply.tool_calls:
                assistant["tool_calls"] = [
                    {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                    for tc in reply.tool_calls
                ]
            self._messages.append(assistant)
            return reply

    def _parse(self, response: Any, base: dict[str, Any], latency: float) -> tuple[Reply, LLMCall]:
        choices = getattr(response, "choices", None)
        if not choices:
            raise MalformedResponse("the reply has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise MalformedResponse("the reply's first choice has no message")
        finish_reason = getattr(choice, "finish_reason", None)
        text = message.content or ""
        extra = getattr(message, "model_extra", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        calls: list[ToolCall] = []
        for k, tc in enumerate(message.tool_calls or [], start=1):
            call_id = getattr(tc, "id", None) or f"call_{base['reply']}_{k}"
            function = getattr(tc, "function", None)
            if function is None:
                calls.append(ToolCall(call_id, str(getattr(tc, "type", "?")), "", error="unsupported tool call type; use the `python` function. Nothing ran."))
                continue
            call = parse_tool_call(call_id, function.name, function.arguments)
            if call.error and finish_reason == "length":
                call = ToolCall(call.id, call.name, call.arguments, error=call.error + " (Your reply hit the token limit and was cut: write shorter cells.)")
            calls.append(call)
        usage = None
        reasoning_estimated = False
        u = getattr(response, "usage", None)
        if u is not None:
            ptd = getattr(u, "prompt_tokens_details", None)
            ctd = getattr(u, "completion_tokens_details", None)
            usage = Usage(
                prompt_tokens=int(u.prompt_tokens or 0),
                cached_tokens=int(getattr(ptd, "cached_tokens", None) or 0),
                completion_tokens=int(u.completion_tokens or 0),
                reasoning_tokens=int(getattr(ctd, "reasoning_tokens", None) or 0),
            )
            if usage.reasoning_tokens == 0 and isinstance(reasoning, str) and reasoning:
                # SGLang's reasoning parser returns the text but no count: estimate it (bounded by the output).
                estimated = estimate_message_tokens({"content": reasoning}) - 4
                usage = replace(usage, reasoning_tokens=min(usage.completion_tokens, max(0, estimated)))
                reasoning_estimated = True
        cost = self._prices.cost(self.config.model, usage) if usage is not None else None
        record = LLMCall(
            **base,
            ok=True,
            latency_s=latency,
            usage=usage,
            cost_usd=cost,
            finish_reason=finish_reason,
            response_id=getattr(response, "id", None),
            text=text or None,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            reasoning_tokens_estimated=reasoning_estimated,
            tool_calls=tuple({"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls),
        )
        return Reply(text=text, tool_calls=tuple(calls), call=record), record
