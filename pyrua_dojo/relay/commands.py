"""`pyrua-dojo relay serve | show | reply | list` and the console planner: the outside side of the relay.

`show` prints what the model would see that is new since the last answer (the system prompt, the tools and the
card on the first turn; then each tool result and image), saves the images as PNG and prints their paths, and
waits for the next request. `reply` answers the waiting turn with a `python(code)` or `finish(status, summary)` call,
and refuses a turn that already has an answer. Both address a relay by its state directory (see
`pyrua_dojo.relay.server`). Exit codes of `show`: 0 a turn waits for an answer, 3 nothing new within --wait, 4 the
episode has ended, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyrua_dojo.runtime.atomic_files import create_once
from pyrua_dojo.relay.server import ANSWER_TIMEOUT_S, Relay, RelayDir, decode_data_url

__all__ = ["ShowResult", "console_loop", "find_relays", "reply", "run_cli", "show"]

SHOW_WAIT_S = 300.0
EXIT_TURN, EXIT_BAD, EXIT_NOTHING, EXIT_ENDED = 0, 2, 3, 4


@dataclass(frozen=True)
class ShowResult:
    """What `show` found: `kind` is "turn" (text is the turn, waiting for an answer), "nothing" or "ended"."""

    kind: str
    text: str
    turn: int | None = None

    @property
    def exit_code(self) -> int:
        return {"turn": EXIT_TURN, "nothing": EXIT_NOTHING, "ended": EXIT_ENDED}[self.kind]


def _pending(rd: RelayDir) -> int | None:
    for turn in rd.request_turns():
        if not rd.answer_file(turn).exists():
            return turn
    return None


def _save_image(rd: RelayDir, turn: int, k: int, url: str) -> str:
    decoded = decode_data_url(url)
    if decoded is None:
        return f"[image not saved: not a base64 data URL ({url[:60]}...)]"
    mime, data = decoded
    path = rd.images / f"turn{turn:04d}_{k:02d}.png"
    if not path.exists():
        if mime != "image/png":
            import cv2
            import numpy as np

            array = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
            if array is None:
                return f"[image not saved: {mime} could not be decoded]"
            ok, buf = cv2.imencode(".png", array)
            data = buf.tobytes()
        path.write_bytes(data)
    return str(path)


def _render_tools(tools: Any, body: dict[str, Any]) -> list[str]:
    lines = ["=== TOOLS (answer with exactly one call per turn) ==="]
    for t in tools or []:
        fn = t.get("function", {}) if isinstance(t, dict) else {}
        params = fn.get("parameters", {})
        names = ", ".join(params.get("properties", {}))
        lines.append(f"--- tool {fn.get('name')}({names}) ---")
        lines.append(str(fn.get("description", "")).rstrip())
        lines.append(f"parameters (JSON schema): {json.dumps(params, ensure_ascii=False)}")
    extra = {k: body[k] for k in ("tool_choice", "max_completion_tokens", "max_tokens") if k in body}
    if extra:
        lines.append(f"request settings: {json.dumps(extra)}")
    return lines


def _render_message(rd: RelayDir, turn: int, msg: dict[str, Any], counter: list[int]) -> list[str]:
    role = msg.get("role")
    if role == "system":
        head = "=== SYSTEM PROMPT ==="
    elif role == "tool":
        head = f"=== TOOL RESULT (of your call {msg.get('tool_call_id')}) ==="
    elif role == "assistant":
        head = "=== ASSISTANT (an earlier reply, as the client sends it back) ==="
    else:
        head = f"=== {str(role).upper()} MESSAGE ==="
    lines = [head]
    content = msg.get("content")
    if isinstance(content, str):
        lines.append(content.rstrip())
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                lines.append(str(part.get("text", "")).rstrip())
            elif part.get("type") == "image_url":
                counter[0] += 1
                url = (part.get("image_url") or {}).get("url", "")
                lines.append(f"[IMAGE -> {_save_image(rd, turn, counter[0], url)}]")
    for call in msg.get("tool_calls") or []:
        fn = call.get("function", {})
        lines.append(f"tool call {call.get('id')}: {fn.get('name')}({fn.get('arguments')})")
    return lines


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def render_turn(rd: RelayDir, turn: int) -> str:
    """The text of turn `turn`: what is new since the previous turn's request (all of it on the first turn)."""
    body = rd.request(turn)
    messages = body.get("messages", [])
    start, note, show_tools = 0, None, True
    answered = [t for t in range(turn - 1, 0, -1) if not (rd.answer(t) or {"closed": True}).get("closed")]
    if answered:  # new since the last turn that got an answer (a closed turn's request may come again)
        last = answered[0]
        prev = rd.request(last)
        prev_msgs = prev.get("messages", [])
        k = _common_prefix(prev_msgs, messages)
        if k == len(prev_msgs):
            start = k
            while start < len(messages) and messages[start].get("role") == "assistant":
                start += 1  # your own reply, echoed back by the client
        elif k > 0:
            start = k
            note = f"(earlier messages changed since turn {last}: showing from message {k + 1} of {len(messages)})"
        show_tools = prev.get("tools") != body.get("tools")
    state = rd.state()
    lines = [f"##### RELAY TURN {turn} ({rd.path}) #####"]
    if turn == 1:
        lines.append("You are the model of this episode. Below is everything the model receives; answer with one tool "
                     "call (see the end).")
    if note:
        lines.append(note)
    counter = [0]
    rest = messages[start:]
    if show_tools and rest and rest[0].get("role") == "system":
        lines += _render_message(rd, turn, rest[0], counter)
        rest = rest[1:]
    if show_tools:
        lines += _render_tools(body.get("tools"), body)
    for msg in rest:
        lines += _render_message(rd, turn, msg, counter)
    d = rd.path
    lines += [
        f"##### END OF TURN {turn}: waiting for your answer (closes after {state.get('answer_timeout_s', 0):g} s "
        "without one) #####",
        f"  python cell:  pyrua-dojo relay reply --relay {d} --turn {turn} --code CELL.py   (or --code - to read stdin)",
        f"  finish:       pyrua-dojo relay reply --relay {d} --turn {turn} --finish success|failure|stuck \"summary\"",
        f"  then:         pyrua-dojo relay show --relay {d}",
    ]
    return "\n".join(lines)


