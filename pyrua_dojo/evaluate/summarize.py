"""The aggregation of RoboDojo's `scripts/internal/summarize_result.py`, as data, markdown, JSON and CSV.

Rules (upstream 36bfcb7), for each policy:

- A (task, seed) cell takes the latest run (see `results.scan_results`) and its episodes in index order. A task
  outside Generalization needs 50 episodes and uses the first 50. A Generalization task X whose `X_random`
  directory exists merges the first 25 of X with the first 25 of X_random (same policy, config, seed) and needs
  both; each half with 25 episodes also feeds the "Standard vs Random" table. `_random` tasks are never reported
  alone. Without an `X_random` directory anywhere in the tree, X is counted like any other task (50 episodes).
  Cells missing an episode stay blank.
- SR = successes / count * 100, Score = sum(episode score) / count * 100.
- A task's average over seeds 0, 1, 2 is shown only when all three are filled, as mean ±(max - min)/2.
- A dimension at a seed is the mean over its tasks filled at that seed; the Average at a seed is the mean over
  the dimensions that have a value at that seed. Both are shown as mean ±population std over the seeds with data.
- Progress = filled cells / 126 (42 tasks x seeds 0, 1, 2). Rows are sorted by Average SR, then policy name.
- Cells are keyed by policy only: when one policy has runs under several embodiment configs, the last config in
  name order wins a cell (upstream does the same; we say so in a warning).
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

from pyrua_dojo.catalog import (
    BASE_TASK_NAMES,
    DIMENSION_TASKS,
    GENERALIZATION_HALF_EPISODES,
    OFFICIAL_SEEDS,
    RANDOM_SUFFIX,
    STANDALONE_EPISODES,
    TASKS,
    Dimension,
)
from pyrua_dojo.harness.result_files import EpisodeResult, ResultTree, RunKey, resolve_root, scan_results

__all__ = [
    "Aggregate",
    "Cell",
    "PolicySummary",
    "Spread",
    "Summary",
    "summarize",
    "summarize_tree",
    "to_csv",
    "to_json",
    "to_markdown",
    "run_cli",
]

TOTAL_CELLS = len(BASE_TASK_NAMES) * len(OFFICIAL_SEEDS)
HALVES = ("base", "random")
_GEN_TASKS = frozenset(DIMENSION_TASKS[Dimension.GENERALIZATION])


@dataclass(frozen=True)
class Cell:
    """SR (%) and Score (0..100) over `episodes` episodes."""

    sr: float
    score: float
    episodes: int


@dataclass(frozen=True)
class Spread:
    """A mean with its spread: half the range for a task over seeds, the population std for dimensions."""

    mean: float
    spread: float


@dataclass(frozen=True)
class Aggregate:
    """A value per seed (SR, Score) and its mean and spread over the official seeds that have one."""

    per_seed: Mapping[int, tuple[float, float]]
    sr: Spread | None
    score: Spread | None


@dataclass(frozen=True)
class PolicySummary:
    """Everything summarize reports for one policy."""

    policy: str
    cells: Mapping[str, Mapping[int, Cell]]
    """task -> seed -> cell, for every seed found (only 0, 1, 2 enter the aggregates)."""
    halves: Mapping[str, Mapping[int, Mapping[str, Cell]]]
    """Generalization task -> seed -> {"base" | "random": cell of its first 25 episodes}."""
    task_means: Mapping[str, tuple[Spread, Spread]]
    """task -> (SR, Score) mean ±(max-min)/2 over seeds 0, 1, 2; only tasks filled at all three."""
    dimensions: Mapping[Dimension, Aggregate]
    average: Aggregate
    """The Average: per seed the mean of the dimension values; mean ±pstd over seeds."""
    seed_average: Aggregate
    """The per-policy table's "Avg (per seed)" row: mean over all tasks filled at a seed; spread = half range."""
    generalization: Mapping[str, Aggregate]
    """"base" / "random": per seed the mean over Generalization tasks with that half; mean ±pstd over seeds."""
    filled: int
    complete: bool

    @property
    def progress(self) -> float:
        """Filled cells as a percentage of 126."""
        return self.filled / TOTAL_CELLS * 100.0


