"""Reference programs: cell splitting, and the programs bench running the whole agent stack on the twin."""

from __future__ import annotations

import pytest

from pyrua_dojo.programs import available, cells, program_for, split_cells
from pyrua_dojo.programs.bench import run, summarize


def test_percent_format_cells_keep_titles_and_drop_the_header():
    text = '"""header"""\n\n# %% look\nx = 1\n\n# %% act\n# then\ny = x\n# %% empty\n# only comments\n'
    assert split_cells(text) == ["# look\nx = 1\n", "# act\n# then\ny = x\n"]


def test_every_program_is_valid_python_and_random_variants_share_their_base():
    for task in available():
        for cell in cells(task):
            compile(cell, f"<{task}>", "exec")
    assert program_for("stack_blocks_random") == "stack_blocks"
    with pytest.raises(ValueError, match="no reference program"):
        cells("fold_clothes")


@pytest.mark.slow
def test_programs_bench_runs_and_general_pickup_holds_its_success_rate(tmp_path):
    episodes = run(["general_pickup"], layouts=5, seed=0, run_root=tmp_path, progress=False)
    [row] = summarize(episodes)
    assert row["episodes"] == 5
    # 92 % over 50 layouts (`pyrua-dojo bench programs`); layout 0 is a known miss (its remote is hidden).
    assert row["success_rate"] >= 0.8
    assert float(row["steps_success"]) < 0.6 * 200
    assert all((tmp_path / "general_pickup").iterdir())


@pytest.mark.slow
def test_align_blocks_program_solves_some_layouts(tmp_path):
    episodes = run(["align_blocks"], layouts=5, seed=0, run_root=tmp_path, progress=False)
    [row] = summarize(episodes)
    assert row["episodes"] == 5
    # 50 of 50 layouts solved on the twin (124 steps), all five of these (122 steps on these five;
    # `pyrua-dojo bench programs --tasks align_blocks --layouts 50` for the figure).
    assert row["success_rate"] >= 0.8
    assert float(row["steps_success"]) < 0.7 * 200


@pytest.mark.slow
def test_stack_blocks_program_holds_its_success_rate(tmp_path):
    episodes = run(["stack_blocks"], layouts=5, seed=0, run_root=tmp_path, progress=False)
    [row] = summarize(episodes)
    assert row["episodes"] == 5
    # 48 of 50 layouts solved on the twin, all five of these (`pyrua-dojo bench programs --tasks stack_blocks`).
    assert row["success_rate"] >= 0.8
    assert float(row["steps_success"]) < 0.6 * 550


@pytest.mark.slow
def test_stack_blocks_by_language_program_stacks_in_the_named_order(tmp_path):
    episodes = run(["stack_blocks_by_language"], layouts=4, seed=0, run_root=tmp_path, progress=False)
    [row] = summarize(episodes)
    assert row["episodes"] == 4
    # 50 of 50 layouts solved on the twin (`pyrua-dojo bench programs --tasks stack_blocks_by_language`).
    assert row["success_rate"] >= 0.75
