"""`pyrua-dojo report DIR`: the plots people would rather look at than read, as PNG files and one HTML page.

From a results tree (RoboDojo's layout, the runs `summarize` reads, plus our agent records where they exist):

- dimensions.png: SR and Score per dimension and the Average, per policy, against the published anchors
  (`reference/robodojo.md` 10.2: PyRUA-Lean agent 51.6 / 58.2, VPP2 32.3 / 39.3, PhysicalRSI 31.4 / 36.3; per
  dimension only where published, which for these three is nowhere). Values follow RoboDojo's summarize where its
  cells are complete; where a task has fewer episodes than RoboDojo counts, the same aggregation over the episodes
  there is shown hatched and labelled "partial" (not comparable to the board);
- token_budget.png: the fraction of episodes solved within k input tokens (agent records), against k;
- llm_calls.png: LLM calls per episode (histogram, solved and not);
- steps.png: steps used as a share of each task's step limit, per task;
- failures.png: how episodes ended: agent statuses, and the twin's failure reasons of failed episodes.

The last four need agent records; on RoboDojo's own results they are skipped with a note. Matplotlib runs on its
Agg canvas through `Figure` objects (no pyplot state), so reports can be built from any thread or process.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

import numpy as np

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
from pyrua_dojo.evaluate.htmlpage import ImageRef, Page, esc, fmt_num, table
from pyrua_dojo.harness.result_files import (
    AgentRecord,
    EpisodeResult,
    ResultTree,
    load_agent_records,
    resolve_root,
    scan_results,
)
from pyrua_dojo.evaluate.summarize import PolicySummary, summarize_tree
from pyrua_dojo.runtime.atomic_files import replacing

__all__ = [
    "ANCHORS",
    "Anchor",
    "EpisodeRow",
    "PolicyReport",
    "Report",
    "build_report",
    "collect",
    "run_cli",
    "solved_within",
]

AVERAGE = "Average"
GROUPS: tuple[str, ...] = tuple(d.value for d in Dimension) + (AVERAGE,)
PYRUA_LEAN_MEAN_CALLS = 25.7
PYRUA_LEAN_MEAN_INPUT_TOKENS = 750_000
_COLOURS = ("#2f5bd3", "#e07b39", "#3a9d5d", "#a14fc2", "#c9a227", "#5b6575")
_ANCHOR_STYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class Anchor:
    """A published result to compare against: Average SR (%) and Score, and per-dimension values where published."""

    name: str
    sr: float
    score: float
    scope: str
    dimensions: Mapping[str, tuple[float, float]] = field(default_factory=lambda: MappingProxyType({}))


ANCHORS: tuple[Anchor, ...] = (
    Anchor("PyRUA-Lean agent (RGB)", 51.6, 58.2, "paper, one seed"),
    Anchor("VPP2", 32.3, 39.3, "leaderboard"),
    Anchor("PhysicalRSI (agent)", 31.4, 36.3, "leaderboard"),
)
"""`reference/robodojo.md` 10.2. None of the three published per-dimension numbers."""


@dataclass(frozen=True)
class EpisodeRow:
    """One booked episode and, when the run has one, our agent's record of it."""

    policy: str
    task: str
    seed: int
    layout_id: int | None
    success: bool
    score: float
    record: AgentRecord | None


@dataclass(frozen=True)
class GroupValue:
    """SR (%) and Score of a dimension or the Average; `official` when RoboDojo's summarize gives it."""

    sr: float
    score: float
    official: bool


@dataclass(frozen=True)
class PolicyReport:
    """What the report shows of one policy."""

    policy: str
    summary: PolicySummary | None
    groups: Mapping[str, GroupValue]
    task_cells: Mapping[str, Mapping[int, tuple[float, float, int]]]  # task -> seed -> (SR, Score, episodes)
    episodes: tuple[EpisodeRow, ...]

    @property
    def records(self) -> tuple[AgentRecord, ...]:
        return tuple(e.record for e in self.episodes if e.record is not None)


@dataclass(frozen=True)
class Report:
    """A written report: the page, the plot files, and the notes shown on the page."""

    root: Path
    out_dir: Path
    page: Path
    plots: Mapping[str, Path]
    notes: tuple[str, ...]
    policies: tuple[PolicyReport, ...]


# --------------------------------------------------------------------------------------------------- numbers


def solved_within(records: Sequence[AgentRecord], budget: float) -> float:
    """The fraction of `records` that succeeded using at most `budget` input tokens (0 when there are none)."""
    if not records:
        return 0.0
    return sum(1 for r in records if r.success and r.input_tokens <= budget) / len(records)