def render_end(rd: RelayDir) -> str:
    state = rd.state()
    out = state.get("outcome") or {}
    lines = [f"##### EPISODE ENDED ({rd.path}) #####"]
    lines.append(f"status: {out.get('status')}" + (f" - {out['detail']}" if out.get("detail") else ""))
    for key in ("success", "score", "steps", "agent_steps", "step_limit", "llm_calls", "cells", "reason", "failure",
                "error", "agent_error", "finish"):
        if out.get(key) is not None:
            value = json.dumps(out[key]) if isinstance(out[key], (dict, list)) else out[key]
            if key == "failure" and out.get("finish"):
                # Trial U: "failure: step limit" read as if the step limit caused it; the model had finished.
                value = f"{value} (how the benchmark booked it: after finish it runs out the remaining steps)"
            lines.append(f"{key}: {value}")
    if out.get("agent_steps") is not None and out.get("steps") is not None and out["steps"] != out["agent_steps"]:
        lines.append("  (steps: the episode's length as the benchmark ran it; after finish the arms hold still until "
                     "the benchmark ends the episode. agent_steps: the actions the agent's cells used)")
    if out.get("last_cell"):
        lines += ["the episode ended during the last cell; its output:", str(out["last_cell"])]
    if out.get("run_dir") or state.get("run_dir"):
        lines.append(f"run directory: {out.get('run_dir') or state.get('run_dir')}")
    if out.get("transcript"):
        lines.append(f"transcript: {out['transcript']}")
    lines.append("There is nothing more to answer in this episode.")
    return "\n".join(lines)


def show(relay: Path, *, wait_s: float = SHOW_WAIT_S, poll_s: float = 0.2) -> ShowResult:
    """The waiting turn, else wait up to `wait_s` for one or for the end (see the module docstring)."""
    rd = RelayDir(Path(relay).resolve())
    rd.state()  # ValueError when not a relay directory
    end = time.monotonic() + max(0.0, wait_s)
    while True:
        turn = _pending(rd)
        if turn is not None:
            text = render_turn(rd, turn)
            rd.shown_file(turn).write_text(text + "\n", encoding="utf-8")
            rd.log("shown", turn=turn)
            return ShowResult("turn", text, turn)
        state = rd.state()
        if state.get("state") == "ended":
            return ShowResult("ended", render_end(rd))
        if not _alive(state.get("pid")):
            return ShowResult("ended", f"##### EPISODE ENDED ({rd.path}) #####\nstatus: interrupted - the relay's "
                              f"process (pid {state.get('pid')}) is gone without recording an outcome (the episode "
                              "was stopped or crashed; it is not booked).\nThere is nothing more to answer.")
        if time.monotonic() >= end:
            last = rd.request_turns()
            doing = (f"turn {last[-1]} was answered; the cell is probably still running" if last
                     else "no request yet; the episode is probably still starting")
            return ShowResult("nothing", f"nothing new within {wait_s:g} s ({doing}). Run the same show command again.")
        time.sleep(poll_s)


def _finish_statuses(body: dict[str, Any]) -> list[str] | None:
    """The statuses the request's `finish` tool accepts (its enum); None when it offers no finish tool."""
    for tool in body.get("tools") or []:
        fn = tool.get("function", {}) if isinstance(tool, dict) else {}
        if fn.get("name") == "finish":
            enum = fn.get("parameters", {}).get("properties", {}).get("status", {}).get("enum")
            return [str(e) for e in enum] if isinstance(enum, list) else []
    return None


