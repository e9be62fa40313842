"""The run directory of one episode, written as things happen so that a crash loses nothing.

Layout (every `*.jsonl` is appended one JSON object per line and flushed at once):

    result.json        status, outcome, counts, tokens, cost, timing, configuration; rewritten atomically
                       (tmp + rename): "running" at start, after every cell, and final at the end
    prompt.txt         the exact prompt text (system prompt, then the task card), and prompt.sha256
    card.json, card/   the task card and its first images (lossless PNG)
    turns.jsonl        every tool call: cell code, output text, status, image files, steps used, timing
    images/            the images the code asked for, exactly as sent to the LLM
    llm_calls.jsonl    every HTTP request: usage, latency, cost, retries, errors, the reply
    calls.jsonl        every `robo` call made by agent code (via `record_call`)
    host_calls.jsonl   reads the host made for itself (feedback, images), kept apart from agent calls
    events.jsonl       life-cycle events: start, retries, cancellation, budget, end

Readers: `read_jsonl` tolerates a torn last line (a kill in the middle of a write); `load_run` says how far a
run got.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
from pyrua_dojo.runtime.atomic_files import write_atomic

__all__ = [
    "RESULT_SCHEMA",
    "RunSummary",
    "RunTrace",
    "jsonable",
    "load_run",
    "read_jsonl",
    "write_json_atomic",
]

RESULT_SCHEMA = "pyrua-dojo-run-v1"

_EXTENSIONS = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"}


class _Image(Protocol):
    """What the trace needs of an encoded image (cells.ImageAttachment satisfies it)."""

    label: str
    source: str
    step: int
    mime: str
    data: bytes
    width: int
    height: int


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data: numpy values become lists/numbers, dataclasses dicts, non-finite floats the
    strings "nan" / "inf" / "-inf" (strict JSON has no such numbers), anything else unknown its repr."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not isinstance(getattr(value, f.name), (bytes, bytearray))
        }
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return repr(value)


def _dumps(obj: Any) -> str:
    return json.dumps(jsonable(obj), ensure_ascii=False, allow_nan=False)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` via a temporary file and a rename, so a reader never sees half a file."""
    write_atomic(path, json.dumps(jsonable(data), ensure_ascii=False, allow_nan=False, indent=2) + "\n")


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; a torn final line (killed mid-write) is skipped, any other bad line
    raises ValueError naming the file and line. A missing file reads as no records."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                break  # torn final line: written without its newline when the process died
            raise ValueError(f"{path}:{i + 1}: not a JSON line ({exc})") from None
    return out


