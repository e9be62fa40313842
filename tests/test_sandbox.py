"""The cell sandbox: refusal before running, the import allow-list, workspace-only files, guarded attributes.

Escape attempts run as real cells; a secret file next to (outside) the workspace must never show up in any
result, and every attempt must end in a refusal or a SandboxError, never in success.
"""

from __future__ import annotations

import ast
import math
import os
from pathlib import Path

import numpy as np
import pytest

from primitives.errors import CancelToken
from pyrua_dojo.runtime.cells import CellExecutor, CellResult
from pyrua_dojo.runtime.sandbox import ALLOWED_MODULES, audit_flags, find_refusal

SECRET = "the-secret-outside-the-workspace"


class Robo:
    """The public/private split of a robot facade, nothing else."""

    def __init__(self) -> None:
        self._bridge = {"secret": SECRET}
        self.arms = ("left", "right")

    def state(self) -> dict[str, int]:
        return {"step": 7}


@pytest.fixture
def cell(tmp_path: Path):  # noqa: ANN201 - returns a runner
    (tmp_path / "secret.txt").write_text(SECRET)
    executor = CellExecutor({"robo": Robo()}, workspace=tmp_path / "ws", cancel=CancelToken())

    def run(code: str) -> CellResult:
        result = executor.run(code)
        assert SECRET not in result.to_text(), (code, result.to_text())
        return result

    run.executor = executor  # type: ignore[attr-defined]
    yield run
    executor.close()


def refused_or_blocked(result: CellResult) -> bool:
    exception = result.exception or ""
    return result.status == "refused" or (
        result.status == "error" and ("SandboxError: " in exception or "SandboxImportError: " in exception))


# ----------------------------------------------------------------------------------------------- static checks


@pytest.mark.parametrize("code", [
    "f = lambda: 0\nf.__globals__",
    "().__class__.__bases__[0].__subclasses__()",
    "__builtins__",
    "__import__('os')",
    "x = '__globals__'",
    "getattr(robo.state, '__self__')",
    "g = (i for i in [1])\ng.gi_frame.f_back",
    "def __array_interface__(self):\n    pass",
    "__cell_getattr__ = None",
    "robo.state.__code__",
    "import os",
    "from os import path",
    "import subprocess, socket",
    "from numpy import load",
    "from numpy.lib import npyio",
    "from numpy import _core",
    "import scipy.io",
    "from . import x",
])
def test_refused_code_does_not_run(cell, code: str) -> None:  # noqa: ANN001
    result = cell("ran = True\n" + code)
    assert result.status == "refused", result.to_text()
    assert result.exception is not None and result.exception.startswith("SandboxError: line ")
    assert "the cell was not run" in result.exception
    assert cell("'ran' in globals()").value == "False"


def test_find_refusal_and_audit_flags_on_source() -> None:
    tree = ast.parse("import numpy as np\nfrom json import loads\nv = getattr(robo, 'arms')\nrobo._bridge\n"
                     "open('/etc/hosts')\nvars(robo)\np = '../up'\nq = 'C:\\\\x'\nt = type('T', (), {})\n")
    assert find_refusal(tree) is None
    flags = audit_flags(tree)
    for flag in ("import:numpy", "import:json", "probe:getattr", "private-attr:_bridge", "file:open",
                 "path:/etc/hosts", "probe:vars", "path:../up", "probe:type"):
        assert flag in flags, flag
    assert "escape:__globals__" in audit_flags(ast.parse("f.__globals__"))
    assert "line 2" in (find_refusal(ast.parse("x = 1\nimport os")) or "")
    assert find_refusal(ast.parse("import helper"), is_workspace_module=lambda name: name == "helper") is None
    assert len(audit_flags(ast.parse("\n".join(f"import m{i}" for i in range(100))))) == 40


def test_audit_flags_are_recorded_and_never_block(cell) -> None:  # noqa: ANN001
    result = cell("arms = getattr(robo, 'arms')\nwhere = '/tmp/somewhere'\nimport json\narms")
    assert result.status == "ok" and result.value == "('left', 'right')"
    assert {"probe:getattr", "path:/tmp/somewhere", "import:json"} <= set(result.audit_flags)


# --------------------------------------------------------------------------------------------------- imports


@pytest.mark.parametrize("module", sorted(ALLOWED_MODULES - {"__future__"}))
def test_allowed_modules_import(cell, module: str) -> None:  # noqa: ANN001
    result = cell(f"import {module}\n{module}.__name__")
    assert result.status == "ok", result.to_text()
    assert result.value == repr(module)


