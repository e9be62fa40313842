"""`pyrua-dojo view RUN_DIR`: one episode's run directory as a static, self-contained HTML page.

The page shows what a person debugging an episode wants in one scroll: the outcome and its counts, the prompt
(collapsed), the task card and its images, every turn (cell code, output, images, steps, the LLM reply that wrote
it and its usage), steps per cell against the step limit, every LLM request (tokens, latency, cost), the robo calls,
the life-cycle events, and the camera frames of the episode in step order per camera. It reads only the files
`pyrua_dojo.runtime.trace` writes (plus an agent record's fields merged into result.json, and any `frames/` images or
`*.mp4` videos next to them), and works on a run that was killed mid-episode.
"""

from __future__ import annotations

import json

import re
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pyrua_dojo.runtime.agent import describe_end
from pyrua_dojo.evaluate.htmlpage import ImageRef, Page, esc, fmt_num, pretty_json, table
from pyrua_dojo.runtime.trace import read_jsonl

__all__ = ["EpisodeRecord", "Frame", "load_episode", "render_view", "run_cli", "write_view"]

DEFAULT_NAME = "view.html"
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
_STEP_RE = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Frame:
    """One camera image of the episode: where it came from (card, a cell, frames/), camera, step and file."""

    path: Path
    camera: str
    step: int | None
    origin: str  # "card", "cell N", "frames"
    label: str = ""


@dataclass(frozen=True)
class EpisodeRecord:
    """Everything a run directory holds, read back (lists of plain JSON records, in file order)."""

    run_dir: Path
    result: Mapping[str, Any]
    card: Mapping[str, Any] | None
    prompt: str | None
    turns: tuple[Mapping[str, Any], ...]
    llm_calls: tuple[Mapping[str, Any], ...]
    calls: tuple[Mapping[str, Any], ...]
    host_calls: tuple[Mapping[str, Any], ...]
    events: tuple[Mapping[str, Any], ...]
    frames: tuple[Frame, ...]
    videos: tuple[Path, ...]

    @property
    def meta(self) -> Mapping[str, Any]:
        meta = self.result.get("meta")
        return meta if isinstance(meta, Mapping) else {}

    @property
    def step_limit(self) -> int | None:
        for value in (self.result.get("step_limit"), self.meta.get("step_limit"), (self.card or {}).get("step_limit")):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    @property
    def steps_used(self) -> int | None:
        episode = self.result.get("episode")
        counts = self.result.get("counts")
        for value in (
            self.result.get("steps_used"),
            episode.get("steps_used") if isinstance(episode, Mapping) else None,
            counts.get("steps_used") if isinstance(counts, Mapping) else None,
        ):
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        cells = [int(t["steps_after"]) for t in self.turns if isinstance(t.get("steps_after"), int)]
        return max(cells) if cells else None


def _read_json(path: Path) -> Any:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def _frame_step(name: str) -> int | None:
    numbers = _STEP_RE.findall(name)
    return int(numbers[-1]) if numbers else None


def _frames_dir(run_dir: Path) -> list[Frame]:
    """Images under `frames/`: `frames/<camera>/<...step>.png` or `frames/<camera>_<...step>.png`."""
    root = run_dir / "frames"
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() not in _IMAGE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(root)
        if len(rel.parts) > 1:
            camera = rel.parts[0]
        else:
            camera = re.sub(r"[_-]?\d+$", "", path.stem) or "frames"
        out.append(Frame(path, camera, _frame_step(path.stem), "frames"))
    return out