class RunTrace:
    """Writes one episode's run directory. Thread-safe: primitives record calls from the agent thread while the
    episode host records events from its own.

    path: the run directory; created if missing. A directory that already holds a `result.json` is refused
        (FileExistsError), so a run is never overwritten.
    config: the configuration of the run, stored in result.json as given.
    meta: identifying facts (task, seed, layout, planner, model), stored in result.json.
    fsync: also fsync every appended line (survives a machine crash, not only a process kill; slower).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        config: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        fsync: bool = False,
    ) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / "result.json").exists():
            raise FileExistsError(f"{self.path} already holds a run (result.json exists); choose a new directory")
        self._fsync = fsync
        self._lock = threading.RLock()
        self._files: dict[str, IO[str]] = {}
        self._counts: dict[str, int] = {}
        self._t0 = time.monotonic()
        self._cell: int | None = None
        self._finished = False
        self._result: dict[str, Any] = {
            "schema": RESULT_SCHEMA,
            "status": "running",
            "started_at": time.time(),
            "meta": dict(meta or {}),
            "config": dict(config or {}),
        }
        write_json_atomic(self.path / "result.json", self._result)
        self.event("start")

    # -- generic writers ---------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the trace was opened (the `t` field of every record)."""
        return time.monotonic() - self._t0

    def append(self, name: str, record: Mapping[str, Any]) -> int:
        """Append one record to `<name>.jsonl` and flush; returns its 1-based line number in that file. After
        `close()` or `finish()` a late record (an event from the host, a call from a lingering thread) is still
        appended: the file is reopened."""
        line = _dumps(record)
        with self._lock:
            f = self._files.get(name)
            if f is None:
                f = self._files[name] = open(self.path / f"{name}.jsonl", "a", encoding="utf-8")
            f.write(line + "\n")
            f.flush()
            if self._fsync:
                os.fsync(f.fileno())
            self._counts[name] = self._counts.get(name, 0) + 1
            return self._counts[name]

    def count(self, name: str) -> int:
        """Records appended to `<name>.jsonl` by this writer."""
        with self._lock:
            return self._counts.get(name, 0)

    def event(self, kind: str, **fields: Any) -> None:
        """Append a life-cycle event to events.jsonl."""
        self.append("events", {"t": round(self.elapsed(), 4), "kind": kind, **fields})

    # -- the prompt and the card ---------------------------------------------------------------------------

    def write_prompt(self, text: str, *, sections: Mapping[str, int] | None = None) -> str:
        """Write prompt.txt (byte-exact UTF-8) and prompt.sha256; returns the hex digest."""
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            (self.path / "prompt.txt").write_bytes(data)
            (self.path / "prompt.sha256").write_text(f"{digest}  prompt.txt\n", encoding="utf-8")
        info = {"chars": len(text), "bytes": len(data), "sha256": digest, "est_tokens": (len(text) + 3) // 4}
        if sections:
            info["sections"] = dict(sections)
        self.update_result(prompt=info)
        return digest

    def write_card(self, card: Mapping[str, Any], images: Iterable[tuple[str, np.ndarray]] = ()) -> list[str]:
        """Write card.json and the card's raw images as card/<name>.png; returns the image paths written
        (relative to the run directory), which card.json lists under "image_files"."""
        import cv2  # local: only needed when a card has images

        files: list[str] = []
        with self._lock:
            for name, image in images:
                arr = np.asarray(image)
                if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
                    raise ValueError(f"card image {name!r} must be uint8 HxWx3 RGB, got {arr.dtype} {arr.shape}")
                rel = f"card/{_safe_name(name)}.png"
                (self.path / "card").mkdir(exist_ok=True)
                ok, buf = cv2.imencode(".png", cv2.cvtColor(arr, cv2.COLOR_RGB2BGR))
                if not ok:
                    raise ValueError(f"card image {name!r} could not be encoded as PNG")
                (self.path / rel).write_bytes(buf.tobytes())
                files.append(rel)
            write_json_atomic(self.path / "card.json", {**card, "image_files": files})
        return files

    # -- turns, LLM requests, robo calls ------------------------------------------------------------------

    def begin_cell(self, index: int) -> None:
        """Mark cell `index` as running: robo calls recorded from now on carry `cell: index`."""
        with self._lock:
            self._cell = index

    def end_cell(self) -> None:
        with self._lock:
            self._cell = None

    def record_turn(self, record: Mapping[str, Any], images: Sequence[_Image] = ()) -> dict[str, Any]:
        """Append a tool call's record to turns.jsonl, after writing its images under images/ (the exact bytes
        sent to the LLM); the record gains "images": [{file, label, source, step, mime, width, height}]."""
        index = record.get("cell", record.get("index", self.count("turns") + 1))
        entries: list[dict[str, Any]] = []
        if images:
            with self._lock:
                (self.path / "images").mkdir(exist_ok=True)
                for k, img in enumerate(images, start=1):
                    ext = _EXTENSIONS.get(img.mime, "bin")
                    rel = f"images/cell_{int(index):03d}_{k:02d}_{_safe_name(img.source)}.{ext}"
                    (self.path / rel).write_bytes(img.data)
                    entries.append(
                        {
                            "file": rel,
                            "label": img.label,
                            "source": img.source,
                            "step": img.step,
                            "mime": img.mime,
                            "width": img.width,
                            "height": img.height,
                        }
                    )
        full = {"t": round(self.elapsed(), 4), **record, "images": entries}
        self.append("turns", full)
        return full

    def record_llm_call(self, record: Mapping[str, Any] | Any) -> None:
        """Append one LLM request (any attempt, failed or not) to llm_calls.jsonl."""
        data = jsonable(record)
        self.append("llm_calls", {"t": round(self.elapsed(), 4), **data})

    def record_call(self, call: Mapping[str, Any]) -> None:
        """Append one `robo` call made by agent code to calls.jsonl (for the primitives). The record gains `t`
        (seconds since start) and `cell` (the running cell) unless it has them. Values that are not JSON
        (numpy arrays, dataclasses) are converted; this never raises for an odd value."""
        with self._lock:
            cell = self._cell
        self.append("calls", {"t": round(self.elapsed(), 4), "cell": cell, **call})

    def record_host_call(self, call: Mapping[str, Any]) -> None:
        """Append a read the host made for itself (feedback, images) to host_calls.jsonl, apart from agent calls."""
        with self._lock:
            cell = self._cell
        self.append("host_calls", {"t": round(self.elapsed(), 4), "cell": cell, **call})

    # -- result.json ---------------------------------------------------------------------------------------

    @property
    def result(self) -> dict[str, Any]:
        """A copy of the current result.json content."""
        with self._lock:
            return json.loads(_dumps(self._result))

    def update_result(self, **fields: Any) -> None:
        """Merge `fields` into result.json (top-level keys replaced) and rewrite it atomically."""
        with self._lock:
            self._result.update(fields)
            write_json_atomic(self.path / "result.json", self._result)

    def finish(self, status: str, **fields: Any) -> dict[str, Any]:
        """Write the final result.json (status, end time, `fields`), log an "end" event and close the files.
        A second call rewrites result.json with its status and fields, without a second "end" event."""
        with self._lock:
            if not self._finished:
                self._finished = True
                self.event("end", status=status)
            now = time.time()
            self._result.update(fields)
            self._result["status"] = status
            self._result.setdefault("ended_at", now)
            self._result.setdefault("wall_s", round(now - self._result["started_at"], 4))
            write_json_atomic(self.path / "result.json", self._result)
            self._close_files()
            return json.loads(_dumps(self._result))

    def close(self) -> None:
        """Close the open files without writing a final status (result.json keeps its last state)."""
        with self._lock:
            self._close_files()

    def _close_files(self) -> None:
        for f in self._files.values():
            try:
                f.close()
            except OSError:
                pass
        self._files.clear()

    def __enter__(self) -> RunTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))[:64] or "image"


