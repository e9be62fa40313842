"""`pyrua-dojo report`: numbers behind the plots, the PNG files, and the page rendered in headless Chromium."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest

from pyrua_dojo.catalog import Dimension
from pyrua_dojo.cli import main as cli_main
from pyrua_dojo.evaluate import report
from pyrua_dojo.evaluate.browser import ChromiumNotFound, find_chromium, render_page
from pyrua_dojo.harness.result_files import AgentRecord, ResultWriter, RunLocation, additional_info, write_agent_record
from pyrua_dojo.evaluate.summarize import summarize

FIXTURE = Path(__file__).parent / "fixtures" / "robodojo-results"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        return find_chromium()
    except ChromiumNotFound as exc:
        pytest.skip(f"headless Chromium is needed for the rendering tests and was not found ({exc}); "
                    "CI installs it with `apt-get install -y chromium`")


# (task, layout, success, score, status, llm_calls, input_tokens, steps_used, failure)
EPISODES = [
    ("general_pickup", 0, True, 1.0, "episode_ended", 4, 40_000, 120, None),
    ("general_pickup", 1, False, 0.0, "episode_ended", 9, 210_000, 200, "step limit"),
    ("general_pickup", 2, True, 1.0, "finished", 6, 90_000, 150, None),
    ("general_pickup", 3, False, 0.0, "call_budget", 30, 800_000, 60, "step limit"),
    ("stack_blocks", 0, True, 1.0, "episode_ended", 12, 300_000, 400, None),
    ("stack_blocks", 1, False, 0.5, "planner_error", 3, 20_000, 90, "query violated: table_collision"),
    ("stack_blocks_random", 0, False, 0.0, "episode_ended", 15, 500_000, 550, "step limit"),
    ("stack_blocks_random", 1, True, 1.0, "episode_ended", 8, 150_000, 300, None),
]
LIMITS = {"general_pickup": 200, "stack_blocks": 550, "stack_blocks_random": 550}


def make_tree(root: Path, twin: dict | None = None) -> Path:
    """A twin-style results tree booked through ResultWriter with an agent record per episode (with the twin's
    conditions `twin` in every record when given)."""
    for task, layout, success, score, status, calls, tokens, steps, failure in EPISODES:
        loc = RunLocation(root / "RoboDojo", task, "PyRUA_Dojo", "arx_x5", 0, additional_info("gpt-5", "joint"),
                          "2026-11-01_10-00-00")
        ResultWriter(loc).record(layout, success, score)
        extra = {"failure": failure} if failure else {}
        if twin is not None:
            extra["twin"] = twin
        write_agent_record(loc.path, AgentRecord(
            task=task, seed=0, layout_id=layout, success=success, score=score, status=status, llm_calls=calls,
            input_tokens=tokens, cached_tokens=tokens // 2, output_tokens=calls * 500, cost_usd=tokens * 1e-6,
            steps_used=steps, step_limit=LIMITS[task], wall_s=60.0 * calls, extra=extra,
        ))
    return root / "RoboDojo"


def test_solved_within_counts_successes_inside_the_budget(tmp_path):
    _tree, (p,), _w = report.collect(make_tree(tmp_path))
    recs = p.records
    assert len(recs) == 8
    assert report.solved_within(recs, 0) == 0
    assert report.solved_within(recs, 40_000) == 1 / 8
    assert report.solved_within(recs, 150_000) == 3 / 8
    assert report.solved_within(recs, 10**9) == 4 / 8  # every success, whatever its tokens
    assert report.solved_within((), 10) == 0


def test_partial_groups_follow_summarize_rules_over_the_episodes_there(tmp_path):
    _tree, (p,), _w = report.collect(make_tree(tmp_path))
    # general_pickup (Open): 2 of 4 solved, score 50; stack_blocks merges its 2 base and 2 random episodes:
    # SR 2/4 = 50, Score (1 + 0.5 + 0 + 1) / 4 = 62.5
    assert p.task_cells["general_pickup"][0] == (50.0, 50.0, 4)
    assert p.task_cells["stack_blocks"][0] == (50.0, 62.5, 4)
    assert "stack_blocks_random" not in p.task_cells
    gen, open_, avg = p.groups["Generalization"], p.groups["Open"], p.groups["Average"]
    assert (gen.sr, gen.score, gen.official) == (50.0, 62.5, False)
    assert (open_.sr, open_.score, open_.official) == (50.0, 50.0, False)
    assert (avg.sr, avg.score) == (50.0, 56.25)  # mean of the two dimensions with data
    assert "Precision" not in p.groups


def test_official_values_are_summarize_s(tmp_path):
    _tree, policies, _w = report.collect(FIXTURE)
    summary = summarize(FIXTURE)
    by_name = {p.policy: p for p in policies}
    ours = by_name["PyRUA_Dojo"]
    ps = summary.policies["PyRUA_Dojo"]
    assert ours.groups["Average"].official
    assert ours.groups["Average"].sr == pytest.approx(ps.average.sr.mean)
    assert ours.groups["Average"].score == pytest.approx(ps.average.score.mean)
    assert ours.groups["Generalization"].sr == pytest.approx(ps.dimensions[Dimension.GENERALIZATION].sr.mean)


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000
    import cv2

    img = cv2.imread(str(path))
    assert img is not None and float(np.std(img)) > 5


def test_report_with_agent_records_in_chromium(tmp_path, chromium):
    root = make_tree(tmp_path / "results")
    out = tmp_path / "report"
    stdout = io.StringIO()
    assert report.run_cli(str(root), out=str(out), stdout=stdout, err=io.StringIO()) == 0
    names = {"dimensions", "token_budget", "llm_calls", "steps", "failures"}
    assert {p.stem for p in out.glob("*.png")} == names
    for png in out.glob("*.png"):
        _assert_png(png)
    assert str(out / "report.html") in stdout.getvalue()
    # the page embeds the plots: a copy of the page alone still shows them all
    alone = tmp_path / "copy" / "r.html"
    alone.parent.mkdir()
    shutil.copy(out / "report.html", alone)
    rendered = render_page(alone, screenshot=tmp_path / "shot.png")
    assert (rendered.images, rendered.loaded) == (5, 5), rendered.check_text
    for name in names:
        assert f'id="plot-{name}"' in rendered.dom
    dom = rendered.dom
    assert "PyRUA-Lean agent (RGB) (paper, one seed)" in dom and "51.6 / 58.2" in dom
    assert "VPP2 (leaderboard)" in dom and "32.3 / 39.3" in dom and "31.4 / 36.3" in dom
    assert "50.0 / 62.5 *" in dom  # the partial Generalization value, marked
    assert "are partial" in dom
    import cv2

    shot = cv2.imread(str(rendered.screenshot))
    assert shot is not None and float(np.std(shot)) > 5


def test_report_states_the_twin_conditions_of_its_episodes(tmp_path):
    twin = {"segmentation": "twin", "seg_noise": "realistic", "station": "unknown"}
    built = report.build_report(make_tree(tmp_path / "results", twin=twin), tmp_path / "report")
    assert "Twin conditions: segmentation noise realistic, station unknown (8 episodes)" in built.notes
    assert "Twin conditions: segmentation noise realistic" in built.page.read_text()


def test_robodojo_results_without_records_skip_the_agent_plots(tmp_path, chromium):
    tree = tmp_path / "robodojo"
    shutil.copytree(FIXTURE / "RoboDojo", tree / "RoboDojo")
    for episodes in list((tree / "RoboDojo").rglob("episodes")):
        shutil.rmtree(episodes)
    err = io.StringIO()
    assert cli_main(["report", str(tree), "--out", str(tmp_path / "out")]) == 0
    assert report.run_cli(str(tree), out=str(tmp_path / "out2"), stdout=io.StringIO(), err=err) == 0
    assert "No agent records" in err.getvalue()
    assert [p.name for p in (tmp_path / "out").glob("*.png")] == ["dimensions.png"]
    rendered = render_page(tmp_path / "out" / "report.html")
    assert (rendered.images, rendered.loaded) == (1, 1), rendered.check_text
    assert "No agent records in this tree" in rendered.dom
    assert 'id="plot-token_budget"' not in rendered.dom
    # the default output directory sits next to the results root, never inside it
    assert report.run_cli(str(tree), stdout=io.StringIO(), err=io.StringIO()) == 0
    assert (tree / "report" / "report.html").is_file()
    assert not (tree / "RoboDojo" / "report").exists()


def test_bad_input_is_a_clear_error(tmp_path):
    err = io.StringIO()
    assert report.run_cli(str(tmp_path / "missing"), stdout=io.StringIO(), err=err) == 2
    assert "results directory not found" in err.getvalue()
    (tmp_path / "empty").mkdir()
    err = io.StringIO()
    assert report.run_cli(str(tmp_path / "empty"), stdout=io.StringIO(), err=err) == 2
    assert "no RoboDojo results" in err.getvalue()
    root = make_tree(tmp_path / "r")
    err = io.StringIO()
    assert report.run_cli(str(root), out=str(root / "inside"), stdout=io.StringIO(), err=err) == 2
    assert "must not be written inside the results root" in err.getvalue()
    assert not (root / "inside").exists()
