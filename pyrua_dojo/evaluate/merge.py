"""`pyrua-dojo merge SRC... --out DIR`: join results trees (eval shards run on several machines) by path.

Every run directory `<task>/<policy>/<config>/<seed>_<info>/<run_id>/` of a source is merged into the same path
under the destination: each episode booked in the source's `_result.json` whose layout is not yet booked there is
booked through `ResultWriter` (so indices stay contiguous and the file stays RoboDojo's), and its agent directory
(`episodes/layout_NNNN/`) and videos (renamed to the new episode index) are copied along. A layout booked on both
sides with the same outcome is skipped (merging twice changes nothing); with different outcomes the destination's
is kept and the conflict reported. Sources are never modified.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pyrua_dojo.harness.result_files import (
    BENCHMARK,
    EPISODES_DIR,
    RESULT_FILE,
    ResultFileError,
    ResultWriter,
    RunLocation,
    agent_record_dir,
    read_result_file,
    resolve_root,
)

__all__ = ["MergeReport", "merge_trees", "run_cli"]

_VIDEO_RE = re.compile(r"^episode_(\d{7})_(.+)$")
_SIDE_FILES = ("_eval.json",)


@dataclass(frozen=True)
class MergeReport:
    """What a merge did: episodes booked into the destination, skipped as already there, and conflicts."""

    destination: Path
    runs: int
    booked: int
    already_there: int
    conflicts: tuple[str, ...]
    warnings: tuple[str, ...]


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/*/*/*/*/{RESULT_FILE}"))


def merge_trees(sources: list[Path | str], destination: Path | str) -> MergeReport:
    """Merge the results trees `sources` (each a results root or a directory holding one) into `destination`
    (a directory that gets `RoboDojo/...`, or an existing results root). Raises ValueError on bad input."""
    if not sources:
        raise ValueError("give at least one source tree")
    dest = Path(destination)
    dest_root = dest if dest.name == BENCHMARK else dest / BENCHMARK
    roots = [resolve_root(s) for s in sources]
    for r in roots:
        if r.resolve() == dest_root.resolve():
            raise ValueError(f"{r} is the destination itself")
    runs = booked = already = 0
    conflicts: list[str] = []
    warnings: list[str] = []
    for root in roots:
        for run_dir in _run_dirs(root):
            rel = run_dir.relative_to(root)
            try:
                src = read_result_file(run_dir / RESULT_FILE, RunLocation.from_path(run_dir))
            except (ResultFileError, ValueError) as exc:
                warnings.append(f"skipped {run_dir}: {exc}")
                continue
            runs += 1
            target = RunLocation.from_path(dest_root / rel)
            writer = ResultWriter(target)
            have = {e.layout_id: e for e in writer.episodes()}
            target.path.mkdir(parents=True, exist_ok=True)
            for name in _SIDE_FILES:
                if (run_dir / name).is_file() and not (target.path / name).exists():
                    shutil.copy2(run_dir / name, target.path / name)
            for e in src.episodes:
                if e.layout_id is None:
                    warnings.append(f"{run_dir}: episode {e.index} has no layout id; not merged")
                    continue
                old = have.get(e.layout_id)
                if old is not None:
                    if (old.success, old.score) == (e.success, e.score):
                        already += 1
                    else:
                        conflicts.append(
                            f"{rel} layout {e.layout_id}: destination has success={old.success} score={old.score}, "
                            f"{root} has success={e.success} score={e.score}; kept the destination's"
                        )
                    continue
                src_agent = agent_record_dir(run_dir, e.layout_id)
                dst_agent = agent_record_dir(target.path, e.layout_id)
                if src_agent.is_dir():
                    if dst_agent.exists():
                        aside = target.path / EPISODES_DIR / "_unbooked" / f"{dst_agent.name}.before-merge"
                        aside.parent.mkdir(parents=True, exist_ok=True)
                        shutil.move(str(dst_agent), str(aside))
                    shutil.copytree(src_agent, dst_agent, symlinks=True)
                new = writer.record(e.layout_id, e.success, e.score)
                booked += 1
                for video in sorted(run_dir.glob(f"episode_{e.index:07d}_*")):
                    m = _VIDEO_RE.match(video.name)
                    if m and video.is_file():
                        shutil.copy2(video, target.path / f"episode_{new.index:07d}_{m.group(2)}")
    return MergeReport(dest_root, runs, booked, already, tuple(conflicts), tuple(warnings))


def run_cli(sources: list[str], out: str, *, stdout: TextIO | None = None, err: TextIO | None = None) -> int:
    """`pyrua-dojo merge SRC... --out DIR`: 0 when merged without conflicts, 1 with conflicts, 2 on bad input."""
    stdout = stdout or sys.stdout
    err = err or sys.stderr
    try:
        report = merge_trees(list(sources), out)
    except ValueError as exc:
        print(f"pyrua-dojo merge: {exc}", file=err)
        return 2
    for w in report.warnings:
        print(f"warning: {w}", file=err)
    for c in report.conflicts:
        print(f"conflict: {c}", file=err)
    print(f"merged {report.runs} run(s) into {report.destination}: {report.booked} episode(s) booked, "
          f"{report.already_there} already there, {len(report.conflicts)} conflict(s)", file=stdout)
    return 1 if report.conflicts else 0