def _cell(entries: Sequence[EpisodeResult]) -> tuple[float, float, int]:
    n = len(entries)
    return sum(e.success for e in entries) / n * 100.0, sum(e.score for e in entries) / n * 100.0, n


def _partial_cells(tree: ResultTree, policy: str) -> dict[str, dict[int, tuple[float, float, int]]]:
    """Per task and seed, the cell over the episodes there (summarize's selection: first 50, or first 25 + 25 for a
    Generalization task with a `_random` directory), however few they are."""
    task_dirs = set(tree.task_dirs)
    gen = set(DIMENSION_TASKS[Dimension.GENERALIZATION])
    by_task: dict[str, dict[int, list[EpisodeResult]]] = defaultdict(dict)
    for run in tree:
        if run.key.policy != policy:
            continue
        by_task[run.key.task][run.key.seed] = list(run.episodes)
    cells: dict[str, dict[int, tuple[float, float, int]]] = {}
    for task in BASE_TASK_NAMES:
        twin = task + RANDOM_SUFFIX
        merged = task in gen and twin in task_dirs
        seeds = set(by_task.get(task, {})) | (set(by_task.get(twin, {})) if merged else set())
        for seed in sorted(seeds):
            if merged:
                n = GENERALIZATION_HALF_EPISODES
                entries = by_task.get(task, {}).get(seed, [])[:n] + by_task.get(twin, {}).get(seed, [])[:n]
            else:
                entries = by_task.get(task, {}).get(seed, [])[:STANDALONE_EPISODES]
            if entries:
                cells.setdefault(task, {})[seed] = _cell(entries)
    return cells


def _partial_groups(cells: Mapping[str, Mapping[int, tuple[float, float, int]]]) -> dict[str, tuple[float, float]]:
    """summarize's aggregation (dimension = mean over tasks with data at a seed, Average = mean of dimensions, then
    the mean over seeds) over partial cells; the official seeds when any has data, else every seed."""
    seeds = sorted({s for per in cells.values() for s in per})
    official = [s for s in seeds if s in OFFICIAL_SEEDS]
    seeds = official or seeds
    per_group: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in seeds:
        dims: list[tuple[float, float]] = []
        for dim in Dimension:
            vals = [cells[t][s] for t in DIMENSION_TASKS[dim] if s in cells.get(t, {})]
            if vals:
                value = (statistics.fmean(v[0] for v in vals), statistics.fmean(v[1] for v in vals))
                per_group[dim.value].append(value)
                dims.append(value)
        if dims:
            per_group[AVERAGE].append((statistics.fmean(v[0] for v in dims), statistics.fmean(v[1] for v in dims)))
    return {g: (statistics.fmean(v[0] for v in vals), statistics.fmean(v[1] for v in vals))
            for g, vals in per_group.items()}


def collect(path: Path | str) -> tuple[ResultTree, tuple[PolicyReport, ...], tuple[str, ...]]:
    """Read a results tree: per policy the dimension values, cells and episodes with their records; and warnings."""
    tree = scan_results(resolve_root(path))
    summary = summarize_tree(tree)
    warnings = list(summary.warnings)
    rows: dict[str, list[EpisodeRow]] = defaultdict(list)
    for run in tree:
        if run.key.task not in TASKS:
            continue
        records, record_warnings = load_agent_records(run)
        warnings.extend(record_warnings)
        for e in run.episodes:
            rec = records.get(e.layout_id) if e.layout_id is not None else None
            rows[run.key.policy].append(
                EpisodeRow(run.key.policy, run.key.task, run.key.seed, e.layout_id, e.success, e.score, rec)
            )
    reports = []
    for policy in sorted(rows):
        ps = summary.policies.get(policy)
        cells = _partial_cells(tree, policy)
        partial = _partial_groups(cells)
        groups: dict[str, GroupValue] = {}
        for name in GROUPS:
            agg = None
            if ps is not None:
                agg = ps.average if name == AVERAGE else ps.dimensions[Dimension(name)]
            if agg is not None and agg.sr is not None and agg.score is not None:
                groups[name] = GroupValue(agg.sr.mean, agg.score.mean, True)
            elif name in partial:
                groups[name] = GroupValue(partial[name][0], partial[name][1], False)
        reports.append(PolicyReport(policy, ps, MappingProxyType(groups),
                                    MappingProxyType({t: MappingProxyType(v) for t, v in cells.items()}),
                                    tuple(rows[policy])))
    return tree, tuple(reports), tuple(warnings)