def test_submodules_and_star_imports(cell) -> None:  # noqa: ANN001
    ok = cell("import scipy.linalg as sl\nfrom scipy.spatial.transform import Rotation\nimport numpy.linalg\n"
              "from collections.abc import Mapping\nfrom math import *\nimport cv2\n"
              "(float(sl.det(np.eye(2))), round(sqrt(16)), Rotation.identity().as_quat().tolist(), "
              "numpy.linalg.norm([3, 4]), cv2.imdecode is not None)")
    assert ok.status == "ok", ok.to_text()
    assert ok.value == "(1.0, 4, [0.0, 0.0, 0.0, 1.0], np.float64(5.0), True)"
    star = cell("from numpy import *\n'load' in globals(), 'save' in globals(), 'mean' in globals()")
    assert star.value == "(False, False, True)"


@pytest.mark.parametrize("code", [
    "np.load",
    "np.save('x.npy', np.zeros(2))",
    "np.fromfile",
    "np.zeros(2).tofile('x.bin')",
    "np.zeros(2).dump('x.pkl')",
    "np.memmap",
    "np.genfromtxt",
    "np.lib.npyio",
    "np.lib.format.open_memmap",
    "np.zeros(2).ctypes",
    "np.ctypeslib",
    "np.lib.stride_tricks.as_strided",
    "np.testing",
    "np._core",
    "getattr(np, 'lo' + 'ad')",
    "vars(np)",
    "np.__dict__",
    "import scipy\nscipy.io",
    "import scipy\nscipy.__getattr__('io')",
    "import scipy.sparse\nscipy.sparse.load_npz",
    "import cv2\ncv2.imread('x.png')",
    "import cv2\ncv2.imwrite('x.png', np.zeros((2, 2), np.uint8))",
    "import cv2\ncv2.VideoCapture(0)",
    "import cv2\ncv2.FileStorage",
    "import cv2\ncv2.ORB_create().save('orb.yml')",
    "import cv2\ncv2.os",
    "import cv2\ncv2.sys",
    "import io\nio.open('x.txt', 'w')",
    "import io\nio.FileIO",
    "import operator\noperator.attrgetter('_bridge')(robo)",
    "import string\nstring.Formatter().get_field('0._bridge', (robo,), {})",
    "import typing\ntyping.get_type_hints",
    "import traceback\ntraceback.FrameSummary('x', 1, 'y')",
    "import traceback\ntraceback.walk_stack(None)",
    "import warnings\nwarnings.simplefilter('ignore')",
    "import warnings\nwarnings.warn_explicit('m', UserWarning, 'x', 1)",
    "import copy\ncopy.dispatch_table",
])
def test_file_process_and_reflection_routes_are_blocked(cell, code: str) -> None:  # noqa: ANN001
    result = cell(code)
    assert refused_or_blocked(result), result.to_text()
    assert not (Path(cell.executor.workspace) / "x.npy").exists()


def test_messages_say_what_to_use_instead(cell) -> None:  # noqa: ANN001
    assert "read workspace files with open()" in (cell("np.load").exception or "")
    assert "cv2.imdecode" in (cell("import cv2\ncv2.imread").exception or "")
    assert "allowed:" in (cell("import os").exception or "")


# ------------------------------------------------------------------------------------------------ attributes


@pytest.mark.parametrize("code", [
    "robo._bridge",
    "getattr(robo, '_bri' + 'dge')",
    "object.__getattribute__(robo, '_bri' + 'dge')",
    "vars(robo)['_bridge']",
    "robo.__dict__['_bridge']",
    "robo.__reduce_ex__(2)",
    "robo.__getstate__()",
    "g = (i for i in [1])\ngetattr(g, 'gi_' + 'frame')",
    "getattr(robo.state, '__fu' + 'nc__')",
    "type(np).__dict__['__di' + 'ct__'].__get__(np)['load']",
    "type(robo).__dict__['__in' + 'it__'].__set__",
    "'{0._bridge}'.format(robo)",
    "'{r._bridge}'.format_map({'r': robo})",
    "str.format('{0._bridge}', robo)",
    "vars(str)['format']('{0._bridge}', robo)",
    "'{0:{1._bridge}}'.format(1, robo)",
])
def test_private_and_introspection_attributes_are_guarded(cell, code: str) -> None:  # noqa: ANN001
    result = cell(code)
    assert refused_or_blocked(result) or result.status == "error" and "KeyError" in (result.exception or ""), \
        result.to_text()


