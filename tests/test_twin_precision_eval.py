"""`pyrua-dojo eval` runs each insertion task end to end (scripted planner, a trivial program): every episode holds
to its step limit and is booked as failed in RoboDojo's result layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyrua_dojo.harness.result_files import read_result_file
from pyrua_dojo.twin.tasks_precision import PRECISION_TASKS

pytestmark = pytest.mark.slow

PROGRAM = """# a trivial program: look at the state, go home
# %% state
print(robo.state())
# %% home
robo.home()
"""


def test_eval_books_each_precision_task_failed_at_its_step_limit(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    tasks = [row[0] for row in PRECISION_TASKS]
    cmd = [sys.executable, "-m", "pyrua_dojo.cli", "eval", "--tasks", ",".join(tasks), "--episodes", "1",
           "--program", str(program), "--segmentation", "none", "--workers", "1", "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "MUJOCO_GL": "egl", "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    for task in tasks:
        (run_file,) = (tmp_path / "out" / "RoboDojo" / task).glob("*/*/*/*/_result.json")
        run = read_result_file(run_file)
        assert [(e.layout_id, e.success, e.score) for e in run.episodes] == [(0, False, 0.0)]
        (episode,) = run_file.parent.glob("episodes/layout_0000/result.json")
        record = json.loads(episode.read_text())
        assert record["failure"] == "step limit" and record["step_limit"] == record["meta"]["step_limit"]