def load_episode(run_dir: Path | str) -> EpisodeRecord:
    """Read a run directory; raises ValueError when it is not one (no readable result.json)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ValueError(f"run directory not found: {run}")
    result_path = run / "result.json"
    if not result_path.is_file():
        raise ValueError(f"{run} is not a run directory: it has no result.json")
    result = _read_json(result_path)
    if not isinstance(result, dict):
        raise ValueError(f"{result_path}: expected a JSON object, got {type(result).__name__}")
    card = None
    if (run / "card.json").is_file():
        card_data = _read_json(run / "card.json")
        card = card_data if isinstance(card_data, dict) else None
    prompt_file = run / "prompt.txt"
    prompt = prompt_file.read_text(encoding="utf-8", errors="replace") if prompt_file.is_file() else None
    turns = tuple(read_jsonl(run / "turns.jsonl"))
    frames: list[Frame] = []
    if card is not None:
        files = card.get("image_files") or []
        infos = card.get("images") or []
        for k, rel in enumerate(files):
            info = infos[k] if k < len(infos) and isinstance(infos[k], Mapping) else {}
            frames.append(
                Frame(run / str(rel), str(info.get("source") or Path(str(rel)).stem), _int(info.get("step"), 0), "card",
                      str(info.get("label") or ""))
            )
    for turn in turns:
        for image in turn.get("images") or []:
            if isinstance(image, Mapping) and image.get("file"):
                frames.append(
                    Frame(run / str(image["file"]), str(image.get("source") or "image"), _int(image.get("step"), None),
                          f"cell {turn.get('cell', '?')}", str(image.get("label") or ""))
                )
    frames.extend(_frames_dir(run))
    videos = tuple(sorted(p for p in run.glob("*.mp4") if p.is_file()))
    return EpisodeRecord(
        run_dir=run,
        result=result,
        card=card,
        prompt=prompt,
        turns=turns,
        llm_calls=tuple(read_jsonl(run / "llm_calls.jsonl")),
        calls=tuple(read_jsonl(run / "calls.jsonl")),
        host_calls=tuple(read_jsonl(run / "host_calls.jsonl")),
        events=tuple(read_jsonl(run / "events.jsonl")),
        frames=tuple(frames),
        videos=videos,
    )


def _int(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _sub(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`record[key]` when it is an object, else an empty one (records from older or broken runs vary)."""
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def _usage(call: Mapping[str, Any]) -> Mapping[str, Any]:
    return _sub(call, "usage")


def _badge(text: Any, cls: str | None = None) -> str:
    klass = re.sub(r"[^a-z_]", "", str(cls if cls is not None else text).lower())
    return f'<span class="badge {klass}">{esc(text)}</span>'


def _fact(value: str, label: str) -> str:
    return f'<div class="fact"><b>{value}</b><span>{esc(label)}</span></div>'


def _cost(value: Any) -> str:
    return f"${value:.4f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


# ----------------------------------------------------------------------------------------------------- sections


def _title(ep: EpisodeRecord) -> str:
    meta, res = ep.meta, ep.result
    task = res.get("task") or meta.get("task") or (ep.card or {}).get("task") or "episode"
    bits = [str(task)]
    seed = res.get("seed", meta.get("seed"))
    if seed is not None:
        bits.append(f"seed {seed}")
    layout = res.get("layout_id", meta.get("layout_id", (ep.card or {}).get("layout")))
    if layout is not None:
        bits.append(f"layout {layout}")
    if meta.get("env_idx") is not None:
        bits.append(f"env {meta.get('env_idx')}")
    return " · ".join(bits)