# ----------------------------------------------------------------------------------------------------- plots


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return fig


def _save(fig: Any, path: Path) -> Path:
    with replacing(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png")
    return path


def plot_dimensions(policies: Sequence[PolicyReport], path: Path, anchors: Sequence[Anchor] = ANCHORS) -> Path:
    """Grouped bars of SR and Score per dimension and Average, one colour per policy; anchors as lines."""
    fig = _figure(12, 7.6)
    axes = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(GROUPS))
    n = max(1, len(policies))
    width = 0.8 / n
    panels = zip(axes, ("sr", "score"), ("Success rate (%)", "Score (0-100)"), strict=True)
    for row, (ax, metric, label) in enumerate(panels):
        for k, p in enumerate(policies):
            colour = _COLOURS[k % len(_COLOURS)]
            for g, name in enumerate(GROUPS):
                value = p.groups.get(name)
                if value is None:
                    continue
                v = getattr(value, metric)
                pos = x[g] - 0.4 + width * (k + 0.5)
                ax.bar(pos, v, width * 0.92, color=colour if value.official else "white", edgecolor=colour,
                       hatch=None if value.official else "//", linewidth=1.2,
                       label=p.policy)
                ax.text(pos, v + 1, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
        for a, anchor in enumerate(anchors):
            style = _ANCHOR_STYLES[a % len(_ANCHOR_STYLES)]
            values = {AVERAGE: (anchor.sr, anchor.score), **dict(anchor.dimensions)}
            for g, name in enumerate(GROUPS):
                if name not in values:
                    continue
                v = values[name][0 if metric == "sr" else 1]
                ax.hlines(v, x[g] - 0.48, x[g] + 0.48, colors="#1d2430", linestyles=style, linewidth=1.4,
                          label=f"{anchor.name}: {values[AVERAGE][0]:.1f} / {values[AVERAGE][1]:.1f} ({anchor.scope})"
                          if g == len(GROUPS) - 1 and row == 0 else None)
        ax.set_ylabel(label)
        ax.set_ylim(0, 105)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[1].set_xticks(x, GROUPS)
    handles, labels = axes[0].get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels, strict=True):
        seen.setdefault(lab, h)
    if any(not v.official for p in policies for v in p.groups.values()):
        from matplotlib.patches import Patch

        seen["partial: fewer episodes than RoboDojo counts (not board-comparable)"] = Patch(
            facecolor="white", edgecolor="#5b6575", hatch="//")
    axes[0].legend(seen.values(), seen.keys(), fontsize=8, loc="upper left", ncols=2)
    axes[0].set_title("RoboDojo dimensions and Average, against published anchors (Average only where "
                      "per-dimension numbers are unpublished)", fontsize=10)
    return _save(fig, path)


def plot_token_budget(policies: Sequence[PolicyReport], path: Path) -> Path:
    """Fraction of episodes solved within k input tokens, against k (log scale)."""
    fig = _figure(10, 5)
    ax = fig.subplots()
    top = 1
    for k, p in enumerate(policies):
        recs = p.records
        if not recs:
            continue
        tokens = sorted({r.input_tokens for r in recs} | {0})
        top = max(top, tokens[-1])
        sweep = np.geomspace(1, max(tokens[-1], 1) * 1.5, 200)
        grid = np.unique(np.concatenate([np.array(tokens, dtype=float), sweep]))
        ys = [solved_within(recs, b) * 100 for b in grid]
        ax.step(grid, ys, where="post", color=_COLOURS[k % len(_COLOURS)], linewidth=1.8,
                label=f"{p.policy} ({len(recs)} episodes, final {ys[-1]:.1f} %)")
        solved = [r.input_tokens for r in recs if r.success]
        if solved:
            ax.axvline(float(np.median(solved)), color=_COLOURS[k % len(_COLOURS)], linestyle=":", linewidth=1,
                       label=f"{p.policy}: median input tokens of solved episodes {np.median(solved):,.0f}")
    ax.axvline(PYRUA_LEAN_MEAN_INPUT_TOKENS, color="#1d2430", linestyle="--", linewidth=1,
               label=f"PyRUA-Lean mean input tokens per episode ({PYRUA_LEAN_MEAN_INPUT_TOKENS:,})")
    ax.set_xscale("symlog", linthresh=1000)
    ax.set_xlim(0, max(top * 1.5, PYRUA_LEAN_MEAN_INPUT_TOKENS * 1.3))
    ax.set_ylim(0, 100)
    ax.set_xlabel("input tokens per episode, k (cached included)")
    ax.set_ylabel("episodes solved within k (%)")
    ax.set_title("Success against a token budget", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)