@dataclass(frozen=True)
class RunSummary:
    """How far a run got, read back from its directory (complete or killed)."""

    path: Path
    status: str
    finished: bool  # result.json has a final status (not "running")
    turns: int
    cells: int
    llm_requests: int
    llm_errors: int
    robo_calls: int
    last_turn: dict[str, Any] | None
    result: dict[str, Any]


def load_run(path: Path | str) -> RunSummary:
    """Read a run directory back; works on a run that was killed mid-episode."""
    path = Path(path)
    result_file = path / "result.json"
    if not result_file.exists():
        raise FileNotFoundError(f"{path} is not a run directory (no result.json)")
    result = json.loads(result_file.read_text(encoding="utf-8"))
    turns = read_jsonl(path / "turns.jsonl")
    llm = read_jsonl(path / "llm_calls.jsonl")
    calls = read_jsonl(path / "calls.jsonl")
    return RunSummary(
        path=path,
        status=str(result.get("status")),
        finished=result.get("status") != "running",
        turns=len(turns),
        cells=sum(1 for t in turns if t.get("kind") == "cell"),
        llm_requests=len(llm),
        llm_errors=sum(1 for c in llm if not c.get("ok", False)),
        robo_calls=len(calls),
        last_turn=turns[-1] if turns else None,
        result=result,
    )


def recorded_cells(run_dir: Path | str) -> list[str]:
    """The code of every cell a run directory's turns.jsonl records, in order (what the replay planner plays);
    ValueError when the directory has no turns.jsonl or it records no cells."""
    path = Path(run_dir) / "turns.jsonl"
    if not path.exists():
        raise ValueError(f"cannot replay {run_dir}: it has no turns.jsonl")
    cells = [t["code"] for t in read_jsonl(path) if t.get("kind") == "cell" and isinstance(t.get("code"), str)]
    if not cells:
        raise ValueError(f"cannot replay {run_dir}: turns.jsonl records no cells")
    return cells
