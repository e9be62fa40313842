"""Paired comparison of two recorded runs, episode by episode: the same task, seed and layout on both sides.

A "run" is a results tree (see `results.scan_results`) holding one policy on one embodiment config; for each
(task, seed) the latest run directory is read, as summarize does. Episodes pair by (task, seed, layout_id); two
trees pair only when they hold the same tasks, the same seeds per task and the same layouts per (task, seed), each
layout once. Anything else is refused with every reason listed (`MismatchError`). Policy settings that are the
point of a comparison may differ between the sides, but each side must hold one value: the judging card
(`judging_card`, read from the agent records' config and the runs' `_eval.json`) on for some episodes of a side and
off for others is refused; A with it and B without is a comparison of the card.

Rows are the scored tasks (X and X_random pooled, as summarize merges them), the five dimensions and the Average.
Deltas are B - A. A task's SR / Score is the mean over its pairs; a dimension's is the mean over its tasks and the
Average the mean over dimensions, as in summarize. Confidence intervals come from a seeded paired bootstrap that
resamples pairs within each task (stratified), so every row's interval is computed on the same replicates. The
tests are exact McNemar (a two-sided binomial test on the discordant pairs) for success and the Wilcoxon
signed-rank test for the episode score; for a dimension and the Average they pool that group's pairs. LLM usage
(calls, input and output tokens, cost per episode) comes from the agent records, on the pairs that have one on
both sides: over all of them, and over those both sides solved.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from scipy import stats

from pyrua_dojo.catalog import BASE_TASK_NAMES, DIMENSION_TASKS, TASKS, Dimension, base_name
from pyrua_dojo.harness.result_files import (
    AgentRecord,
    EpisodeResult,
    RunResult,
    load_agent_records,
    resolve_root,
    scan_results,
)

__all__ = [
    "Comparison",
    "GroupComparison",
    "Interval",
    "MismatchError",
    "Pair",
    "PairedStat",
    "RecordedRun",
    "Usage",
    "UsageMeans",
    "compare",
    "load_run",
    "pair_runs",
    "to_json",
    "to_markdown",
]


class MismatchError(ValueError):
    """Two runs that cannot be paired; `reasons` lists every problem found."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("cannot pair the runs:\n" + "\n".join(f"  - {r}" for r in self.reasons))


@dataclass(frozen=True)
class RecordedRun:
    """One side of a comparison: the latest run per (task, seed) of one policy/config, and its agent records."""

    label: str
    root: Path
    policy: str
    config_name: str
    runs: Mapping[tuple[str, int], RunResult]
    records: Mapping[tuple[str, int, int], AgentRecord]
    warnings: tuple[str, ...] = ()
    judging_card: tuple[bool, ...] = ()  # the distinct judging_card settings recorded on this side (empty: unknown)

    @property
    def judging_card_label(self) -> str:
        """on, off, unknown, or mixed."""
        if not self.judging_card:
            return "unknown"
        return "mixed" if len(self.judging_card) > 1 else ("on" if self.judging_card[0] else "off")


@dataclass(frozen=True)
class Pair:
    """One layout run on both sides."""

    task: str
    seed: int
    layout_id: int
    a: EpisodeResult
    b: EpisodeResult
    a_record: AgentRecord | None = None
    b_record: AgentRecord | None = None


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class PairedStat:
    """A on its own, B on its own, B - A with its bootstrap interval, and the paired test's two-sided p-value."""

    a: float
    b: float
    delta: float
    ci: Interval
    p_value: float


@dataclass(frozen=True)
class UsageMeans:
    """Mean LLM usage per episode on one side; cost is None when no pair has a known cost on both sides."""

    llm_calls: float
    input_tokens: float
    output_tokens: float
    cost_usd: float | None


@dataclass(frozen=True)
class Usage:
    """LLM usage over `episodes` pairs with an agent record on both sides (`cost_episodes` of them priced)."""

    episodes: int
    cost_episodes: int
    a: UsageMeans
    b: UsageMeans


@dataclass(frozen=True)
class GroupComparison:
    """One row: the Average, a dimension, or a scored task."""

    level: str
    name: str
    pairs: int
    sr: PairedStat
    score: PairedStat
    a_only: int
    """Pairs A solved and B did not."""
    b_only: int
    usage_all: Usage | None
    usage_solved: Usage | None
    solved_by_both: int


