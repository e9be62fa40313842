"""Judging cards: every task has a text of what RoboDojo's check accepts, the twin's thresholds appear on it in the
card's units, the policy setting switches it on and off, and the run records the setting (result.json, _eval.json,
compare)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from calibration import load_station
from pyrua_dojo.catalog import TASKS as CATALOGUE
from pyrua_dojo.plugin.config import PolicyConfig
from pyrua_dojo.evaluate import compare as cmp
from pyrua_dojo.evaluate import plan as eval_plan
from pyrua_dojo.evaluate import runner
from pyrua_dojo.harness.result_files import AgentRecord, ResultWriter, RunLocation, write_agent_record
from pyrua_dojo.runtime.judging_cards import JUDGING_CARD_TOKEN_BUDGET, judging_text, judging_texts
from pyrua_dojo.evaluate.play import PlayOptions
from pyrua_dojo.runtime.prompt.assemble import PromptOptions, build_prompt, estimate_tokens
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.runtime.prompt.command import run_cli
from pyrua_dojo.twin import TWIN_TASKS
from pyrua_dojo.twin.reward import Pred, WorldState

STATION = load_station()
LAYOUTS_PER_TASK = 12  # enough to meet every layout-dependent threshold (stack_blocks: all three block sizes)

# --------------------------------------------------------------------------------------------------- the texts


def test_every_catalogue_task_has_a_judging_text_and_every_text_a_task() -> None:
    for task in CATALOGUE:
        assert len(judging_text(task)) > 80, task
    assert set(judging_texts()) <= set(CATALOGUE), set(judging_texts()) - set(CATALOGUE)
    with pytest.raises(KeyError, match="no judging text"):
        judging_text("no_such_task")


@pytest.mark.parametrize("task", sorted(judging_texts()))
def test_texts_are_plain_sentences_within_budget(task: str) -> None:
    text = judging_text(task)
    assert estimate_tokens(text) <= JUDGING_CARD_TOKEN_BUDGET
    assert "`" not in text and "robo." not in text and not re.search(r"\bis_\w+|_threshold|\w+\(", text), text
    assert re.search(r"\b(arms?|where the arms end)\b", text), f"{task}: does not say where the arms must end"
    assert "instant failure" in text.lower(), f"{task}: does not say whether anything fails at once"


def _numbers(pred_name: str) -> list[float]:
    """The numeric arguments of a predicate's name: lists (axes) and digits inside labels are not thresholds."""
    name = re.sub(r"\[[^\]]*\]", "", pred_name)
    name = re.sub(r"'[^']*'", "", name)
    return [float(m) for m in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", name)]


def _on_card(value: float, text: str) -> bool:
    """`value` as the card writes it: a length in m as cm or mm, a fraction as a percentage, an angle in degrees,
    a count as a number."""
    forms = [f"{value:g} degree", f"{value:g} time"] if value >= 1 else []
    forms += [f"{value * 100:g} cm", f"{value * 1000:g} mm", f"{value * 100:g}%"] if abs(value) < 1 else []
    return any(f in text for f in forms)


def _twin_state(layout) -> WorldState:
    initial = {o.label: np.array(o.pose, dtype=float) for o in layout.objects}
    home = np.array([0.0, 0.0, 0.9, 1.0, 0.0, 0.0, 0.0])
    return WorldState(
        objects=initial, initial_objects=initial, bboxes={o.label: o.spec.bbox_vertices for o in layout.objects},
        ee={"left": home, "right": home}, origin_ee={"left": home, "right": home}, gripper_open={"left": 1.0, "right": 1.0},
    )  # fmt: skip


def _thresholds(task: str) -> dict[float, set[str]]:
    """Every numeric threshold of the twin's success stages and queries (over several layouts), with where it is."""
    spec = TWIN_TASKS[task]
    found: dict[float, set[str]] = {}
    for layout_id in range(min(LAYOUTS_PER_TASK, spec.episodes_per_seed)):
        layout = spec.layout(STATION, 0, layout_id)
        program = spec.program(layout, _twin_state(layout))
        preds: list[Pred] = [p for stage in program.stages for p in stage]
        for query in program.queries:
            preds += list(query.preds)
            if query.aim > 0:
                found.setdefault(float(query.aim), set()).add(f"query limit of {[p.name for p in query.preds]}")
        for pred in preds:
            for value in _numbers(pred.name):
                found.setdefault(value, set()).add(pred.name)
    return found


@pytest.mark.parametrize("task", sorted(TWIN_TASKS))
def test_every_threshold_of_the_twins_check_is_on_the_card(task: str) -> None:
    text = judging_text(task)
    found = _thresholds(task)
    assert found, f"{task}: no thresholds found in the twin's program"
    missing = {v: sorted(where) for v, where in found.items() if not _on_card(v, text)}
    assert not missing, f"{task}: thresholds not on the card: {missing}"


def test_the_threshold_check_can_fail() -> None:
    """The matcher is strict about units: 1.5 cm is not 15 cm, 8 degrees is not 8 mm."""
    assert _numbers("is_stacked(block_0, block_1, xy=0.015, in_order=False, z=None)") == [0.015]
    assert _numbers("is_axis_up(cup0, [0.0, 0.0, -1.0], 10)") == [10.0]
    assert _on_card(0.015, "within 1.5 cm") and not _on_card(0.015, "within 15 cm")
    assert _on_card(8.0, "within 8 degrees") and not _on_card(8.0, "within 8 mm")
    assert _on_card(0.007, "0.7 cm (7 mm)") and not _on_card(0.15, "15 degrees")


# --------------------------------------------------------------------------------------------------- the switch


def _card(task: str = "align_blocks") -> TaskCard:
    return TaskCard.for_task(task)


@pytest.mark.parametrize("task", ["align_blocks", "cover_blocks", "stack_blocks_random", "push_T_random"])
def test_the_setting_switches_the_text_on_and_off(task: str) -> None:
    on = build_prompt(_card(task), api="(api)", options=PromptOptions())
    off = build_prompt(_card(task), api="(api)", options=PromptOptions(judging_card=False))
    text = judging_text(task)
    assert text in on.card_text and text not in off.card_text and text not in on.system
    assert on.sections["judging_card"] > len(text) and off.sections["judging_card"] == 0
    assert off.system == on.system
    assert "\n\n" not in off.card_text.split("Step limit")[1].split("Attached")[0]  # no gap where the text was


def test_a_card_for_a_name_outside_the_catalogue_has_no_text() -> None:
    card = TaskCard("my_scratch_task", "do it", 100)
    assert build_prompt(card, api=None).sections["judging_card"] == 0


def test_policy_setting_parses_defaults_on_and_is_recorded() -> None:
    base = {"task_name": "align_blocks", "seed": 0}
    assert PolicyConfig.from_model_cfg(base).prompt.judging_card is True
    assert PolicyConfig.from_model_cfg(base).public()["judging_card"] is True
    off = PolicyConfig.from_model_cfg({**base, "judging_card": "false"})
    assert off.prompt.judging_card is False and off.public()["judging_card"] is False
    with pytest.raises(ValueError, match="judging_card must be true or false"):
        PolicyConfig.from_model_cfg({**base, "judging_card": "sometimes"})


@pytest.mark.slow
def test_prompt_command_size_only_for_every_task() -> None:
    for task in CATALOGUE:
        for card in (True, False):
            out, err = io.StringIO(), io.StringIO()
            assert run_cli(task, size_only=True, judging_card=card, out=out, err=err) == 0, (task, out.getvalue())
            line = next(l for l in out.getvalue().splitlines() if "judging card" in l)
            assert ("within" in line) if card else line.endswith("off")


def test_cli_spells_the_switch_on_play_eval_and_prompt() -> None:
    from pyrua_dojo.cli import build_parser

    p = build_parser()
    assert p.parse_args(["prompt", "--task", "x", "--no-judging-card"]).judging_card is False
    assert p.parse_args(["play", "--task", "x"]).judging_card is None  # deploy.yml's (on)
    assert p.parse_args(["play", "--task", "x", "--judging-card"]).judging_card is True
    assert p.parse_args(["eval", "--tasks", "x"]).judging_card is True
    assert p.parse_args(["eval", "--tasks", "x", "--no-judging-card"]).judging_card is False


def test_play_passes_the_setting_and_refuses_it_twice() -> None:
    from pyrua_dojo.evaluate import play as play_module
    from pyrua_dojo.harness.policydir import PolicyDir
    from submission.install import plugin_dir

    policy = PolicyDir.load(plugin_dir())  # the packaged plugin and its deploy.yml
    for flag, expected in ((None, True), (False, False), (True, True)):
        cfg = play_module._model_cfg(PlayOptions(task="align_blocks", judging_card=flag), policy, None, Path("runs"))
        assert PolicyConfig.from_model_cfg(cfg).prompt.judging_card is expected
    cfg = play_module._model_cfg(PlayOptions(task="align_blocks", overrides=("judging_card=false",)), policy, None,
                                 Path("runs"))  # fmt: skip
    assert PolicyConfig.from_model_cfg(cfg).prompt.judging_card is False
    with pytest.raises(ValueError, match="judging_card is set twice"):
        PlayOptions(task="align_blocks", judging_card=True, overrides=("judging_card=false",))


# --------------------------------------------------------------------------------------------------- the record


def _settings(tmp_path: Path, **kw) -> eval_plan.EvalSettings:
    return eval_plan.EvalSettings(tasks=("align_blocks",), seeds=(7,), episodes=2, out=tmp_path / "r", **kw)


def test_eval_records_the_setting_and_refuses_to_resume_with_another(tmp_path: Path) -> None:
    on = _settings(tmp_path)
    plan = eval_plan.make_plan(on)
    runner._write_eval_files(on, plan)
    saved = json.loads((plan.locations[("align_blocks", 7)].path / eval_plan.EVAL_FILE).read_text())
    assert saved["identity"]["judging_card"] is True
    with pytest.raises(ValueError, match="other settings .*judging_card"):
        eval_plan.make_plan(_settings(tmp_path, judging_card=False))
    assert eval_plan.make_plan(_settings(tmp_path, judging_card=False, new_run=True)).resumed is False
    with pytest.raises(ValueError, match="--judging-card"):
        _settings(tmp_path, overrides=("judging_card=false",))


def test_an_eval_run_from_before_the_card_reads_as_without_it(tmp_path: Path) -> None:
    on = _settings(tmp_path)
    plan = eval_plan.make_plan(on)
    runner._write_eval_files(on, plan)
    path = plan.locations[("align_blocks", 7)].path / eval_plan.EVAL_FILE
    saved = json.loads(path.read_text())
    del saved["identity"]["judging_card"]
    path.write_text(json.dumps(saved))
    assert eval_plan.make_plan(_settings(tmp_path, judging_card=False)).resumed
    with pytest.raises(ValueError, match="judging_card: False there, True now"):
        eval_plan.make_plan(_settings(tmp_path))


def _tree(root: Path, cards: dict[int, bool | None], solved: int) -> Path:
    loc = RunLocation(root, "align_blocks", "PyRUA_Dojo", "arx_x5", 7, "ckpt_name=m,action_type=joint",
                      "2026-12-01_21-00-00")  # fmt: skip
    writer = ResultWriter(loc)
    for layout, card in cards.items():
        success = layout < solved
        writer.record(layout, success, 1.0 if success else 0.0)
        data = AgentRecord("align_blocks", 7, layout, success, 1.0 if success else 0.0, "finished", 10, 1000, 0, 100,
                           None, 150, 200, 30.0).to_json()  # fmt: skip
        if card is not None:
            data["config"] = {"planner": "openai", "judging_card": card}
        write_agent_record(loc.path, AgentRecord.from_json(data))
    return root


def test_compare_pairs_runs_with_and_without_the_card_and_refuses_a_mixed_side(tmp_path: Path) -> None:
    with_card = _tree(tmp_path / "with", {0: True, 1: True, 2: True, 3: True}, solved=3)
    without = _tree(tmp_path / "without", {0: False, 1: False, 2: False, 3: False}, solved=1)
    c = cmp.compare(cmp.load_run(without), cmp.load_run(with_card), bootstrap=200)
    assert (c.a.judging_card_label, c.b.judging_card_label) == ("off", "on")
    assert "Judging card: A off, B on" in cmp.to_markdown(c)
    assert cmp.to_json(c)["b"]["judging_card"] == "on" and c.row("align_blocks").b_only == 2
    mixed = _tree(tmp_path / "mixed", {0: True, 1: False, 2: True, 3: True}, solved=2)
    with pytest.raises(cmp.MismatchError, match="mixes episodes made with and without the judging card"):
        cmp.compare(cmp.load_run(mixed), cmp.load_run(with_card), bootstrap=200)
    unknown = _tree(tmp_path / "unknown", {0: None, 1: None, 2: None, 3: None}, solved=2)
    assert cmp.compare(cmp.load_run(unknown), cmp.load_run(with_card), bootstrap=200).a.judging_card_label == "unknown"