def test_globals_snapshot_hides_builtins_and_is_read_only(cell) -> None:  # noqa: ANN001
    assert cell("x = 1\n('x' in globals(), 'robo' in globals())").value == "(True, True)"
    hidden = cell("globals()['__buil' + 'tins__']")
    assert hidden.status == "error" and "KeyError" in (hidden.exception or "")
    assert cell("globals()['y'] = 2").status == "error"
    assert cell("def f():\n    a = 5\n    return sorted(locals())\nf()").value == "['a']"


def test_cell_code_keeps_ordinary_python(cell) -> None:  # noqa: ANN001
    code = (
        "from dataclasses import dataclass\nimport collections\n"
        "@dataclass(frozen=True)\nclass P:\n    x: int\n"
        "    def __post_init__(self):\n        object.__setattr__(self, 'x', self.x * 2)\n"
        "class Counter:\n    def __init__(self):\n        self._n = 0\n        self.__hidden = 1\n"
        "    def bump(self):\n        self._n += 1\n        return self._n + self.__hidden\n"
        "class Sub(Counter):\n    def bump(self):\n        return super().bump() * 10\n"
        "T = collections.namedtuple('T', 'a b')\n"
        "c = Sub()\n(P(2).x, c.bump(), c._n, T(1, 2)._asdict(), vars(c)['_n'], robo.state()['step'])"
    )
    result = cell(code)
    assert result.status == "ok", result.to_text()
    assert result.value == "(4, 20, 1, {'a': 1, 'b': 2}, 1, 7)"


def test_modules_and_library_classes_are_read_only(cell) -> None:  # noqa: ANN001
    for code in ("import math\nmath.pi = 3", "np.pi = 3", "setattr(math, 'tau', 1)", "del math.e",
                 "object.__setattr__(np, 'x', 1)", "np.ndarray.foo = 1", "robo._bridge = {}",
                 "import fractions\nfractions.Fraction.limit_denominator = None"):
        assert refused_or_blocked(cell(code)), code
    assert math.pi == 3.141592653589793 and np.pi == math.pi and not hasattr(np, "x")
    assert cell("robo.note = 'mine'\nrobo.note").value == "'mine'"  # the episode's own objects are fine
    assert cell("'{0.arms[1]} {1:>4}'.format(robo, 7)").value == "'right    7'"


# ------------------------------------------------------------------------------------------------------ files


def test_open_is_confined_to_the_workspace(cell, tmp_path: Path) -> None:  # noqa: ANN001
    written = cell("import json\nwith open('a.json', 'w') as f:\n    json.dump({'k': 1}, f)\n"
                   "json.load(open('a.json'))")
    assert written.status == "ok" and written.value == "{'k': 1}"
    assert (tmp_path / "ws" / "a.json").exists()
    inside = str(tmp_path / "ws" / "a.json")
    assert cell(f"open({inside!r}).read()").value == repr('{"k": 1}')  # absolute paths inside are fine
    os.symlink(tmp_path / "secret.txt", tmp_path / "ws" / "link.txt")
    for code in (f"open({str(tmp_path / 'secret.txt')!r}).read()", "open('../secret.txt').read()",
                 "open('link.txt').read()", "open('/etc/hostname').read()", "open(0).read()",
                 "open('a.json', opener=lambda p, f: 0)", "open('sub/../../secret.txt').read()"):
        result = cell(code)
        assert result.status == "error" and "SandboxError" in (result.exception or ""), code
    assert "outside the workspace" in (cell("open('../secret.txt')").exception or "")


def test_workspace_modules_import_through_the_sandbox(cell) -> None:  # noqa: ANN001
    made = cell("with open('helper.py', 'w') as f:\n    f.write('import math\\n\\ndef area(r):\\n"
                "    return math.pi * r * r\\n')")
    assert made.status == "ok"
    used = cell("import helper\nfrom helper import area\nround(helper.area(1.0), 4), area is helper.area")
    assert used.status == "ok", used.to_text()
    assert used.value == "(3.1416, True)"
    cell("with open('evil.py', 'w') as f:\n    f.write('import os\\n')")
    evil = cell("import evil")
    assert evil.status == "error" and "SandboxImportError" in (evil.exception or "") and "os" in evil.exception
    cell("with open('sneaky.py', 'w') as f:\n    f.write('def grab(r):\\n    return r._bridge\\n')")
    assert refused_or_blocked(cell("import sneaky\nsneaky.grab(robo)"))


def test_time_sleep_in_cells_is_the_cancel_aware_one(cell) -> None:  # noqa: ANN001
    result = cell("import time as t\nfrom time import sleep\n(t is time, sleep is time.sleep, t.monotonic() > 0)")
    assert result.value == "(True, True, True)"
    assert cell("time.sleep(-1)").status == "error"