@dataclass(frozen=True)
class Comparison:
    """The whole paired comparison, rows in display order (Average, dimensions, tasks by dimension)."""

    a: RecordedRun
    b: RecordedRun
    rows: tuple[GroupComparison, ...]
    pairs: int
    seeds: tuple[int, ...]
    bootstrap: int
    confidence: float
    rng_seed: int

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(f"A: {w}" for w in self.a.warnings) + tuple(f"B: {w}" for w in self.b.warnings)

    def row(self, name: str) -> GroupComparison:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)


# --------------------------------------------------------------------------------------------------- loading


def load_run(path: Path | str, select: str | None = None, label: str | None = None) -> RecordedRun:
    """Load one side from a results tree; `select` is `POLICY` or `POLICY/CONFIG` when the tree holds several.

    Raises MismatchError when the selection is ambiguous or empty, ValueError when there are no results.
    """
    root = resolve_root(path)
    tree = scan_results(root)
    name = label or str(path)
    groups = sorted({(k.policy, k.config_name) for k in tree.runs if k.task in TASKS})
    if select is not None:
        policy, _, config = select.partition("/")
        groups = [g for g in groups if g[0] == policy and (not config or g[1] == config)]
        if not groups:
            raise MismatchError([f"{name}: no results for {select!r} under {root}"])
    if not groups:
        raise MismatchError([f"{name}: no results for any RoboDojo task under {root}"])
    if len(groups) > 1:
        listed = ", ".join(f"{p}/{c}" for p, c in groups)
        raise MismatchError([f"{name} holds several policy/config runs ({listed}); choose one with --policy-a/-b"])
    policy, config = groups[0]
    runs: dict[tuple[str, int], RunResult] = {}
    records: dict[tuple[str, int, int], AgentRecord] = {}
    warnings = list(tree.warnings)
    card_settings: set[bool] = set()
    for key, run in tree.runs.items():
        if key.task not in TASKS:
            continue
        if (key.policy, key.config_name) != (policy, config):
            continue
        runs[(key.task, key.seed)] = run
        found, notes = load_agent_records(run)
        warnings.extend(notes)
        for layout, record in found.items():
            records[(key.task, key.seed, layout)] = record
            config_of_record = record.extra.get("config")
            if isinstance(config_of_record, Mapping) and isinstance(config_of_record.get("judging_card"), bool):
                card_settings.add(config_of_record["judging_card"])
        card_settings.update(_eval_judging_card(run))
    return RecordedRun(name, root, policy, config, runs, records, tuple(warnings), tuple(sorted(card_settings)))


def _eval_judging_card(run: RunResult) -> tuple[bool, ...]:
    """The judging_card of the run's `_eval.json` identity (written by `pyrua-dojo eval`), if it records one."""
    import json

    from pyrua_dojo.evaluate.plan import EVAL_FILE

    path = run.location.path / EVAL_FILE
    try:
        identity = json.loads(path.read_text(encoding="utf-8")).get("identity", {})
    except (OSError, ValueError, AttributeError):
        return ()
    value = identity.get("judging_card") if isinstance(identity, Mapping) else None
    return (value,) if isinstance(value, bool) else ()


def _describe(ids: Sequence[int], limit: int = 12) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def pair_runs(a: RecordedRun, b: RecordedRun) -> tuple[Pair, ...]:
    """Pair every episode of A with B's episode of the same task, seed and layout; raises MismatchError."""
    reasons: list[str] = []
    for side, run in (("A", a), ("B", b)):
        if len(run.judging_card) > 1:
            reasons.append(
                f"{side} ({run.label}) mixes episodes made with and without the judging card (judging_card); "
                "compare runs made with one setting each"
            )
    tasks_a = {t for t, _ in a.runs}
    tasks_b = {t for t, _ in b.runs}
    if tasks_a - tasks_b:
        reasons.append(f"tasks only in A ({a.label}): {', '.join(sorted(tasks_a - tasks_b))}")
    if tasks_b - tasks_a:
        reasons.append(f"tasks only in B ({b.label}): {', '.join(sorted(tasks_b - tasks_a))}")
    for task in sorted(tasks_a & tasks_b):
        seeds_a = sorted(s for t, s in a.runs if t == task)
        seeds_b = sorted(s for t, s in b.runs if t == task)
        if seeds_a != seeds_b:
            reasons.append(f"{task}: different seeds: A has {seeds_a}, B has {seeds_b}")

    pairs: list[Pair] = []
    for task, seed in sorted(set(a.runs) & set(b.runs)):
        side_maps: list[dict[int, EpisodeResult]] = []
        for side, run in (("A", a.runs[(task, seed)]), ("B", b.runs[(task, seed)])):
            no_layout = [e.index for e in run.episodes if e.layout_id is None]
            if no_layout:
                reasons.append(f"{task} seed {seed}: {side} episodes {_describe(no_layout)} have no layout_id")
            by_layout: dict[int, EpisodeResult] = {}
            duplicates: set[int] = set()
            for e in run.episodes:
                if e.layout_id is None:
                    continue
                if e.layout_id in by_layout:
                    duplicates.add(e.layout_id)
                by_layout[e.layout_id] = e
            if duplicates:
                reasons.append(f"{task} seed {seed}: {side} ran layouts {_describe(sorted(duplicates))} more than once")
            side_maps.append(by_layout)
        map_a, map_b = side_maps
        only_a = sorted(set(map_a) - set(map_b))
        only_b = sorted(set(map_b) - set(map_a))
        if only_a:
            reasons.append(f"{task} seed {seed}: layouts only in A: {_describe(only_a)}")
        if only_b:
            reasons.append(f"{task} seed {seed}: layouts only in B: {_describe(only_b)}")
        for layout in sorted(set(map_a) & set(map_b)):
            pairs.append(
                Pair(
                    task, seed, layout, map_a[layout], map_b[layout],
                    a.records.get((task, seed, layout)), b.records.get((task, seed, layout)),
                )  # fmt: skip
            )
    if not pairs and not reasons:
        reasons.append("no episodes to pair")
    if reasons:
        raise MismatchError(reasons)
    return tuple(pairs)


