"""`pyrua-dojo play`: our Model behind a real websocket server, the plugin's deploy.py driving the twin, a twin
segmentation server, then the agent's run directory filed next to RoboDojo's `_result.json` for `compare`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pyrua_dojo.cli import main
from pyrua_dojo.harness.result_files import agent_record_dir, load_agent_records, read_agent_record, read_result_file
from pyrua_dojo.evaluate.play import PlayOptions
from tests.fixtures.policies.helpers import run_dir_of


@pytest.mark.slow
def test_play_one_episode_through_the_wire(tmp_path, capsys):
    results, runs = tmp_path / "eval_result", tmp_path / "runs"
    rc = main(["play", "--task", "stack_blocks", "--seed", "0", "--layout", "1", "--results", str(results),
               "--run-root", str(runs), "--set", "hold_steps=100", "--seg-noise", "none", "--station", "exact"])
    out = capsys.readouterr().out
    assert rc == 0, out
    # The first line says which masks and which station the figures come from.
    assert out.splitlines()[0] == "play: stack_blocks seed 0 layout 1; twin masks, noise none; station exact"
    run_dir = run_dir_of(results, "stack_blocks", "PyRUA_Dojo", ckpt="play")
    agent_dir = agent_record_dir(run_dir, 1)
    assert f"run directory: {agent_dir}" in out
    verdict = r"(success|fail \(step limit\)), score [01]\.\d\d, \d+/550 steps"
    assert re.search(r"play: stack_blocks seed 0 layout 1: " + verdict, out)

    # RoboDojo's booking and our agent record agree, and compare can read the record
    run = read_result_file(run_dir / "_result.json")
    [episode] = run.episodes
    record = read_agent_record(agent_dir)
    assert record is not None
    assert (record.task, record.seed, record.layout_id, record.step_limit) == ("stack_blocks", 0, 1, 550)
    assert (record.success, record.score) == (episode.success, episode.score)
    # The agent either finished its program, or the twin ended the episode under it (a success ends at once).
    assert record.status in ("finished", "cancelled") and record.llm_calls >= 3 and 0 < record.steps_used <= 550
    assert record.status == "finished" or episode.success
    assert record.cost_usd == 0.0 and record.input_tokens == 0  # the scripted planner makes no LLM calls
    assert record.extra["twin"] == {"segmentation": "twin", "seg_noise": "none", "station": "exact"}
    records, warnings = load_agent_records(run)
    assert records == {1: record} and warnings == ()

    # the agent's own trace moved with it (and its old place points there), its keys kept in the record file
    data = json.loads((agent_dir / "result.json").read_text())
    assert data["schema"] == "pyrua-dojo-run-v1" and data["episode"]["closed_by"] == "reset"
    assert data["config"]["segmentation_url"].startswith("http://127.0.0.1:")
    [index] = [json.loads(line) for line in (runs / "episodes.jsonl").read_text().splitlines()]
    assert Path(index["run_dir"]).is_symlink() and Path(index["run_dir"]).resolve() == agent_dir.resolve()
    turns = [json.loads(line) for line in (agent_dir / "turns.jsonl").read_text().splitlines()]
    first = turns[0]
    assert first["status"] == "ok" and first["stdout"].count("footprint") == 3  # the twin segmentation server answered


def test_play_and_eval_default_to_realistic_masks_and_an_unknown_station():
    from pyrua_dojo.cli import build_parser

    for argv in (["play", "--task", "stack_blocks"], ["eval", "--tasks", "stack_blocks"],
                 ["bench", "programs"], ["bench", "locate"]):
        args = build_parser().parse_args(argv)
        noise = args.seg_noise if hasattr(args, "seg_noise") else args.noise
        assert (noise, args.station) == ("realistic", "unknown"), argv
    options = PlayOptions(task="stack_blocks")
    assert (options.seg_noise, options.station) == ("realistic", "unknown")
    with pytest.raises(ValueError, match="segmentation noise must be one of"):
        PlayOptions(task="stack_blocks", seg_noise="perfect")
    with pytest.raises(ValueError, match="station must be one of"):
        PlayOptions(task="stack_blocks", station="guessed")


def test_bad_play_options_are_clear_errors(tmp_path, capsys):
    assert main(["play", "--task", "stack_blocks", "--segmentation", "ftp://x", "--results", str(tmp_path)]) == 2
    assert "segmentation must be twin, none or an http(s) URL" in capsys.readouterr().err
    assert main(["play", "--task", "no_such_task", "--segmentation", "none", "--results", str(tmp_path)]) == 2
    assert "unknown twin task 'no_such_task'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="replay planner needs --replay-from"):
        PlayOptions(task="stack_blocks", planner="replay")