def _header(page: Page, ep: EpisodeRecord) -> None:
    res = ep.result
    status = str(res.get("status", "?"))
    success = res.get("success")
    outcome = res.get("outcome")
    page.add(f"<h1>{esc(_title(ep))}{_badge(status)}"
             + (_badge("success") if success is True else _badge("fail") if success is False else "") + "</h1>")
    reason = res.get("reason")
    page.add(f'<p class="muted">{esc(describe_end(status, success))}'
             + (f" · recorded reason: {esc(reason)}" if reason else "")
             + (f" · outcome: {esc(outcome)}" if outcome else "") + "</p>")
    if status == "running":
        page.add('<p class="note">result.json still says "running": the episode was interrupted or is still '
                 "going; the page shows what was written so far.</p>")
    tokens, counts, timing = _sub(res, "tokens"), _sub(res, "counts"), _sub(res, "timing")
    prompt_tokens = tokens.get("prompt_tokens", sum(_usage(c).get("prompt_tokens", 0) or 0 for c in ep.llm_calls))
    cached = tokens.get("cached_tokens", sum(_usage(c).get("cached_tokens", 0) or 0 for c in ep.llm_calls))
    completion = tokens.get("completion_tokens", sum(_usage(c).get("completion_tokens", 0) or 0 for c in ep.llm_calls))
    cells = [t for t in ep.turns if t.get("kind") == "cell"]
    limit = ep.step_limit
    used = ep.steps_used
    facts = [
        _fact(esc(f"{res['score']:.2f}") if isinstance(res.get("score"), (int, float)) else "-", "episode score"),
        _fact(f"{fmt_num(used)} / {fmt_num(limit)}", "steps used / limit"),
        _fact(fmt_num(counts.get("llm_calls", res.get("llm_calls"))), "LLM calls (counted)"),
        _fact(fmt_num(len(ep.llm_calls)), "LLM requests"),
        _fact(fmt_num(len(cells)), "cells"),
        _fact(fmt_num(prompt_tokens), f"input tokens ({fmt_num(cached)} cached)"),
        _fact(fmt_num(completion), "output tokens"),
        _fact(_cost(res.get("cost_usd")), "cost"),
        _fact(fmt_num(res.get("wall_s"), 1, unit=" s"), "wall time"),
        _fact(fmt_num(timing.get("llm_s"), 1, unit=" s"), "waiting for the LLM"),
        _fact(esc(res.get("planner") or ep.meta.get("planner") or "-"), "planner"),
        _fact(esc(ep.meta.get("model") or next((c.get("model") for c in ep.llm_calls if c.get("model")), None)
                  or "-"), "model"),
    ]
    twin = _sub(res, "twin")
    if twin:  # the twin's conditions (agent records of play / eval): how far from an oracle the episode was
        facts.append(_fact(esc(twin.get("seg_noise", "-")), "segmentation noise"))
        facts.append(_fact(esc(twin.get("station", "-")), "station"))
    page.add(f'<div class="facts">{"".join(facts)}</div>')
    _confinement(page, ep)
    page.add('<nav class="toc"><a href="#prompt">prompt</a><a href="#card">task card</a><a href="#turns">turns</a>'
             '<a href="#steps">steps per cell</a><a href="#settings">model settings</a><a href="#llm">LLM calls</a><a href="#calls">robo calls</a>'
             '<a href="#events">events</a><a href="#frames">camera frames</a><a href="#result">result.json</a></nav>')


