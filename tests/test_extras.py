"""`pip install pyrua-dojo` brings the agent and the plugin only: their import path needs none of the extras."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS_ONLY = ("mujoco", "matplotlib", "torch", "sam3")

# A fresh interpreter in which importing an extra fails, as on a machine without it.
PROBE = """
import importlib.abc, json, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Missing())
import submission.PyRUA_Dojo.model, submission.PyRUA_Dojo.deploy, pyrua_dojo.plugin.model, pyrua_dojo.wire
from pyrua_dojo.cli import build_parser
build_parser()
from pyrua_dojo.plugin.model import Model
model = Model({{"task_name": "stack_blocks", "planner": "scripted", "run_root": sys.argv[1]}})
model.close()
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))
"""


def test_the_base_dependencies_leave_out_the_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    for name in EXTRAS_ONLY:
        assert name not in base
    extras = project["optional-dependencies"]
    assert any(d.startswith("mujoco") for d in extras["twin"])
    assert any(d.startswith("matplotlib") for d in extras["plots"])
    assert "twin" in extras["all"][0] and "plots" in extras["all"][0]


def test_the_plugin_path_imports_and_starts_without_the_extras(tmp_path: Path) -> None:
    probe = PROBE.format(blocked=set(EXTRAS_ONLY))
    p = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    loaded = set(json.loads(p.stdout.strip().splitlines()[-1]))
    assert not loaded & set(EXTRAS_ONLY)


def test_the_twin_without_mujoco_names_the_extra() -> None:
    probe = PROBE.split("import submission")[0] + "import pyrua_dojo.twin\n"
    p = subprocess.run([sys.executable, "-c", probe.format(blocked={"mujoco"})], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode != 0 and "pyrua-dojo[twin]" in p.stderr
