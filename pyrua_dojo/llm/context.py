"""Keeping a conversation within the model's context window: a token estimate and the shortening rule.

The estimate. The server counts the prompt of every reply it sends (`usage.prompt_tokens`); that count covers all
messages up to that request. The tokens of messages added since are estimated (text: UTF-8 bytes / 3, which
over-counts English and code for the tokenizers of the models we serve; an image: one token per 28 x 28 pixel
patch of its size, as Qwen-VL-style encoders count, plus 8), multiplied by how much the server's last count
exceeded our estimate of the same request (never less than 1), and raised by `margin`. Before the first reply, and
after a shortening changed earlier messages, the whole conversation is estimated that way.

The rule, applied only when the estimate plus `max_tokens` exceeds the window, in this order until a fifth of the
room is free again (so that it runs seldom: each run breaks the server's prefix cache):
  1. older cell images are replaced by a short text, oldest first;
  2. the middle of long older tool outputs is dropped (the first and last `keep_chars` characters stay), oldest
     first;
  3. the oldest exchanges (an assistant reply, its tool results and the images that followed them) are dropped
     whole, oldest first.
Never touched: the system prompt, the first user message (the task card and its images) and the messages of the
last `keep_last` exchanges. The model is told what was dropped in a user message at the end of the conversation.
If the conversation still does not fit, the planner stops with `context_overflow`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyrua_dojo.runtime.images import image_size

__all__ = ["ContextFit", "Shortening", "estimate_message_tokens", "fit_to_window", "image_tokens"]

TEXT_BYTES_PER_TOKEN = 3.0
IMAGE_PATCH_PX = 28
IMAGE_OVERHEAD_TOKENS = 8
MESSAGE_OVERHEAD_TOKENS = 4
DROPPED_IMAGE_TEXT = "[image dropped to fit the context window]"


@dataclass(frozen=True)
class Shortening:
    """What one pass of the rule removed, as recorded in llm_calls.jsonl and told to the model."""

    images_dropped: int
    outputs_trimmed: int
    chars_dropped: int
    exchanges_dropped: int
    tokens_before: int
    tokens_after: int

    def describe(self, window: int) -> str:
        parts = []
        if self.images_dropped:
            parts.append(f"{self.images_dropped} older image(s)")
        if self.outputs_trimmed:
            parts.append(f"the middle of {self.outputs_trimmed} older cell output(s) ({self.chars_dropped:,} characters)")
        if self.exchanges_dropped:
            parts.append(f"the {self.exchanges_dropped} oldest exchange(s) (your cells and their results)")
        return (
            f"[Context: to fit the {window:,}-token window, {', '.join(parts)} were dropped from the conversation. "
            "Your variables in the Python session are unchanged.]"
        )


@dataclass(frozen=True)
class ContextFit:
    """The estimate for the request about to be sent, and the shortening applied (None: none was needed)."""

    estimated_tokens: int
    fits: bool
    shortening: Shortening | None = None


def image_tokens(url: str) -> int:
    """Estimated tokens of one image part (a data URL): one per 28 x 28 patch, plus a small overhead."""
    size = None
    if url.startswith("data:") and "," in url:
        try:
            size = image_size(base64.b64decode(url.split(",", 1)[1][:65536] + "=="))
        except ValueError:  # not base64
            size = None
    w, h = size if size else (640, 480)
    return math.ceil(w / IMAGE_PATCH_PX) * math.ceil(h / IMAGE_PATCH_PX) + IMAGE_OVERHEAD_TOKENS


def _text_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / TEXT_BYTES_PER_TOKEN)


def estimate_message_tokens(message: Mapping[str, Any]) -> int:
    """Estimated tokens of one chat message (text, images, tool calls)."""
    total = MESSAGE_OVERHEAD_TOKENS
    content = message.get("content")
    if isinstance(content, str):
        total += _text_tokens(content)
    elif isinstance(content, list):
        for part in content:
            if part.get("type") == "image_url":
                total += image_tokens(str(part.get("image_url", {}).get("url", "")))
            else:
                total += _text_tokens(str(part.get("text", "")))
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {})
        total += _text_tokens(str(fn.get("name", ""))) + _text_tokens(str(fn.get("arguments", ""))) + 4
    if message.get("reasoning_content"):
        total += _text_tokens(str(message["reasoning_content"]))
    return total


def _exchanges(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) index ranges of the exchanges after the first two messages: an assistant message and the
    tool / user messages that follow it up to the next assistant message."""
    out: list[tuple[int, int]] = []
    start = None
    for i in range(2, len(messages)):
        if messages[i].get("role") == "assistant":
            if start is not None:
                out.append((start, i))
            start = i
    if start is not None:
        out.append((start, len(messages)))
    return out