@dataclass(frozen=True)
class Summary:
    """The summary of one results tree: every policy seen, the tables' row orders, and what was skipped."""

    root: Path
    policies: Mapping[str, PolicySummary]
    overview_order: tuple[str, ...] = ()
    """Policies with a filled cell, by Average SR (descending), then name: the overview's rows."""
    split_order: tuple[str, ...] = ()
    """Policies with a Standard or Random half, by Standard SR (descending), then name."""
    table_order: tuple[str, ...] = ()
    """Policies seen in a non-`_random` task directory, by name: one per-task table each."""
    warnings: tuple[str, ...] = ()

    @property
    def overview(self) -> tuple[PolicySummary, ...]:
        return tuple(self.policies[p] for p in self.overview_order)


# --------------------------------------------------------------------------------------------------- numbers


def _cell(entries: Sequence[EpisodeResult]) -> Cell:
    count = len(entries)
    successes = sum(1 for e in entries if e.success)
    return Cell(successes / count * 100.0, sum(e.score for e in entries) / count * 100.0, count)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _pstd(values: Sequence[float]) -> Spread:
    return Spread(_mean(values), statistics.pstdev(values) if len(values) > 1 else 0.0)


def _half_range(values: Sequence[float]) -> Spread:
    return Spread(_mean(values), (max(values) - min(values)) / 2.0)


def _aggregate(
    per_seed: Mapping[int, tuple[float, float]], spread: Callable[[Sequence[float]], Spread]
) -> Aggregate:
    official = [per_seed[s] for s in OFFICIAL_SEEDS if s in per_seed]
    if not official:
        return Aggregate(MappingProxyType(dict(per_seed)), None, None)
    return Aggregate(
        MappingProxyType(dict(per_seed)), spread([v[0] for v in official]), spread([v[1] for v in official])
    )