def plot_llm_calls(policies: Sequence[PolicyReport], path: Path) -> Path:
    """Histogram of LLM calls per episode, solved and not solved stacked, one panel per policy."""
    from matplotlib.ticker import MaxNLocator

    with_records = [p for p in policies if p.records]
    fig = _figure(10, 3.4 * len(with_records) + 0.6)
    axes = np.atleast_1d(fig.subplots(len(with_records), 1, squeeze=False)[:, 0])
    for ax, p in zip(axes, with_records, strict=True):
        recs = p.records
        calls = [r.llm_calls for r in recs]
        hi = max(calls) + 1
        bins = np.arange(0, hi + 1) - 0.5 if hi <= 60 else np.linspace(-0.5, hi + 0.5, 40)
        ax.hist([[r.llm_calls for r in recs if r.success], [r.llm_calls for r in recs if not r.success]], bins=bins,
                stacked=True, color=["#3a9d5d", "#b42318"], label=["solved", "not solved"])
        mean = statistics.fmean(calls)
        ax.axvline(mean, color="#1d2430", linewidth=1.2, label=f"mean {mean:.1f}")
        ax.axvline(PYRUA_LEAN_MEAN_CALLS, color="#1d2430", linestyle="--", linewidth=1,
                   label=f"PyRUA-Lean mean {PYRUA_LEAN_MEAN_CALLS}")
        ax.set_ylabel("episodes")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{p.policy}: LLM calls per episode ({len(recs)} episodes)", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].set_xlabel("LLM calls (counted) per episode")
    return _save(fig, path)