def _alive(pid: Any) -> bool:
    """Whether the relay's process still exists (relays and their answerers share a machine)."""
    import os

    if not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reply(
    relay: Path,
    *,
    code: str | None = None,
    finish: tuple[str, str] | None = None,
    turn: int | None = None,
    by: str = "relay reply",
) -> str:
    """Answer the waiting turn (or `turn`) with one call; ValueError (nothing written) on anything wrong."""
    if (code is None) == (finish is None):
        raise ValueError("give exactly one of --code or --finish")
    rd = RelayDir(Path(relay).resolve())
    state = rd.state()
    if code is not None:
        if not code.strip():
            raise ValueError("the cell is empty; nothing was sent")
        call = {"name": "python", "arguments": json.dumps({"code": code}, ensure_ascii=False)}
    pending = _pending(rd)
    if turn is None:
        if pending is None:
            why = "the episode has ended" if state.get("state") == "ended" else "no turn is waiting (run relay show)"
            raise ValueError(f"nothing to answer: {why}")
        turn = pending
    if not rd.request_file(turn).exists():
        raise ValueError(f"turn {turn} does not exist (turns so far: {rd.request_turns() or 'none'})")
    if finish is not None:
        status, summary = finish
        statuses = _finish_statuses(rd.request(turn))
        if statuses is None:
            raise ValueError(f"turn {turn}'s request offers no finish tool")
        if status not in statuses:
            raise ValueError(f"finish status must be one of {', '.join(statuses)}, got {status!r}")
        call = {"name": "finish", "arguments": json.dumps({"status": status, "summary": summary}, ensure_ascii=False)}
    existing = rd.answer(turn)
    if existing is not None:
        how = f"closed ({existing['closed']}: {existing.get('detail')})" if existing.get("closed") else "answered"
        raise ValueError(f"turn {turn} already has an answer: it was {how}; nothing was sent")
    record = {"turn": turn, "tool_calls": [call], "content": None, "by": by, "at": time.time()}
    if not create_once(rd.answer_file(turn), json.dumps(record, ensure_ascii=False).encode("utf-8")):
        raise ValueError(f"turn {turn} was answered or closed just now; nothing was sent")
    rd.log("answer", turn=turn, by=by, tool_call=call)
    what = f"python cell ({len(code.splitlines())} lines)" if code is not None else f"finish({call['arguments']})"
    return f"answered turn {turn}: {what}. Next: pyrua-dojo relay show --relay {rd.path}"


