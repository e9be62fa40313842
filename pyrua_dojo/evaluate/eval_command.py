"""`pyrua-dojo eval` on the command line: its settings from the arguments, the run, and the summary table.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from pyrua_dojo.evaluate.run_options import run_options_from_args
from pyrua_dojo.evaluate.runner import EvalReport, run_eval
from pyrua_dojo.evaluate.plan import EvalSettings, Shard

__all__ = [
    "run_cli",
]



def summary_rows(report: EvalReport) -> list[tuple[str, int, int, int, float | None, float | None]]:
    """(task, seed, booked, planned, SR %, Score) per (task, seed) of the plan, over the episodes booked."""
    rows = []
    for (task, seed), _loc in sorted(report.plan.locations.items()):
        keys = [k for k in report.plan.keys if (k.task, k.seed) == (task, seed)]
        eps = [report.booked[k] for k in keys if k in report.booked]
        sr = sum(e.success for e in eps) / len(eps) * 100 if eps else None
        score = sum(e.score for e in eps) / len(eps) * 100 if eps else None
        rows.append((task, seed, len(eps), len(keys), sr, score))
    return rows


def print_summary(report: EvalReport, settings: EvalSettings, out: TextIO) -> None:
    """The per (task, seed) table over booked episodes, what is left, and where to look next."""
    from rich.console import Console
    from rich.table import Table

    from pyrua_dojo.evaluate.play import conditions_line

    conditions = conditions_line(settings.segmentation, settings.seg_noise, settings.station)
    table = Table(title=f"run {report.plan.run_id}: booked episodes (shard {settings.shard}); {conditions}")
    for name in ("task", "seed", "booked / planned", "SR %", "Score"):
        table.add_column(name, justify="left" if name == "task" else "right")
    total_b = total_p = 0
    succ = 0.0
    score = 0.0
    for task, seed, booked, planned, sr, sc in summary_rows(report):
        table.add_row(task, str(seed), f"{booked} / {planned}", "-" if sr is None else f"{sr:.1f}",
                      "-" if sc is None else f"{sc:.1f}")
        total_b += booked
        total_p += planned
        succ += (sr or 0.0) * booked / 100
        score += (sc or 0.0) * booked / 100
    if total_b:
        table.add_row("all", "", f"{total_b} / {total_p}", f"{succ / total_b * 100:.1f}",
                      f"{score / total_b * 100:.1f}")
    con = Console(file=out, width=120)
    con.print(table)
    for d in report.not_run:
        con.print(f"{'dropped' if d.dropped else 'not booked'}: {d.key}: {d.error}", highlight=False, soft_wrap=True)
    dropped = {d.key for d in report.not_run if d.dropped}
    left = [k for k in report.plan.keys if k not in report.booked and k not in dropped]
    if left:
        con.print(f"{len(left)} episode(s) not booked yet: run the same command again to run them.", soft_wrap=True)
    con.print(f"next: pyrua-dojo summarize {settings.out}   |   pyrua-dojo report {settings.out}", soft_wrap=True,
              highlight=False)


def _split(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"{what}: give a comma-separated list, got {text!r}")
    return items


def settings_from_args(args: Any) -> EvalSettings:
    """EvalSettings from the parsed `eval` command line; ValueError on bad input."""
    try:
        seeds = tuple(int(s) for s in _split(args.seeds, "--seeds"))
    except ValueError as exc:
        raise ValueError(f"--seeds takes integers like 0,1,2 ({exc})") from None
    return EvalSettings(
        tasks=tuple(_split(args.tasks, "--tasks")),
        seeds=seeds,
        episodes=args.episodes,
        workers=args.workers,
        shard=Shard.parse(args.shard) if args.shard else Shard(),
        out=Path(args.out),
        run_id=args.run_id,
        new_run=args.new_run,
        ckpt_name=args.ckpt_name,
        layouts=args.layouts,
        **run_options_from_args(args),
    )


def run_cli(args: Any, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`pyrua-dojo eval ...`: 0 when every planned episode is booked, 1 when some are not (yet), 2 on bad input,
    130 when interrupted."""
    out = out or sys.stdout
    err = err or sys.stderr
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args)
        from rich.console import Console

        report = run_eval(settings, console=Console(file=err))
    except ValueError as exc:
        print(f"pyrua-dojo eval: {exc}", file=err)
        return 2
    print_summary(report, settings, out)
    if report.interrupted:
        return 130
    return 0 if report.complete else 1