def plot_steps(policies: Sequence[PolicyReport], path: Path) -> Path:
    """Steps used as a share of the step limit, per task (one dot per episode; jittered)."""
    episodes = [(p.policy, e) for p in policies for e in p.episodes if e.record is not None]
    tasks = sorted({e.task for _, e in episodes})
    fig = _figure(max(8.0, 0.7 * len(tasks) + 3), 5)
    ax = fig.subplots()
    rng = np.random.default_rng(0)
    markers = ("o", "s", "^", "D", "v", "P")
    names = sorted({p for p, _ in episodes})
    for t, task in enumerate(tasks):
        for policy, e in episodes:
            if e.task != task:
                continue
            r = e.record
            assert r is not None
            share = r.steps_used / r.step_limit * 100 if r.step_limit else 0.0
            ax.scatter(t + rng.uniform(-0.25, 0.25), share, s=22, marker=markers[names.index(policy) % len(markers)],
                       color="#3a9d5d" if e.success else "#b42318", alpha=0.75, edgecolors="none")
    ax.axhline(100, color="#1d2430", linestyle="--", linewidth=1)
    ax.text(len(tasks) - 0.5, 101, "step limit", ha="right", va="bottom", fontsize=8)
    ax.set_xticks(range(len(tasks)), [f"{t}\n({TASKS[t].step_limit if t in TASKS else '?'})" for t in tasks],
                  rotation=30 if len(tasks) > 6 else 0, ha="right" if len(tasks) > 6 else "center", fontsize=8)
    ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_ylim(0, 110)
    ax.set_ylabel("steps used (% of the task's step limit)")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", linestyle="", color="#3a9d5d", label="solved"),
               Line2D([], [], marker="o", linestyle="", color="#b42318", label="not solved")]
    if len(names) > 1:
        handles += [Line2D([], [], marker=markers[i % len(markers)], linestyle="", color="#5b6575", label=n)
                    for i, n in enumerate(names)]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_title("Steps used against the step limit (task, limit in steps)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def failure_reason(record: AgentRecord) -> str:
    """Why a failed episode ended, as the twin or RoboDojo said it (the record's `failure` / `outcome` fields), else
    the agent status."""
    for key in ("failure", "twin_failure", "env_failure", "outcome"):
        value = record.extra.get(key)
        if isinstance(value, str) and value:
            return value.split(":")[0]
        if isinstance(value, Mapping) and isinstance(value.get("failure"), str):
            return str(value["failure"]).split(":")[0]
    return f"unknown ({record.status})"


def plot_failures(policies: Sequence[PolicyReport], path: Path) -> Path:
    """Counts of agent statuses (solved / not solved) and of failure reasons of the episodes not solved."""
    from matplotlib.ticker import MaxNLocator

    recs = [r for p in policies for r in p.records]
    fig = _figure(12, 4.8)
    left, right = fig.subplots(1, 2)
    statuses = Counter(r.status for r in recs)
    names = [s for s, _ in statuses.most_common()]
    ok = [sum(1 for r in recs if r.status == s and r.success) for s in names]
    bad = [sum(1 for r in recs if r.status == s and not r.success) for s in names]
    y = np.arange(len(names))
    left.barh(y, ok, height=0.6, color="#3a9d5d", label="solved")
    left.barh(y, bad, height=0.6, left=ok, color="#b42318", label="not solved")
    for i, (a, b) in enumerate(zip(ok, bad, strict=True)):
        left.text(a + b, i, f" {a + b}", va="center", fontsize=8)
    left.set_yticks(y, names)
    left.invert_yaxis()
    left.set_xlabel("episodes")
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title("How the agent's loop ended (status)", fontsize=10)
    left.legend(fontsize=8, loc="lower right")
    reasons = Counter(failure_reason(r) for r in recs if not r.success)
    if reasons:
        rnames = [s for s, _ in reasons.most_common()]
        counts = [reasons[s] for s in rnames]
        ry = np.arange(len(rnames))
        right.barh(ry, counts, height=0.6, color="#b42318")
        for i, c in enumerate(counts):
            right.text(c, i, f" {c}", va="center", fontsize=8)
        right.set_yticks(ry, rnames)
        right.invert_yaxis()
    else:
        right.text(0.5, 0.5, "no failed episodes", ha="center", va="center", transform=right.transAxes)
        right.set_yticks([])
    right.set_xlabel("episodes not solved")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_title("Why failed episodes ended (twin / RoboDojo)", fontsize=10)
    return _save(fig, path)


# ------------------------------------------------------------------------------------------------------ page

PLOTS: tuple[tuple[str, str, bool], ...] = (
    ("dimensions", "Dimensions and Average against the published anchors", False),
    ("token_budget", "Success against a token budget", True),
    ("llm_calls", "LLM calls per episode", True),
    ("steps", "Steps used against the step limit", True),
    ("failures", "Failure statuses", True),
)
_PLOTTERS = {
    "dimensions": plot_dimensions,
    "token_budget": plot_token_budget,
    "llm_calls": plot_llm_calls,
    "steps": plot_steps,
    "failures": plot_failures,
}


def _groups_table(policies: Sequence[PolicyReport]) -> str:
    rows = []
    for p in policies:
        cells = [esc(p.policy)]
        for name in GROUPS:
            v = p.groups.get(name)
            cells.append("-" if v is None else f"{v.sr:.1f} / {v.score:.1f}" + ("" if v.official else " *"))
        rows.append(cells)
    for a in ANCHORS:
        rows.append([esc(f"{a.name} ({a.scope})")] + [
            f"{a.dimensions[n][0]:.1f} / {a.dimensions[n][1]:.1f}" if n in a.dimensions else "-" for n in GROUPS[:-1]
        ] + [f"{a.sr:.1f} / {a.score:.1f}"])
    return table(["policy"] + list(GROUPS), rows, numeric=tuple(range(1, len(GROUPS) + 1)))


def _usage_table(policies: Sequence[PolicyReport]) -> str:
    rows = []
    for p in policies:
        recs = p.records
        if not recs:
            continue
        costs = [r.cost_usd for r in recs]
        known = [c for c in costs if c is not None]
        rows.append([
            esc(p.policy), fmt_num(len(recs)), f"{sum(r.success for r in recs) / len(recs) * 100:.1f}",
            fmt_num(statistics.fmean(r.llm_calls for r in recs), 1),
            fmt_num(statistics.fmean(r.input_tokens for r in recs), 0),
            fmt_num(statistics.fmean(r.output_tokens for r in recs), 0),
            (f"${statistics.fmean(known):.3f}" if known else "-")
            + ("" if len(known) == len(costs) else " (some unknown)"),
            fmt_num(statistics.fmean(r.wall_s for r in recs) / 60, 1),
        ])
    return table(["policy", "episodes with records", "SR %", "LLM calls", "input tokens", "output tokens",
                  "cost / episode", "minutes / episode"], rows, numeric=(1, 2, 3, 4, 5, 6, 7))


def _task_table(p: PolicyReport) -> str:
    seeds = sorted({s for per in p.task_cells.values() for s in per})
    rows = []
    for task in sorted(p.task_cells):
        spec = TASKS.get(task)
        row = [esc(task), esc(spec.dimension.value if spec else "?")]
        for s in seeds:
            c = p.task_cells[task].get(s)
            row.append("-" if c is None else f"{c[0]:.0f} / {c[1]:.1f} <span class=\"muted\">({c[2]})</span>")
        rows.append(row)
    return table(["task", "dimension"] + [f"seed {s}: SR / Score (episodes)" for s in seeds], rows)


def build_report(path: Path | str, out_dir: Path | str | None = None, *, embed: bool = True) -> Report:
    """Write the PNG plots and `report.html` for the results under `path` into `out_dir` (default: a `report`
    directory next to the results root, so the results tree itself is left as it is). Raises ValueError when there
    are no results."""
    tree, policies, warnings = collect(path)
    if not policies:
        raise ValueError(f"no booked episodes under {tree.root}")
    out = Path(out_dir) if out_dir is not None else tree.root.parent / "report"
    if out.resolve() == tree.root.resolve() or tree.root.resolve() in out.resolve().parents:
        raise ValueError(f"the report must not be written inside the results root {tree.root} (use --out)")
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    has_records = any(p.records for p in policies)
    plots: dict[str, Path] = {}
    for name, _title, needs_records in PLOTS:
        if needs_records and not has_records:
            continue
        plots[name] = _PLOTTERS[name](policies, out / f"{name}.png")
    if not has_records:
        notes.append("No agent records in this tree (RoboDojo's own results have none): the token budget, LLM calls, "
                     "steps and failure plots are skipped.")
    else:
        missing = sum(1 for p in policies for e in p.episodes if e.record is None)
        if missing:
            notes.append(f"{missing} booked episode(s) have no agent record and are left out of the agent plots.")
    conditions: dict[str, int] = {}
    for p in policies:
        for r in p.records:
            twin = r.extra.get("twin")
            if isinstance(twin, Mapping):
                key = f"segmentation noise {twin.get('seg_noise', '?')}, station {twin.get('station', '?')}"
                conditions[key] = conditions.get(key, 0) + 1
    if conditions:
        notes.append("Twin conditions: " + "; ".join(f"{k} ({n} episodes)" for k, n in sorted(conditions.items())))
    partial = [p.policy for p in policies if any(not v.official for v in p.groups.values())]
    if partial:
        notes.append("Values marked * (hatched bars) are partial: some tasks have fewer episodes than RoboDojo counts "
                     "(50, or 25 + 25), so they use the episodes there and are not comparable to the board "
                     f"({', '.join(partial)}).")
    page = Page(f"pyrua-dojo report: {tree.root}", out / "report.html", embed=embed)
    page.add(f"<h1>Evaluation report</h1><p class=\"muted\">{esc(tree.root)} · {len(policies)} "
             f"polic{'y' if len(policies) == 1 else 'ies'} · "
             f"{sum(len(p.episodes) for p in policies)} booked episodes</p>")
    for n in notes:
        page.add(f'<p class="note">{esc(n)}</p>')
    page.add("<h2>Dimensions (SR % / Score)</h2>", _groups_table(policies))
    if has_records:
        page.add("<h2>Usage per episode (agent records)</h2>", _usage_table(policies))
    for name, title, _needs in PLOTS:
        if name in plots:
            page.add(f'<h2 id="{name}">{esc(title)}</h2>',
                     page.figure(ImageRef(plots[name], "", alt=title), "plot", anchor=f"plot-{name}"))
    for p in policies:
        page.add(f"<h2>Tasks: {esc(p.policy)}</h2>", _task_table(p))
    if warnings:
        page.add("<h2>Warnings</h2><ul>" + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>")
    page_path = page.write()
    return Report(tree.root, out, page_path, MappingProxyType(plots), tuple(notes), policies)


def run_cli(path: str, *, out: str | None = None, link: bool = False, stdout: TextIO | None = None,
            err: TextIO | None = None) -> int:
    """`pyrua-dojo report DIR [--out DIR2] [--link]`: write the plots and the page, print where; exit 2 on bad input."""
    stdout = stdout or sys.stdout
    err = err or sys.stderr
    try:
        report = build_report(path, out, embed=not link)
    except ValueError as exc:
        print(f"pyrua-dojo report: {exc}", file=err)
        return 2
    for note in report.notes:
        print(f"note: {note}", file=err)
    print(f"{report.page}", file=stdout)
    for name, p in report.plots.items():
        print(f"  {name}: {p}", file=stdout)
    return 0