def _prompt(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="prompt">Prompt</h2>')
    if ep.prompt is None:
        page.add('<p class="muted">No prompt.txt.</p>')
        return
    sections = _sub(_sub(ep.result, "prompt"), "sections")
    parts = ", ".join(f"{esc(k)} {fmt_num(v)}" for k, v in sections.items())
    page.add(
        f"<details><summary>prompt.txt: {fmt_num(len(ep.prompt))} characters"
        f"{' (' + parts + ')' if parts else ''}, about {fmt_num((len(ep.prompt) + 3) // 4)} tokens</summary>"
        f'<pre class="prompt">{esc(ep.prompt)}</pre></details>'
    )


def _card(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="card">Task card</h2>')
    if ep.card is None:
        page.add('<p class="muted">No card.json.</p>')
        return
    card = ep.card
    page.add(f'<div class="card"><h3>{esc(card.get("instruction") or "")}</h3>')
    if card.get("text"):
        page.add(f"<pre>{esc(card['text'])}</pre>")
    figures = [page.figure(ImageRef(f.path, f"{f.camera} @ step {f.step} {f.label}".strip()), "big")
               for f in ep.frames if f.origin == "card"]
    if figures:
        page.add(f'<div class="images">{"".join(figures)}</div>')
    page.add("</div>")


def _llm_line(calls: Sequence[Mapping[str, Any]]) -> str:
    """One line of usage for the request(s) behind one reply."""
    if not calls:
        return ""
    last = calls[-1]
    u = _usage(last)
    retries = len(calls) - 1
    return (
        f"LLM reply {esc(last.get('reply'))}: {fmt_num(last.get('latency_s'), 2, unit=' s')}, "
        f"in {fmt_num(u.get('prompt_tokens'))} (cached {fmt_num(u.get('cached_tokens'))}), "
        f"out {fmt_num(u.get('completion_tokens'))}, {_cost(last.get('cost_usd'))}"
        + (f", after {retries} failed attempt{'s' if retries > 1 else ''}" if retries else "")
    )


def _turns(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="turns">Turns</h2>')
    if not ep.turns:
        page.add('<p class="muted">No turns recorded.</p>')
        return
    by_reply: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for call in ep.llm_calls:
        by_reply[call.get("reply")].append(call)
    calls_by_cell: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for call in ep.calls:
        calls_by_cell[call.get("cell")].append(call)
    shown_replies: set[Any] = set()
    for turn in ep.turns:
        kind = str(turn.get("kind", "?"))
        reply = turn.get("reply")
        llm = by_reply.get(reply, [])
        anchor = f"cell-{turn.get('cell')}" if kind == "cell" else f"turn-{kind}-{reply}"
        page.add(f'<div class="card turn {esc(kind)}" id="{esc(anchor)}">')
        if kind == "cell":
            steps = turn.get("steps_used")
            head = (f"Cell {esc(turn.get('cell'))}{_badge(turn.get('status', '?'))}"
                    f' <span class="muted">reply {esc(reply)} · {fmt_num(steps)} steps '
                    f"({fmt_num(turn.get('steps_before'))} → {fmt_num(turn.get('steps_after'))}) · "
                    f"{fmt_num(turn.get('wall_s'), 2, unit=' s')}</span>")
        else:
            head = f"{esc(kind.replace('_', ' ').capitalize())}{_badge(turn.get('status') or kind)}" + (
                f' <span class="muted">reply {esc(reply)}</span>' if reply is not None else "")
        page.add(f"<h3>{head}</h3>")
        if llm and reply not in shown_replies:
            shown_replies.add(reply)
            page.add(f'<div class="muted llm">{_llm_line(llm)}</div>')
            last = llm[-1]
            if last.get("reasoning"):
                page.add(f"<details><summary>reasoning</summary><pre>{esc(last['reasoning'])}</pre></details>")
            if last.get("text"):
                page.add(f"<details open><summary>assistant text</summary><pre>{esc(last['text'])}</pre></details>")
        if kind == "cell":
            page.add(f'<pre class="code">{esc(turn.get("code", ""))}</pre>')
            page.add(f'<pre class="output">{esc(turn.get("text", ""))}</pre>')
            figures = [
                page.figure(
                    ImageRef(ep.run_dir / str(im.get("file")),
                             str(im.get("label") or f"{im.get('source', '')} @ step {im.get('step')}")),
                    "big",
                )
                for im in turn.get("images") or []
                if isinstance(im, Mapping) and im.get("file")
            ]
            if figures:
                page.add(f'<div class="images">{"".join(figures)}</div>')
            if turn.get("dropped_images"):
                page.add(f'<p class="muted">{esc(turn["dropped_images"])} image(s) dropped (per-cell limit).</p>')
            robo = calls_by_cell.get(turn.get("cell"), [])
            if robo:
                page.add(f"<details><summary>{len(robo)} robo call{'s' if len(robo) != 1 else ''}</summary>"
                         + _calls_table(robo) + "</details>")
        else:
            for key in ("assistant_text", "arguments", "summary", "text"):
                if turn.get(key):
                    page.add(f'<pre>{esc(key.replace("_", " "))}: {esc(turn[key])}</pre>')
        page.add("</div>")


def _call_name(call: Mapping[str, Any]) -> str:
    return str(call.get("call") or call.get("tool") or "?")


def _calls_table(calls: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for c in calls:
        args = c.get("args", c.get("kwargs"))
        result = c.get("result")
        rows.append([
            fmt_num(c.get("t"), 2),
            esc(c.get("cell")),
            esc(_call_name(c)),
            f"<code>{esc(pretty_json(args) if args is not None else '')}</code>",
            fmt_num(c.get("steps")),
            fmt_num(c.get("step")),
            f"<details><summary>result</summary><pre>{esc(pretty_json(result))}</pre></details>"
            if result is not None else "",
        ])
    return table(["t (s)", "cell", "call", "arguments", "steps", "at step", "result"], rows, numeric=(0, 4, 5))


def _steps(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="steps">Steps per cell</h2>')
    cells = [t for t in ep.turns if t.get("kind") == "cell"]
    if not cells:
        page.add('<p class="muted">No cells ran.</p>')
        return
    limit = ep.step_limit
    rows = []
    for t in cells:
        used = t.get("steps_used")
        after = t.get("steps_after")
        width = 0.0
        if limit and isinstance(used, int):
            width = max(0.0, min(100.0, used / limit * 100))
        bar = f'<div class="bar" title="{esc(used)} of {esc(limit)}"><i style="width:{width:.1f}%"></i></div>'
        rows.append([
            f'<a href="#cell-{esc(t.get("cell"))}">{esc(t.get("cell"))}</a>',
            _badge(t.get("status", "?")),
            fmt_num(used),
            bar,
            fmt_num(after),
            fmt_num(limit - after) if limit and isinstance(after, int) else "-",
            fmt_num(t.get("wall_s"), 2),
        ])
    total = sum(t.get("steps_used") or 0 for t in cells if isinstance(t.get("steps_used"), int))
    rows.append(["<total>all", "", fmt_num(total), "", fmt_num(ep.steps_used), fmt_num(limit), ""])
    page.add(table(["cell", "status", "steps", "share of the limit", "steps after", "left", "wall (s)"], rows,
                   numeric=(2, 4, 5, 6)))


def _settings(page: Page, ep: EpisodeRecord) -> None:
    """The model preset, the resolved LLM settings and every shortening of the conversation."""
    config = _sub(ep.result, "config")
    preset, llm = _sub(config, "preset"), _sub(config, "llm")
    shortenings = [c for c in ep.llm_calls if isinstance(c.get("shortening"), Mapping)]
    if not (preset or llm or shortenings):
        return
    page.add('<h2 id="settings">Model settings</h2>')
    if preset:
        page.add(f'<p>preset <b>{esc(preset.get("name"))}</b> <span class="muted">({esc(preset.get("file"))}): '
                 f'{esc(preset.get("source"))}</span></p>')
    else:
        page.add('<p class="muted">No preset: every setting came from deploy.yml and the overrides.</p>')
    if llm:
        keys = [k for k in llm if k not in ("retry", "headers")]
        page.add(table(["setting", "value"], [[esc(k), esc(json.dumps(llm[k]))] for k in keys]))
    if shortenings:
        rows = [[
            esc(c.get("request")), fmt_num(s.get("images_dropped")), fmt_num(s.get("outputs_trimmed")),
            fmt_num(s.get("chars_dropped")), fmt_num(s.get("exchanges_dropped")), fmt_num(s.get("tokens_before")),
            fmt_num(s.get("tokens_after")), fmt_num(s.get("window")),
        ] for c in shortenings for s in [c["shortening"]]]
        page.add(f"<p>The conversation was shortened {len(shortenings)} time(s) to fit the context window "
                 "(estimated tokens; the model was told each time):</p>")
        page.add(table(["before request", "images dropped", "outputs trimmed", "characters dropped",
                        "exchanges dropped", "tokens before", "tokens after", "window"], rows,
                       numeric=(1, 2, 3, 4, 5, 6, 7)))
    elif llm.get("context_window"):
        page.add(f'<p class="muted">The conversation never needed shortening (window '
                 f'{fmt_num(llm.get("context_window"))} tokens).</p>')


def _llm(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="llm">LLM calls</h2>')
    if not ep.llm_calls:
        page.add('<p class="muted">No LLM requests (a scripted or replayed run).</p>')
        return
    rows = []
    tot: dict[str, float] = defaultdict(float)
    cost_known = True
    for c in ep.llm_calls:
        u = _usage(c)
        for key in ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens"):
            tot[key] += u.get(key) or 0
        tot["latency_s"] += c.get("latency_s") or 0
        if c.get("ok") and c.get("cost_usd") is None:
            cost_known = False
        tot["cost_usd"] += c.get("cost_usd") or 0
        status = "ok" if c.get("ok") else (c.get("error_kind") or "error")
        rows.append([
            esc(c.get("request")),
            esc(c.get("reply")),
            esc(c.get("attempt")),
            _badge(status),
            esc(c.get("model")),
            fmt_num(u.get("prompt_tokens")),
            fmt_num(u.get("cached_tokens")),
            fmt_num(u.get("completion_tokens")),
            fmt_num(u.get("reasoning_tokens")),
            fmt_num(c.get("latency_s"), 2),
            _cost(c.get("cost_usd")),
            esc(c.get("finish_reason") or c.get("error") or ""),
        ])
    rows.append([
        "<total>total", "", "", "", "",
        fmt_num(int(tot["prompt_tokens"])), fmt_num(int(tot["cached_tokens"])),
        fmt_num(int(tot["completion_tokens"])), fmt_num(int(tot["reasoning_tokens"])),
        fmt_num(tot["latency_s"], 2), _cost(tot["cost_usd"]) + ("" if cost_known else " (some unknown)"), "",
    ])
    page.add(table(
        ["request", "reply", "attempt", "status", "model", "input", "cached", "output", "reasoning", "latency (s)",
         "cost", "finish / error"],
        rows, numeric=(5, 6, 7, 8, 9, 10),
    ))


def _robo_calls(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="calls">Robo calls</h2>')
    if not ep.calls:
        page.add('<p class="muted">No robo calls recorded.</p>')
        return
    counts: dict[str, int] = defaultdict(int)
    steps: dict[str, int] = defaultdict(int)
    for c in ep.calls:
        counts[_call_name(c)] += 1
        n = c.get("steps")
        steps[_call_name(c)] += n if isinstance(n, int) and not isinstance(n, bool) else 0
    rows = [[esc(k), fmt_num(counts[k]), fmt_num(steps[k])] for k in sorted(counts, key=lambda k: -counts[k])]
    page.add(table(["call", "count", "steps"], rows, numeric=(1, 2)))
    page.add(f"<details><summary>all {len(ep.calls)} calls</summary>{_calls_table(ep.calls)}</details>")
    if ep.host_calls:
        page.add(f"<details><summary>{len(ep.host_calls)} host reads (not agent code)</summary>"
                 f"{_calls_table(ep.host_calls)}</details>")


def _confinement(page: Page, ep: EpisodeRecord) -> None:
    """Which OS layers confined the cell kernel (result.json "kernel", else the first kernel_start event)."""
    kernel = ep.result.get("kernel")
    layers = kernel.get("layers") if isinstance(kernel, Mapping) else None
    if not isinstance(layers, Mapping):
        start = next((e for e in ep.events if e.get("kind") == "kernel_start"), None)
        layers = start.get("layers") if start is not None else None
    restarts = sum(1 for e in ep.events if e.get("kind") == "kernel_restart")
    if not isinstance(layers, Mapping):
        page.add('<p class="muted" id="confinement">cell kernel: no confinement recorded (cells ran in-process, '
                 "or the kernel never started)</p>")
        return
    parts = []
    for name, layer in layers.items():
        active = isinstance(layer, Mapping) and layer.get("active") is True
        detail = str(layer.get("detail", "")) if isinstance(layer, Mapping) else ""
        label = f"{name} on" if active else f"{name} OFF"
        parts.append(f'<span title="{esc(detail)}">{_badge(label, "event" if active else "fail")}</span>')
    more = f" · {restarts} kernel restart{'s' if restarts != 1 else ''} (see events)" if restarts else ""
    page.add(f'<p id="confinement">cell kernel confinement: {" ".join(parts)}{esc(more)}</p>')


def _events(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="events">Events</h2>')
    if not ep.events:
        page.add('<p class="muted">No events.</p>')
        return
    rows = []
    for e in ep.events:
        rest = {k: v for k, v in e.items() if k not in ("t", "kind")}
        detail = pretty_json(rest) if rest else ""
        if len(detail) > 400:
            detail_html = f"<details><summary>details</summary><pre>{esc(detail)}</pre></details>"
        else:
            detail_html = f"<code>{esc(detail)}</code>"
        rows.append([fmt_num(e.get("t"), 3), _badge(e.get("kind", "?"), "event"), detail_html])
    page.add(table(["t (s)", "event", "details"], rows, numeric=(0,)))


def _frames(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="frames">Camera frames</h2>')
    if not ep.frames and not ep.videos:
        page.add('<p class="muted">No camera frames.</p>')
        return
    by_camera: dict[str, list[Frame]] = defaultdict(list)
    for f in ep.frames:
        by_camera[f.camera].append(f)
    for camera in sorted(by_camera):
        frames = sorted(by_camera[camera], key=lambda f: (f.step if f.step is not None else -1))
        figures = [
            page.figure(ImageRef(f.path, f"step {f.step if f.step is not None else '?'} · {f.origin}"
                                 + (f" · {f.label}" if f.label else "")), "thumb")
            for f in frames
        ]
        page.add(f'<h3>{esc(camera)} <span class="muted">({len(frames)})</span></h3><div class="strip">'
                 f'{"".join(figures)}</div>')
    for video in ep.videos:
        import os

        rel = os.path.relpath(video.resolve(), page.out.resolve().parent)
        page.add(f'<p>video: <a href="{esc(Path(rel).as_posix())}">{esc(video.name)}</a></p>')


def _result(page: Page, ep: EpisodeRecord) -> None:
    page.add('<h2 id="result">result.json</h2>')
    page.add(f"<details><summary>raw</summary><pre>{esc(pretty_json(ep.result))}</pre></details>")


def render_view(ep: EpisodeRecord, out: Path, *, embed: bool = True) -> Page:
    """Build the page of an episode (not yet written); `out` is where it will be written."""
    page = Page(f"{_title(ep)} · pyrua-dojo", out, embed=embed)
    _header(page, ep)
    _prompt(page, ep)
    _card(page, ep)
    _turns(page, ep)
    _steps(page, ep)
    _settings(page, ep)
    _llm(page, ep)
    _robo_calls(page, ep)
    _events(page, ep)
    _frames(page, ep)
    _result(page, ep)
    if page.missing:
        note = f'<p class="note">{len(page.missing)} image file(s) referenced by the run are missing.</p>'
        page.parts.insert(1, note)
    return page


def write_view(run_dir: Path | str, out: Path | str | None = None, *, embed: bool = True) -> tuple[Path, Page]:
    """Write the page of `run_dir` to `out` (default `<run_dir>/view.html`); returns its path and the page."""
    ep = load_episode(run_dir)
    target = Path(out) if out is not None else ep.run_dir / DEFAULT_NAME
    if target.is_dir():
        target = target / DEFAULT_NAME
    page = render_view(ep, target, embed=embed)
    return page.write(), page


def run_cli(run_dir: str, *, out: str | None = None, link: bool = False, err: TextIO | None = None,
            stdout: TextIO | None = None) -> int:
    """`pyrua-dojo view RUN_DIR [--out FILE] [--link]`: write the page and print its path; exit 2 on bad input."""
    err = err or sys.stderr
    stdout = stdout or sys.stdout
    try:
        path, page = write_view(run_dir, out, embed=not link)
    except ValueError as exc:
        print(f"pyrua-dojo view: {exc}", file=err)
        return 2
    except OSError as exc:
        print(f"pyrua-dojo view: cannot write the page: {exc}", file=err)
        return 2
    for missing in page.missing:
        print(f"warning: missing image {missing}", file=err)
    size = path.stat().st_size
    print(f"{path} ({size / 1e6:.1f} MB, {page.images} images{', linked' if link else ', embedded'})", file=stdout)
    return 0