def _mean_of(cells: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    if not cells:
        return None
    return _mean([c[0] for c in cells]), _mean([c[1] for c in cells])


def _policy_summary(
    policy: str,
    cells: Mapping[str, Mapping[int, Cell]],
    halves: Mapping[str, Mapping[int, Mapping[str, Cell]]],
) -> PolicySummary:
    def seed_value(tasks: Sequence[str], seed: int) -> tuple[float, float] | None:
        return _mean_of([(cells[t][seed].sr, cells[t][seed].score) for t in tasks if seed in cells.get(t, {})])

    dimensions: dict[Dimension, Aggregate] = {}
    for dim, tasks in DIMENSION_TASKS.items():
        per_seed = {s: v for s in OFFICIAL_SEEDS if (v := seed_value(tasks, s)) is not None}
        dimensions[dim] = _aggregate(per_seed, _pstd)
    average_seed: dict[int, tuple[float, float]] = {}
    for s in OFFICIAL_SEEDS:
        value = _mean_of([dimensions[d].per_seed[s] for d in Dimension if s in dimensions[d].per_seed])
        if value is not None:
            average_seed[s] = value
    all_seed = {s: v for s in OFFICIAL_SEEDS if (v := seed_value(BASE_TASK_NAMES, s)) is not None}
    generalization: dict[str, Aggregate] = {}
    for half in HALVES:
        per_seed = {}
        for s in OFFICIAL_SEEDS:
            found = [
                (c.sr, c.score)
                for t in DIMENSION_TASKS[Dimension.GENERALIZATION]
                if (c := halves.get(t, {}).get(s, {}).get(half)) is not None
            ]
            if (value := _mean_of(found)) is not None:
                per_seed[s] = value
        generalization[half] = _aggregate(per_seed, _pstd)
    task_means = {}
    for task in BASE_TASK_NAMES:
        seeds = cells.get(task, {})
        if all(s in seeds for s in OFFICIAL_SEEDS):
            task_means[task] = (
                _half_range([seeds[s].sr for s in OFFICIAL_SEEDS]),
                _half_range([seeds[s].score for s in OFFICIAL_SEEDS]),
            )
    filled = sum(1 for t in BASE_TASK_NAMES for s in OFFICIAL_SEEDS if s in cells.get(t, {}))
    return PolicySummary(
        policy=policy,
        cells=MappingProxyType({t: MappingProxyType(dict(v)) for t, v in cells.items()}),
        halves=MappingProxyType(
            {t: MappingProxyType({s: MappingProxyType(dict(h)) for s, h in v.items()}) for t, v in halves.items()}
        ),
        task_means=MappingProxyType(task_means),
        dimensions=MappingProxyType(dimensions),
        average=_aggregate(average_seed, _pstd),
        seed_average=_aggregate(all_seed, _half_range),
        generalization=MappingProxyType(generalization),
        filled=filled,
        complete=len(task_means) == len(BASE_TASK_NAMES),
    )


def summarize_tree(tree: ResultTree) -> Summary:
    """Aggregate a scanned results tree exactly as RoboDojo's summarize does."""
    warnings = list(tree.warnings)
    task_dirs = set(tree.task_dirs)
    unknown = sorted(t for t in task_dirs if t not in TASKS)
    if unknown:
        warnings.append(f"ignored directories that are not RoboDojo tasks: {', '.join(unknown)}")
    cells: dict[str, dict[str, dict[int, Cell]]] = {p: {} for p in tree.policy_seeds}
    halves: dict[str, dict[str, dict[int, dict[str, Cell]]]] = {p: {} for p in tree.policy_seeds}
    writers: dict[tuple[str, str, int], str] = {}

    def record(key: RunKey, task: str, cell: Cell) -> None:
        where = (key.policy, task, key.seed)
        if where in writers and writers[where] != key.config_name:
            warnings.append(
                f"{key.policy} has {task} seed {key.seed} under configs {writers[where]} and {key.config_name}; "
                f"using {key.config_name} (as upstream: the last config name wins)"
            )
        writers[where] = key.config_name
        cells.setdefault(key.policy, {}).setdefault(task, {})[key.seed] = cell

    for task in BASE_TASK_NAMES:
        base = {(k.policy, k.config_name, k.seed): k for k in tree.for_task(task)}
        twin = task + RANDOM_SUFFIX
        if task in _GEN_TASKS and twin in task_dirs:
            rand = {(k.policy, k.config_name, k.seed): k for k in tree.for_task(twin)}
            for group in sorted(set(base) | set(rand)):
                policy, _config, seed = group
                b = tree.runs[base[group]].episodes if group in base else ()
                r = tree.runs[rand[group]].episodes if group in rand else ()
                n = GENERALIZATION_HALF_EPISODES
                for half, entries in (("base", b), ("random", r)):
                    if len(entries) >= n:
                        halves.setdefault(policy, {}).setdefault(task, {}).setdefault(seed, {})[half] = _cell(
                            entries[:n]
                        )
                if len(b) >= n and len(r) >= n:
                    key = base.get(group) or rand[group]
                    record(key, task, _cell(tuple(b[:n]) + tuple(r[:n])))
        else:
            for group in sorted(base):
                entries = tree.runs[base[group]].episodes
                if len(entries) >= STANDALONE_EPISODES:
                    record(base[group], task, _cell(entries[:STANDALONE_EPISODES]))

    policies = {
        p: _policy_summary(p, cells.get(p, {}), halves.get(p, {})) for p in sorted(set(cells) | set(halves))
    }
    overview = [p for p in policies.values() if p.policy in cells and p.filled > 0]
    overview.sort(key=lambda p: (-(p.average.sr.mean if p.average.sr else float("-inf")), p.policy))
    split = [p for p in policies.values() if any(p.generalization[h].sr is not None for h in HALVES)]
    split.sort(key=lambda p: (-(g.mean if (g := p.generalization["base"].sr) else float("-inf")), p.policy))
    return Summary(
        root=tree.root,
        policies=MappingProxyType(policies),
        overview_order=tuple(p.policy for p in overview),
        split_order=tuple(p.policy for p in split),
        table_order=tuple(sorted(cells)),
        warnings=tuple(warnings),
    )


def summarize(path: Path | str) -> Summary:
    """Summarize the results under `path` (a results root, or a directory holding `RoboDojo/` or
    `eval_result/RoboDojo/`); raises ValueError when there are none."""
    return summarize_tree(scan_results(resolve_root(path)))


# --------------------------------------------------------------------------------------------------- markdown


def _fmt_pstd(stat: Spread | None) -> str:
    return "" if stat is None else f"{stat.mean:.2f} ±{stat.spread:.2f}"


def _fmt_range(stat: Spread, integer: bool) -> str:
    fmt = "{:.0f}" if integer else "{:.2f}"
    return f"{fmt.format(stat.mean)} ±{fmt.format(stat.spread)}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(names: Sequence[str]) -> list[str]:
    return [_row(names), "| --- | " + " | ".join(["---:"] * (len(names) - 1)) + " |"]


def _progress_text(p: PolicySummary) -> str:
    if p.complete:
        return f"{p.progress:.0f}%"
    return f"{p.progress:.1f}% † ({p.filled}/{TOTAL_CELLS})"


def to_markdown(summary: Summary) -> str:
    """The `_summary.md` RoboDojo's summarize writes, table for table."""
    lines = ["# RoboDojo Evaluation Summary", ""]
    lines += [
        "## Overview (by capability dimension)",
        "",
        "Progress † marks incomplete evaluation (126 = 42 tasks × 3 seeds). Cells show `mean ±std` across seeds; "
        "scores reflect completed cells only. Policies are sorted by overall Avg SR.",
        "",
    ]
    header = ["Policy", "Progress"]
    for dim in Dimension:
        header += [f"{dim.value} SR (%)", f"{dim.value} Score"]
    lines += _header([*header, "Avg SR (%)", "Avg Score"])
    for p in summary.overview:
        row = [p.policy, _progress_text(p)]
        for dim in Dimension:
            agg = p.dimensions[dim]
            row += [_fmt_pstd(agg.sr), _fmt_pstd(agg.score)]
        row += [_fmt_pstd(p.average.sr), _fmt_pstd(p.average.score)]
        lines.append(_row(row))
    lines.append("")

    lines += [
        "## Generalization: Standard vs Random (25 episodes each)",
        "",
        "Each cell shows `mean ±std` across seeds, averaged over the 12 Generalization tasks with completed data for "
        "that half. Δ = Random − Standard (mean SR). Sorted by Standard SR.",
        "",
    ]
    lines += _header(
        ["Policy", "Standard SR (%)", "Standard Score", "Random SR (%)", "Random Score", "Δ SR", "Δ Score"]
    )
    for p in (summary.policies[name] for name in summary.split_order):
        base, rand = p.generalization["base"], p.generalization["random"]
        row = [p.policy]
        for agg in (base, rand):
            row += [_fmt_pstd(agg.sr), _fmt_pstd(agg.score)]
        if base.sr and rand.sr and base.score and rand.score:
            d_sr, d_score = rand.sr.mean - base.sr.mean, rand.score.mean - base.score.mean
            row += [f"{'+' if d_sr >= 0 else ''}{d_sr:.2f}", f"{'+' if d_score >= 0 else ''}{d_score:.2f}"]
        else:
            row += ["", ""]
        lines.append(_row(row))
    lines.append("")

    for name in summary.table_order:
        p = summary.policies[name]
        lines += [f"## {name}", ""]
        header = ["Task"]
        for s in OFFICIAL_SEEDS:
            header += [f"Seed {s} SR (%)", f"Seed {s} Score"]
        lines += _header([*header, "Avg SR (%)", "Avg Score"])
        for task in BASE_TASK_NAMES:
            row = [f"<nobr>{task}</nobr>"]
            seeds = p.cells.get(task, {})
            for s in OFFICIAL_SEEDS:
                row += [f"{seeds[s].sr:.0f}", f"{seeds[s].score:.2f}"] if s in seeds else ["", ""]
            means = p.task_means.get(task)
            row += [_fmt_range(means[0], True), _fmt_range(means[1], False)] if means else ["", ""]
            lines.append(_row(row))
        row = ["**Avg (per seed)**"]
        for s in OFFICIAL_SEEDS:
            v = p.seed_average.per_seed.get(s)
            row += [f"{v[0]:.1f}", f"{v[1]:.2f}"] if v else ["", ""]
        sa = p.seed_average
        row += [_fmt_range(sa.sr, True), _fmt_range(sa.score, False)] if sa.sr and sa.score else ["", ""]
        lines.append(_row(row))
        lines.append("")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------- JSON / CSV


def _spread_json(stat: Spread | None, name: str) -> dict[str, float] | None:
    return None if stat is None else {"mean": stat.mean, name: stat.spread}


def _agg_json(agg: Aggregate, name: str) -> dict[str, Any]:
    return {
        "per_seed": {str(s): {"sr": v[0], "score": v[1]} for s, v in sorted(agg.per_seed.items())},
        "sr": _spread_json(agg.sr, name),
        "score": _spread_json(agg.score, name),
    }


def _cell_json(c: Cell) -> dict[str, float | int]:
    return {"sr": c.sr, "score": c.score, "episodes": c.episodes}


def to_json(summary: Summary) -> dict[str, Any]:
    """A JSON-ready dict with every number the markdown shows, unrounded. Seeds are string keys."""
    policies = []
    for name in sorted(summary.policies):
        p = summary.policies[name]
        tasks = {}
        for task in BASE_TASK_NAMES:
            seeds = p.cells.get(task, {})
            halves = p.halves.get(task, {})
            if not seeds and not halves:
                continue
            per_seed: dict[str, Any] = {}
            for s in sorted(set(seeds) | set(halves)):
                entry: dict[str, Any] = _cell_json(seeds[s]) if s in seeds else {}
                for half in HALVES:
                    if half in halves.get(s, {}):
                        entry["standard" if half == "base" else "random"] = _cell_json(halves[s][half])
                per_seed[str(s)] = entry
            means = p.task_means.get(task)
            tasks[task] = {
                "dimension": TASKS[task].dimension.value,
                "seeds": per_seed,
                "mean": None
                if means is None
                else {"sr": _spread_json(means[0], "half_range"), "score": _spread_json(means[1], "half_range")},
            }
        base, rand = p.generalization["base"], p.generalization["random"]
        delta = None
        if base.sr and rand.sr and base.score and rand.score:
            delta = {"sr": rand.sr.mean - base.sr.mean, "score": rand.score.mean - base.score.mean}
        policies.append(
            {
                "policy": name,
                "in_overview": name in summary.overview_order,
                "progress": {
                    "filled": p.filled,
                    "total": TOTAL_CELLS,
                    "percent": p.progress,
                    "complete": p.complete,
                },
                "average": _agg_json(p.average, "std"),
                "dimensions": {d.value: _agg_json(p.dimensions[d], "std") for d in Dimension},
                "generalization_split": {
                    "standard": _agg_json(base, "std"),
                    "random": _agg_json(rand, "std"),
                    "delta": delta,
                },
                "seed_average": _agg_json(p.seed_average, "half_range"),
                "tasks": tasks,
            }
        )
    return {
        "root": str(summary.root),
        "seeds": list(OFFICIAL_SEEDS),
        "total_cells": TOTAL_CELLS,
        "overview_order": list(summary.overview_order),
        "policies": policies,
        "warnings": list(summary.warnings),
    }


CSV_COLUMNS = ("policy", "level", "name", "seed", "sr", "score", "sr_spread", "score_spread", "episodes")


def to_csv(summary: Summary) -> str:
    """One row per number, long format (columns `CSV_COLUMNS`).

    `level` is task, task_standard, task_random, dimension, average, generalization_standard,
    generalization_random or seed_average; `seed` is the seed or "mean"; on "mean" rows the spread is half the
    range for task and seed_average rows and the population std for the others.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def agg_rows(policy: str, level: str, name: str, agg: Aggregate) -> None:
        for s, (sr, score) in sorted(agg.per_seed.items()):
            writer.writerow([policy, level, name, s, sr, score, "", "", ""])
        if agg.sr and agg.score:
            writer.writerow([policy, level, name, "mean", agg.sr.mean, agg.score.mean, agg.sr.spread,
                             agg.score.spread, ""])  # fmt: skip

    for name in sorted(summary.policies):
        p = summary.policies[name]
        for task in BASE_TASK_NAMES:
            for s, c in sorted(p.cells.get(task, {}).items()):
                writer.writerow([name, "task", task, s, c.sr, c.score, "", "", c.episodes])
            for s, halves in sorted(p.halves.get(task, {}).items()):
                for half, c in halves.items():
                    level = "task_standard" if half == "base" else "task_random"
                    writer.writerow([name, level, task, s, c.sr, c.score, "", "", c.episodes])
            if task in p.task_means:
                sr, score = p.task_means[task]
                writer.writerow([name, "task", task, "mean", sr.mean, score.mean, sr.spread, score.spread, ""])
        for dim in Dimension:
            agg_rows(name, "dimension", dim.value, p.dimensions[dim])
        agg_rows(name, "average", "Average", p.average)
        agg_rows(name, "generalization_standard", "Generalization", p.generalization["base"])
        agg_rows(name, "generalization_random", "Generalization", p.generalization["random"])
        agg_rows(name, "seed_average", "all tasks", p.seed_average)
    return out.getvalue()


def run_cli(
    path: str,
    *,
    json_path: str | None = None,
    csv_path: str | None = None,
    md_path: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """`pyrua-dojo summarize DIR`: print the markdown summary, write the requested files; exit 2 on no results."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        summary = summarize(path)
    except ValueError as exc:
        print(f"pyrua-dojo summarize: {exc}", file=err)
        return 2
    text = to_markdown(summary)
    out.write(text)
    for w in summary.warnings:
        print(f"warning: {w}", file=err)
    outputs = (
        (md_path, lambda: text),
        (json_path, lambda: json.dumps(to_json(summary), indent=2, allow_nan=False) + "\n"),
        (csv_path, lambda: to_csv(summary)),
    )
    for target, render in outputs:
        if target:
            p = Path(target)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(render(), encoding="utf-8")
    return 0