# --------------------------------------------------------------------------------------------------- statistics


def _mcnemar_p(a_only: int, b_only: int) -> float:
    n = a_only + b_only
    return 1.0 if n == 0 else float(stats.binomtest(b_only, n, 0.5).pvalue)


def _wilcoxon_p(diffs: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p on the non-zero differences (Wilcoxon's treatment of ties at zero)."""
    nonzero = diffs[diffs != 0]
    if nonzero.size == 0:
        return 1.0
    return float(stats.wilcoxon(nonzero).pvalue)


def _usage(pairs: Sequence[Pair]) -> Usage | None:
    both: list[tuple[AgentRecord, AgentRecord]] = [
        (p.a_record, p.b_record) for p in pairs if p.a_record is not None and p.b_record is not None
    ]
    if not both:
        return None
    priced = [(ra.cost_usd, rb.cost_usd) for ra, rb in both if ra.cost_usd is not None and rb.cost_usd is not None]

    def means(side: int) -> UsageMeans:
        recs = [pair[side] for pair in both]
        cost = float(np.mean([c[side] for c in priced])) if priced else None
        return UsageMeans(
            llm_calls=float(np.mean([r.llm_calls for r in recs])),
            input_tokens=float(np.mean([r.input_tokens for r in recs])),
            output_tokens=float(np.mean([r.output_tokens for r in recs])),
            cost_usd=cost,
        )

    return Usage(len(both), len(priced), means(0), means(1))


@dataclass(frozen=True)
class _Stratum:
    """One scored task's pairs as arrays, with its bootstrap replicates of the mean differences."""

    pairs: tuple[Pair, ...]
    sr_a: np.ndarray
    sr_b: np.ndarray
    sc_a: np.ndarray
    sc_b: np.ndarray
    boot_sr: np.ndarray
    boot_sc: np.ndarray


def _stratum(pairs: Sequence[Pair], rng: np.random.Generator, n_boot: int) -> _Stratum:
    sr_a = np.array([p.a.success for p in pairs], dtype=float) * 100.0
    sr_b = np.array([p.b.success for p in pairs], dtype=float) * 100.0
    sc_a = np.array([p.a.score for p in pairs], dtype=float) * 100.0
    sc_b = np.array([p.b.score for p in pairs], dtype=float) * 100.0
    idx = rng.integers(0, len(pairs), size=(n_boot, len(pairs)))
    return _Stratum(
        tuple(pairs), sr_a, sr_b, sc_a, sc_b, (sr_b - sr_a)[idx].mean(axis=1), (sc_b - sc_a)[idx].mean(axis=1)
    )


def _row(
    level: str,
    name: str,
    strata: Sequence[_Stratum],
    weights: Sequence[float],
    alpha: float,
) -> GroupComparison:
    """A row whose value is the weighted mean of its tasks' means (weights sum to 1)."""
    w = np.asarray(weights)
    pairs = [p for s in strata for p in s.pairs]

    def stat(get_a: str, get_b: str, boot: str, p_value: float) -> PairedStat:
        a = float(sum(wi * getattr(s, get_a).mean() for wi, s in zip(w, strata)))
        b = float(sum(wi * getattr(s, get_b).mean() for wi, s in zip(w, strata)))
        reps = sum(wi * getattr(s, boot) for wi, s in zip(w, strata))
        low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
        return PairedStat(a, b, b - a, Interval(float(low), float(high)), p_value)

    a_only = sum(1 for p in pairs if p.a.success and not p.b.success)
    b_only = sum(1 for p in pairs if p.b.success and not p.a.success)
    diffs = np.array([p.b.score - p.a.score for p in pairs])
    solved = [p for p in pairs if p.a.success and p.b.success]
    return GroupComparison(
        level=level,
        name=name,
        pairs=len(pairs),
        sr=stat("sr_a", "sr_b", "boot_sr", _mcnemar_p(a_only, b_only)),
        score=stat("sc_a", "sc_b", "boot_sc", _wilcoxon_p(diffs)),
        a_only=a_only,
        b_only=b_only,
        usage_all=_usage(pairs),
        usage_solved=_usage(solved),
        solved_by_both=len(solved),
    )


def compare(
    a: RecordedRun,
    b: RecordedRun,
    *,
    bootstrap: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Pair the two runs and compute every row; raises MismatchError when they do not pair."""
    if bootstrap < 100:
        raise ValueError(f"bootstrap needs at least 100 resamples, got {bootstrap}")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence}")
    pairs = pair_runs(a, b)
    alpha = 1.0 - confidence
    rng = np.random.default_rng(seed)
    by_task: dict[str, list[Pair]] = {}
    for p in pairs:
        by_task.setdefault(base_name(p.task), []).append(p)
    strata = {t: _stratum(by_task[t], rng, bootstrap) for t in BASE_TASK_NAMES if t in by_task}

    task_rows: list[GroupComparison] = []
    dim_rows: list[GroupComparison] = []
    dim_members: list[list[_Stratum]] = []
    for dim in Dimension:
        members = [strata[t] for t in DIMENSION_TASKS[dim] if t in strata]
        if not members:
            continue
        dim_members.append(members)
        dim_rows.append(_row("dimension", dim.value, members, [1 / len(members)] * len(members), alpha))
        for t in DIMENSION_TASKS[dim]:
            if t in strata:
                task_rows.append(_row("task", t, [strata[t]], [1.0], alpha))
    flat = [s for members in dim_members for s in members]
    weights = [1 / len(dim_members) / len(members) for members in dim_members for _ in members]
    average = _row("average", "Average", flat, weights, alpha)
    return Comparison(
        a=a,
        b=b,
        rows=(average, *dim_rows, *task_rows),
        pairs=len(pairs),
        seeds=tuple(sorted({p.seed for p in pairs})),
        bootstrap=bootstrap,
        confidence=confidence,
        rng_seed=seed,
    )


# --------------------------------------------------------------------------------------------------- output


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _signed(value: float, digits: int = 1) -> str:
    return f"{value:+.{digits}f}"


def _tokens(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k"


def _cost(value: float | None) -> str:
    return "" if value is None else f"${value:.3f}"


def to_markdown(c: Comparison) -> str:
    """The paired tables as markdown."""
    pct = f"{c.confidence * 100:g}%"
    lines = [
        "# Paired comparison",
        "",
        f"- A: `{c.a.label}` ({c.a.policy}/{c.a.config_name})",
        f"- B: `{c.b.label}` ({c.b.policy}/{c.b.config_name})",
        f"- Judging card: A {c.a.judging_card_label}, B {c.b.judging_card_label}.",
        f"- {c.pairs} paired episodes (task, seed, layout) over {sum(1 for r in c.rows if r.level == 'task')} tasks, "
        f"seeds {', '.join(map(str, c.seeds))}.",
        f"- Δ = B − A. {pct} CI: paired bootstrap within tasks ({c.bootstrap} resamples, seed {c.rng_seed}). "
        "SR p: exact McNemar; Score p: Wilcoxon signed-rank (dimensions and Average pool their pairs).",
        "",
        "## Success rate and score",
        "",
        "| Group | Pairs | SR A | SR B | Δ SR | " + pct + " CI | A only / B only | p | "
        "Score A | Score B | Δ Score | " + pct + " CI | p |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in c.rows:
        name = {"average": "**Average**", "dimension": f"*{r.name}*"}.get(r.level, r.name)
        lines.append(
            f"| {name} | {r.pairs} | {r.sr.a:.1f} | {r.sr.b:.1f} | {_signed(r.sr.delta)} | "
            f"[{r.sr.ci.low:+.1f}, {r.sr.ci.high:+.1f}] | {r.a_only} / {r.b_only} | {_p(r.sr.p_value)} | "
            f"{r.score.a:.2f} | {r.score.b:.2f} | {_signed(r.score.delta, 2)} | "
            f"[{r.score.ci.low:+.2f}, {r.score.ci.high:+.2f}] | {_p(r.score.p_value)} |"
        )
    lines.append("")
    for title, attr in (("all paired episodes", "usage_all"), ("episodes both solved", "usage_solved")):
        lines += [
            f"## LLM usage per episode: {title}",
            "",
            "| Group | Episodes | Calls A | Calls B | Δ Calls | Input A | Input B | Output A | Output B | Cost A | "
            "Cost B | Δ Cost |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        shown = 0
        for r in c.rows:
            u: Usage | None = getattr(r, attr)
            if u is None:
                continue
            shown += 1
            d_cost = (
                _signed(u.b.cost_usd - u.a.cost_usd, 3)
                if u.a.cost_usd is not None and u.b.cost_usd is not None
                else ""
            )
            name = {"average": "**All**", "dimension": f"*{r.name}*"}.get(r.level, r.name)
            lines.append(
                f"| {name} | {u.episodes} | {u.a.llm_calls:.1f} | {u.b.llm_calls:.1f} | "
                f"{_signed(u.b.llm_calls - u.a.llm_calls)} | {_tokens(u.a.input_tokens)} | "
                f"{_tokens(u.b.input_tokens)} | "
                f"{_tokens(u.a.output_tokens)} | {_tokens(u.b.output_tokens)} | {_cost(u.a.cost_usd)} | "
                f"{_cost(u.b.cost_usd)} | {d_cost} |"
            )
        if shown == 0:
            lines.append("| (no agent records on both sides) |  |  |  |  |  |  |  |  |  |  |  |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _stat_json(s: PairedStat) -> dict[str, Any]:
    return {"a": s.a, "b": s.b, "delta": s.delta, "ci": [s.ci.low, s.ci.high], "p_value": s.p_value}


def _usage_json(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    side = lambda m: {  # noqa: E731
        "llm_calls": m.llm_calls, "input_tokens": m.input_tokens, "output_tokens": m.output_tokens,
        "cost_usd": m.cost_usd,
    }  # fmt: skip
    return {"episodes": u.episodes, "cost_episodes": u.cost_episodes, "a": side(u.a), "b": side(u.b)}


def to_json(c: Comparison) -> dict[str, Any]:
    """Every number of the comparison, unrounded."""
    return {
        "a": {"path": c.a.label, "root": str(c.a.root), "policy": c.a.policy, "config": c.a.config_name,
              "judging_card": c.a.judging_card_label},
        "b": {"path": c.b.label, "root": str(c.b.root), "policy": c.b.policy, "config": c.b.config_name,
              "judging_card": c.b.judging_card_label},
        "pairs": c.pairs,
        "seeds": list(c.seeds),
        "bootstrap": c.bootstrap,
        "confidence": c.confidence,
        "rng_seed": c.rng_seed,
        "rows": [
            {
                "level": r.level,
                "name": r.name,
                "pairs": r.pairs,
                "sr": _stat_json(r.sr),
                "score": _stat_json(r.score),
                "a_only": r.a_only,
                "b_only": r.b_only,
                "solved_by_both": r.solved_by_both,
                "usage_all": _usage_json(r.usage_all),
                "usage_solved": _usage_json(r.usage_solved),
            }
            for r in c.rows
        ],
        "warnings": list(c.warnings),
    }


def run_cli(
    path_a: str,
    path_b: str,
    *,
    policy_a: str | None = None,
    policy_b: str | None = None,
    bootstrap: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    json_path: str | None = None,
    md_path: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """`pyrua-dojo compare A B`: print the paired tables; exit 2 (and say why) when the runs do not pair."""
    import json

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        a = load_run(path_a, policy_a, label=path_a)
        b = load_run(path_b, policy_b, label=path_b)
        result = compare(a, b, bootstrap=bootstrap, confidence=confidence, seed=seed)
    except MismatchError as exc:
        print(f"pyrua-dojo compare: refused: {exc}", file=err)
        return 2
    except ValueError as exc:
        print(f"pyrua-dojo compare: {exc}", file=err)
        return 2
    text = to_markdown(result)
    out.write(text)
    for w in result.warnings:
        print(f"warning: {w}", file=err)
    if md_path:
        _write(md_path, text)
    if json_path:
        _write(json_path, json.dumps(to_json(result), indent=2, allow_nan=False) + "\n")
    return 0


def _write(path: str, text: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