def fit_to_window(
    messages: list[dict[str, Any]],
    *,
    window: int,
    max_tokens: int,
    fixed_tokens: int,
    known_prefix: tuple[int, int] | None = None,
    margin: float = 0.1,
    scale: float = 1.0,
    keep_last: int = 2,
    keep_chars: int = 1500,
    headroom: float = 0.2,
) -> ContextFit:
    """Shorten `messages` in place (see the module docstring) so that the estimate plus `max_tokens` fits `window`.

    fixed_tokens: what every request carries besides the messages (the tool definitions).
    known_prefix: (n, tokens): the server counted `tokens` for a request whose messages were the first n of these.
    scale: how many of the server's tokens one estimated token turned out to be on the last counted request (at
        least 1): a server that counts images or text more heavily than the estimate raises every later estimate.
    headroom: once shortening is needed, it goes on until this fraction of the room is free again, so that it
        happens seldom (each shortening invalidates the server's prefix cache from the first changed message).
    """
    factor = max(1.0, scale) * (1.0 + margin)

    costs = [estimate_message_tokens(m) for m in messages]

    def estimate() -> int:
        if known_prefix is not None and known_prefix[0] <= len(messages):
            n, counted = known_prefix
            est = counted + sum(costs[n:]) * factor
        else:
            est = (fixed_tokens + sum(costs)) * factor
        return int(math.ceil(est))

    budget = window - max_tokens
    before = estimate()
    if before <= budget:
        return ContextFit(before, True)
    goal = int(budget * (1.0 - headroom))
    # Shortening edits earlier messages, so the server's count of the old prefix no longer applies.
    known_prefix = None
    exchanges = _exchanges(messages)
    protected_from = exchanges[-keep_last][0] if len(exchanges) >= keep_last else 2
    images = trimmed = chars = dropped = 0

    # 1. older images
    for i in range(2, protected_from):
        content = messages[i].get("content")
        if estimate() <= goal:
            break
        if messages[i].get("role") != "user" or not isinstance(content, list):
            continue
        for k, part in enumerate(content):
            if part.get("type") == "image_url":
                content[k] = {"type": "text", "text": DROPPED_IMAGE_TEXT}
                images += 1
                costs[i] = estimate_message_tokens(messages[i])
                if estimate() <= goal:
                    break
    # 2. the middle of long older outputs
    for i in range(2, protected_from):
        if estimate() <= goal:
            break
        m = messages[i]
        text = m.get("content")
        if m.get("role") != "tool" or not isinstance(text, str) or len(text) <= 2 * keep_chars + 200:
            continue
        cut = len(text) - 2 * keep_chars
        m["content"] = text[:keep_chars] + f"\n[... {cut:,} characters dropped to fit the context window ...]\n" + text[-keep_chars:]
        costs[i] = estimate_message_tokens(m)
        trimmed += 1
        chars += cut
    # 3. the oldest exchanges, whole
    while estimate() > goal:
        exchanges = _exchanges(messages)
        if len(exchanges) <= keep_last:
            break
        start, end = exchanges[0]
        del messages[start:end]
        del costs[start:end]
        dropped += 1
    after = estimate()
    shortening = Shortening(images, trimmed, chars, dropped, before, after)
    if images or trimmed or dropped:
        messages.append({"role": "user", "content": shortening.describe(window)})
        costs.append(estimate_message_tokens(messages[-1]))
        after = estimate()
        shortening = Shortening(images, trimmed, chars, dropped, before, after)
    return ContextFit(after, after <= budget, shortening)
