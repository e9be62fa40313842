"""`compare` on two recorded runs built on disk, with expected numbers worked out by hand, and on mismatched runs.

Runs A and B (seeds 0 and 1, layouts 0..9 per task and seed; stack_blocks uses layouts 0..4 of the base task and
0..4 of stack_blocks_random):

- stack_blocks: A fails everything at 0.15 except stack_blocks_random seed 0 layout 4 (a success B fails at 0.0);
  B solves base layouts 0 and 1 at both seeds and fails the rest at 0.0.  -> a_only 1, b_only 4.
- deposit_coin: A solves layouts 0..3, B layouts 0..7, failures score 0.2 on both.  -> a_only 0, b_only 8.
- swap_T: A solves layouts 0..4 at both seeds, B only at seed 0; failures score 0.  -> a_only 5, b_only 0.

Agent records exist on both sides for deposit_coin only (B's cost is unknown on seed 1 layout 9), and on A's
side only for stack_blocks.
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest
from scipy import stats

from pyrua_dojo.cli import main as cli_main
from pyrua_dojo.evaluate.compare import MismatchError, compare, load_run, pair_runs, to_json, to_markdown
from pyrua_dojo.harness.result_files import AgentRecord, ResultWriter, RunLocation, write_agent_record

RUN_ID = "2026-08-10_09-00-00"


def _outcome(side: str, task: str, seed: int, layout: int) -> tuple[bool, float]:
    if task in ("stack_blocks", "stack_blocks_random"):
        if side == "A":
            return (True, 1.0) if (task, seed, layout) == ("stack_blocks_random", 0, 4) else (False, 0.15)
        return (True, 1.0) if task == "stack_blocks" and layout < 2 else (False, 0.0)
    if task == "deposit_coin":
        return (True, 1.0) if layout < (4 if side == "A" else 8) else (False, 0.2)
    assert task == "swap_T"
    return (True, 1.0) if layout < 5 and (side == "A" or seed == 0) else (False, 0.0)


LAYOUTS = {"stack_blocks": range(5), "stack_blocks_random": range(5), "deposit_coin": range(10), "swap_T": range(10)}


def _record(side: str, task: str, seed: int, layout: int, success: bool, score: float) -> AgentRecord:
    a = side == "A"
    return AgentRecord(
        task=task, seed=seed, layout_id=layout, success=success, score=score, status="x",
        llm_calls=10 + layout if a else 20, input_tokens=100_000 if a else 300_000, cached_tokens=0,
        output_tokens=2_000 if a else 4_000, cost_usd=0.5 if a else (None if (seed, layout) == (1, 9) else 1.0),
        steps_used=100, step_limit=300, wall_s=60.0,
    )  # fmt: skip


def build_run(root: Path, side: str, policy: str = "PyRUA_Dojo", skip: tuple[str, ...] = (),
              seeds: dict[str, tuple[int, ...]] | None = None) -> Path:  # fmt: skip
    for task, layouts in LAYOUTS.items():
        if task in skip:
            continue
        for seed in (seeds or {}).get(task, (0, 1)):
            loc = RunLocation(root, task, policy, "arx_x5", seed, "ckpt_name=m,action_type=joint", RUN_ID)
            writer = ResultWriter(loc)
            for layout in layouts:
                success, score = _outcome(side, task, seed, layout)
                writer.record(layout, success, score)
                if task == "deposit_coin" or (side == "A" and task.startswith("stack_blocks")):
                    write_agent_record(loc.path, _record(side, task, seed, layout, success, score))
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("compare")
    return build_run(base / "a", "A"), build_run(base / "b", "B")


def test_pairs_and_rates(runs: tuple[Path, Path]) -> None:
    a, b = load_run(runs[0]), load_run(runs[1])
    assert len(pair_runs(a, b)) == 2 * (5 + 5 + 10 + 10)
    c = compare(a, b, bootstrap=2000, seed=1)
    assert c.pairs == 60 and c.seeds == (0, 1)
    assert [r.name for r in c.rows] == [
        "Average", "Generalization", "Precision", "Memory", "stack_blocks", "deposit_coin", "swap_T",
    ]  # fmt: skip
    sb, dc, st = c.row("stack_blocks"), c.row("deposit_coin"), c.row("swap_T")
    assert (sb.pairs, sb.a_only, sb.b_only) == (20, 1, 4)
    assert (sb.sr.a, sb.sr.b, sb.sr.delta) == pytest.approx((5.0, 20.0, 15.0))
    assert (sb.score.a, sb.score.b) == pytest.approx(((1 + 19 * 0.15) / 20 * 100, 4 / 20 * 100))  # 19.25, 20
    assert sb.sr.p_value == pytest.approx((1 + 5 + 5 + 1) / 32)  # exact McNemar: P(X <= 1 or X >= 4), X ~ B(5, .5)
    assert (dc.sr.a, dc.sr.b, dc.a_only, dc.b_only) == (40.0, 80.0, 0, 8)
    assert (dc.score.a, dc.score.b) == pytest.approx((52.0, 84.0))  # (8 + 12 * 0.2) / 20, (16 + 4 * 0.2) / 20
    assert dc.sr.p_value == pytest.approx(2 * 0.5**8)
    assert dc.score.p_value == pytest.approx(stats.wilcoxon([0.8] * 8).pvalue)  # 8 pairs 0.2 -> 1.0, 12 ties
    assert (st.sr.delta, st.a_only, st.b_only, st.sr.p_value) == (-25.0, 5, 0, pytest.approx(2 * 0.5**5))
    # Dimensions hold one task each here; the Average is the mean of the three dimensions.
    avg = c.row("Average")
    assert avg.sr.a == pytest.approx((5 + 40 + 50) / 3)
    assert avg.sr.b == pytest.approx((20 + 80 + 25) / 3)
    assert avg.sr.delta == pytest.approx((15 + 40 - 25) / 3)
    assert (avg.a_only, avg.b_only) == (6, 12)
    assert avg.sr.p_value == pytest.approx(2 * sum(comb(18, k) for k in range(7)) / 2**18)  # pooled McNemar
    assert c.row("Memory").sr.delta == -25.0


def test_bootstrap_is_seeded_and_brackets_the_delta(runs: tuple[Path, Path]) -> None:
    a, b = load_run(runs[0]), load_run(runs[1])
    c1 = compare(a, b, bootstrap=2000, seed=7)
    c2 = compare(a, b, bootstrap=2000, seed=7)
    c3 = compare(a, b, bootstrap=2000, seed=8)
    assert [r.sr.ci for r in c1.rows] == [r.sr.ci for r in c2.rows]
    assert [r.sr.ci for r in c1.rows] != [r.sr.ci for r in c3.rows]
    for r in c1.rows:
        assert r.sr.ci.low <= r.sr.delta <= r.sr.ci.high, r.name
        assert r.score.ci.low <= r.score.delta <= r.score.ci.high, r.name
    dc = c1.row("deposit_coin")
    assert dc.sr.ci.low > 0  # 8 of 20 pairs improve and none get worse
    assert c1.row("swap_T").sr.ci.high < 0
    same = compare(a, a, bootstrap=500)
    assert all((r.sr.ci.low, r.sr.ci.high, r.sr.p_value, r.score.p_value) == (0, 0, 1.0, 1.0) for r in same.rows)


def test_llm_usage_from_agent_records(runs: tuple[Path, Path]) -> None:
    c = compare(load_run(runs[0]), load_run(runs[1]), bootstrap=500)
    dc = c.row("deposit_coin")
    assert dc.usage_all is not None and dc.usage_solved is not None
    assert dc.usage_all.episodes == 20 and dc.usage_all.cost_episodes == 19
    assert dc.usage_all.a.llm_calls == pytest.approx(10 + 4.5)  # 10 + layout, layouts 0..9
    assert dc.usage_all.b.llm_calls == 20
    assert (dc.usage_all.a.input_tokens, dc.usage_all.b.input_tokens) == (100_000, 300_000)
    assert (dc.usage_all.a.output_tokens, dc.usage_all.b.output_tokens) == (2_000, 4_000)
    assert (dc.usage_all.a.cost_usd, dc.usage_all.b.cost_usd) == pytest.approx((0.5, 1.0))
    assert dc.solved_by_both == 8 and dc.usage_solved.episodes == 8  # layouts 0..3 at both seeds
    assert dc.usage_solved.a.llm_calls == pytest.approx(10 + 1.5)
    assert c.row("stack_blocks").usage_all is None  # records on A's side only
    assert c.row("swap_T").usage_all is None
    assert c.row("Average").usage_all == dc.usage_all


def test_markdown_and_json(runs: tuple[Path, Path]) -> None:
    c = compare(load_run(runs[0]), load_run(runs[1]), bootstrap=500)
    md = to_markdown(c)
    row = next(line for line in md.splitlines() if line.startswith("| deposit_coin |"))
    cells = [x.strip() for x in row.strip("|").split("|")]
    assert cells[:5] == ["deposit_coin", "20", "40.0", "80.0", "+40.0"]
    assert cells[6] == "0 / 8" and cells[7] == "0.008"
    assert "| deposit_coin | 20 | 14.5 | 20.0 | +5.5 | 100.0k | 300.0k | 2.0k | 4.0k | $0.500 | $1.000 | +0.500 |" in md
    data = json.loads(json.dumps(to_json(c)))
    assert data["pairs"] == 60 and data["rows"][0]["name"] == "Average"
    assert data["rows"][0]["sr"]["delta"] == pytest.approx(10.0)


def test_cli_prints_the_table(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.json"
    assert cli_main(["compare", str(runs[0]), str(runs[1]), "--bootstrap", "300", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "# Paired comparison" in printed and "| swap_T | 20 |" in printed
    assert json.loads(out.read_text())["rows"][-1]["name"] == "swap_T"


def _refusal(a: Path, b: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(["compare", str(a), str(b), "--bootstrap", "200"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_refuses_different_tasks_and_seeds(runs: tuple[Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    b = build_run(tmp_path / "b", "B", skip=("swap_T",), seeds={"deposit_coin": (0,)})
    err = _refusal(runs[0], b, capsys)
    assert "refused" in err
    assert "tasks only in A" in err and "swap_T" in err
    assert "deposit_coin: different seeds: A has [0, 1], B has [0]" in err
    with pytest.raises(MismatchError) as info:
        pair_runs(load_run(runs[0]), load_run(b))
    assert len(info.value.reasons) == 2


def test_refuses_duplicate_unmatched_and_unlabelled_episodes(runs: tuple[Path, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    b = build_run(tmp_path / "b", "B")
    # swap_T seed 0 in B: layout 9 replaced by 12; deposit_coin seed 1: layout 3 booked twice (hand-edited file).
    swap = b / f"swap_T/PyRUA_Dojo/arx_x5/0_ckpt_name=m,action_type=joint/{RUN_ID}/_result.json"
    data = json.loads(swap.read_text())
    data["details"]["9"]["layout_id"] = 12
    swap.write_text(json.dumps(data, indent=2))
    coin = b / f"deposit_coin/PyRUA_Dojo/arx_x5/1_ckpt_name=m,action_type=joint/{RUN_ID}/_result.json"
    data = json.loads(coin.read_text())
    data["details"]["9"]["layout_id"] = 3
    coin.write_text(json.dumps(data, indent=2))
    err = _refusal(runs[0], b, capsys)
    assert "swap_T seed 0: layouts only in A: 9" in err
    assert "swap_T seed 0: layouts only in B: 12" in err
    assert "deposit_coin seed 1: B ran layouts 3 more than once" in err
    assert "deposit_coin seed 1: layouts only in A: 9" in err
    # Results without layout ids (older RoboDojo files) cannot be paired.
    data = json.loads(coin.read_text())
    del data["details"]["0"]["layout_id"]
    coin.write_text(json.dumps(data))
    assert "B episodes 0 have no layout_id" in _refusal(runs[0], b, capsys)


def test_selects_a_policy_when_a_tree_holds_several(runs: tuple[Path, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    both = tmp_path / "both"
    build_run(both, "A", policy="Baseline")
    build_run(both, "B", policy="Candidate")
    err = _refusal(both, both, capsys)
    assert "holds several policy/config runs (Baseline/arx_x5, Candidate/arx_x5)" in err
    rc = cli_main(["compare", str(both), str(both), "--policy-a", "Baseline", "--policy-b", "Candidate/arx_x5",
                   "--bootstrap", "200"])  # fmt: skip
    assert rc == 0
    assert "(Candidate/arx_x5)" in capsys.readouterr().out
    assert "no results for 'Nobody'" in _refusal_with(both, ["--policy-a", "Nobody"], capsys)
    assert "results directory not found" in _refusal(tmp_path / "missing", both, capsys)


def _refusal_with(root: Path, extra: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(["compare", str(root), str(root), *extra]) == 2
    return capsys.readouterr().err