def find_relays(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every relay state directory under `root` with its relay.json, newest first."""
    found = []
    for state_file in Path(root).rglob("relay.json"):
        try:
            found.append((state_file.parent, RelayDir(state_file.parent).state()))
        except ValueError:
            continue
    return sorted(found, key=lambda x: -float(x[1].get("started_at") or 0))


# ------------------------------------------------------------------------------------------------- console


CONSOLE_HELP = """Type the cell's Python, then a line with only '.' to send it (Ctrl-D also sends).
Commands on the first line: :api (the robo API reference), :finish STATUS SUMMARY (success|failure|stuck),
:load FILE (send a file as the cell), :show (print the turn again), :help."""


def console_loop(relay: Path, *, read_line: Callable[[str], str] = input, out: Callable[[str], None] = print,
                 poll_s: float = 0.2) -> int:
    """A person plays the model at the terminal: show each turn, read the next cell, until the episode ends."""
    out(CONSOLE_HELP)
    while True:
        result = show(relay, wait_s=3600.0, poll_s=poll_s)
        if result.kind == "nothing":
            continue
        out(result.text)
        if result.kind == "ended":
            return 0
        while True:
            try:
                cell = _read_cell(read_line, out, result)
            except EOFError:
                out("(end of input: finishing the episode with status stuck)")
                cell = ("finish", ("stuck", "the console's input ended"))
            if cell is None:
                continue
            kind, value = cell
            try:
                if kind == "code":
                    msg = reply(relay, code=value, turn=result.turn, by="console")
                else:
                    msg = reply(relay, finish=value, turn=result.turn, by="console")
            except ValueError as exc:
                out(f"not sent: {exc}")
                if "already has an answer" in str(exc):
                    break
                continue
            out(msg.split(". Next:")[0])
            break


def _read_cell(read_line: Callable[[str], str], out: Callable[[str], None], shown: ShowResult) -> Any:
    lines: list[str] = []
    prompt = f"cell {shown.turn}> "
    while True:
        try:
            line = read_line(prompt if not lines else "...> ")
        except EOFError:
            if lines:
                return ("code", "\n".join(lines) + "\n")
            raise
        if not lines and line.strip().startswith(":"):
            word, _, rest = line.strip().partition(" ")
            if word == ":api":
                from pyrua_dojo.runtime.prompt.reference import robo_api_reference

                out(robo_api_reference() or "(the API reference is not available)")
            elif word == ":finish":
                status, _, summary = rest.strip().partition(" ")
                return ("finish", (status, summary.strip() or "finished from the console"))
            elif word == ":load":
                try:
                    return ("code", Path(rest.strip()).expanduser().read_text(encoding="utf-8"))
                except OSError as exc:
                    out(f"cannot read {rest.strip()!r}: {exc}")
            elif word == ":show":
                out(shown.text)
            else:
                out(CONSOLE_HELP)
            return None
        if line.strip() == ".":
            if not lines:
                out("(empty cell: type some Python first)")
                continue
            return ("code", "\n".join(lines) + "\n")
        lines.append(line)


# ------------------------------------------------------------------------------------------------- command line


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `pyrua-dojo relay ...`."""
    relay = sub.add_parser("relay", help="play the LLM from outside: an OpenAI-compatible endpoint, show and reply")
    kinds = relay.add_subparsers(dest="relay", required=True)

    serve = kinds.add_parser("serve", help="an OpenAI-compatible chat completions endpoint answered by relay reply")
    serve.add_argument("--dir", required=True, metavar="DIR", help="the relay's state directory (new)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="default: a free port (printed)")
    serve.add_argument("--answer-timeout", type=float, default=ANSWER_TIMEOUT_S,
                       help=f"seconds a turn waits for its answer before HTTP 408 (default {ANSWER_TIMEOUT_S:g})")
    serve.add_argument("--model", default="relay", help="the model id GET /v1/models lists")

    show_p = kinds.add_parser("show", help="print the waiting turn (new messages, images saved as PNG)")
    show_p.add_argument("--relay", required=True, metavar="DIR", dest="relay_dir", help="the relay's state directory")
    show_p.add_argument("--wait", type=float, default=SHOW_WAIT_S, help=f"seconds to wait for news (default {SHOW_WAIT_S:g})")

    reply_p = kinds.add_parser("reply", help="answer the waiting turn with a python cell or finish")
    reply_p.add_argument("--relay", required=True, metavar="DIR", dest="relay_dir", help="the relay's state directory")
    reply_p.add_argument("--turn", type=int, help="the turn being answered (refused if it is not waiting)")
    what = reply_p.add_mutually_exclusive_group(required=True)
    what.add_argument("--code", metavar="FILE", help="the cell's Python, from FILE or '-' for standard input")
    what.add_argument("--finish", nargs=2, metavar=("STATUS", "SUMMARY"), help="finish(status, summary)")

    list_p = kinds.add_parser("list", help="the relays under a directory (eval's --out, play's --run-root)")
    list_p.add_argument("root", nargs="?", default=".", help="where to look (default: here)")

    relay.set_defaults(func=run_cli)


def run_cli(args: argparse.Namespace) -> int:
    try:
        if args.relay == "serve":
            return _serve(args)
        if args.relay == "show":
            result = show(Path(args.relay_dir), wait_s=args.wait)
            try:
                print(result.text, flush=True)
            except BrokenPipeError:  # `relay show | head`: the reader has what it wanted
                import os

                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return result.exit_code
        if args.relay == "reply":
            if args.code is not None:
                code = sys.stdin.read() if args.code == "-" else Path(args.code).read_text(encoding="utf-8")
                print(reply(Path(args.relay_dir), code=code, turn=args.turn))
            else:
                print(reply(Path(args.relay_dir), finish=(args.finish[0], args.finish[1]), turn=args.turn))
            return 0
        if args.relay == "list":
            rows = find_relays(Path(args.root))
            if not rows:
                print(f"no relay under {args.root}")
            for path, st in rows:
                pending = _pending(RelayDir(path))
                status = st.get("state")
                if status == "ended":
                    status = f"ended ({(st.get('outcome') or {}).get('status')})"
                elif pending is not None:
                    status = f"turn {pending} waiting"
                print(f"{path}  {st.get('label') or ''}  {status}")
            return 0
    except (ValueError, OSError) as exc:
        print(f"relay {args.relay}: {exc}", file=sys.stderr)
        return EXIT_BAD
    return EXIT_BAD


def _serve(args: argparse.Namespace) -> int:
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    relay = Relay(Path(args.dir), host=args.host, port=args.port, answer_timeout_s=args.answer_timeout,
                  model=args.model).start()
    print(f"relay: serving {relay.url} (OpenAI chat completions; model {args.model!r})", flush=True)
    print(f"  show the next turn: pyrua-dojo relay show --relay {relay.dir.path}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        relay.end({"status": "relay_stopped", "detail": "relay serve was interrupted"})
    return 0
