"""Reference programs: cell splitting, and the programs bench running the whole agent stack on the twin."""

from __future__ import annotations

import pytest

from pyrua_dojo.catalog import TASKS
from pyrua_dojo.programs import available, cells, program_for, split_cells
from pyrua_dojo.benchmarks.programs import ORACLE, run, summarize


def test_percent_format_cells_keep_titles_and_drop_the_header():
    text = '"""header"""\n\n# %% look\nx = 1\n\n# %% act\n# then\ny = x\n# %% empty\n# only comments\n'
    assert split_cells(text) == ["# look\nx = 1\n", "# act\n# then\ny = x\n"]


def test_an_include_line_stands_for_the_included_files_cells():
    shared = '"""helpers"""\n# %% helpers\ndef f():\n    return 1\n'
    text = "# %% look\nx = 1\n# %% include _shared\n# %% act\ny = f()\n"
    got = split_cells(text, include={"_shared": shared}.__getitem__)
    assert got == ["# look\nx = 1\n", "# helpers\ndef f():\n    return 1\n", "# act\ny = f()\n"]
    with pytest.raises(ValueError, match="includes '_shared'"):
        split_cells(text)


def test_the_stacking_programs_share_their_helpers_cell():
    a, b = cells("stack_blocks"), cells("stack_blocks_by_language")
    assert len(a) == len(b) == 3 and a[1] == b[1] and "def pick(" in a[1] and "def place(" in a[1]
    assert "def measure(" in a[2] and "def measure(" in b[2]  # each program measures its own way


def test_every_program_is_valid_python_and_random_variants_share_their_base():
    assert available() and set(available()) <= set(TASKS)  # programs only: no other module of the package
    for task in available():
        for cell in cells(task):
            compile(cell, f"<{task}>", "exec")
    assert program_for("stack_blocks_random") == "stack_blocks"
    with pytest.raises(ValueError, match="no reference program"):
        cells("fold_clothes")


# Per task: layouts played, the least success rate and the most steps (fraction of the limit) on solved episodes.
# Over 50 layouts (`pyrua-dojo bench programs --layouts 50`): general_pickup 92 % (layout 0 is a known miss: its
# remote is hidden), align_blocks 100 % (124 steps), stack_blocks 96 %, stack_blocks_by_language 100 %.
# stack_blocks measures the stack's top before each placement since issue 17 (about 30 more steps: 337 of 550 on
# these five layouts, 61 %), so its bound is 65 % of the limit.
PROGRAM_CHECKS = [
    ("general_pickup", 5, 0.8, 0.6),
    ("align_blocks", 5, 0.8, 0.7),
    ("stack_blocks", 5, 0.8, 0.65),
    ("stack_blocks_by_language", 4, 0.75, None),
]


@pytest.mark.slow
@pytest.mark.parametrize(("task", "layouts", "least_success", "most_steps"), PROGRAM_CHECKS)
def test_programs_bench_runs_and_each_program_holds_its_success_rate(
    tmp_path, task, layouts, least_success, most_steps
):
    # The thresholds are the oracle's (exact masks, the agent's own station): say so explicitly.
    episodes = run([task], layouts=layouts, seed=0, run_root=tmp_path, conditions=ORACLE, progress=False)
    [row] = summarize(episodes)
    assert row["episodes"] == layouts
    assert row["success_rate"] >= least_success
    if most_steps is not None:
        assert float(row["steps_success"]) < most_steps * float(row["step_limit"])
    assert all((tmp_path / task).iterdir())
