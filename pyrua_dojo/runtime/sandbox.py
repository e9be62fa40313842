"""The restricted environment cells run in: allowed imports, workspace-confined files, guarded attributes.

Cell source goes through `Sandbox.prepare`: parse, audit (flags recorded, never blocking), refuse code that
names introspection escapes (the cell is then not run at all), rewrite, compile. The rewrite routes every
attribute read through `__cell_getattr__` and every attribute write through `__cell_target__`, so the checks
below also hold for names computed at run time; and it makes every `except` handler (and `__exit__`, and a
`finally` that could swallow with return/break/continue) re-raise `EpisodeFinished` and `CellInterrupted`.

This is a Python-level sandbox, NOT a security boundary: episodes run it inside their cell kernel, a separate
confined process (`pyrua_dojo.kernel`; the OS layers there are the boundary). It stays as the first layer, for
clear messages that keep an LLM's code on the documented API ("import of `socket` is not allowed"). Closed
(tests/test_sandbox.py):

- builtins: no exec/eval/compile/open/breakpoint/input/help/exit/quit; `__import__` allow-listed; `open`
  resolves paths (symlinks included) inside the workspace only, never file descriptors or custom openers;
  `globals()`/`locals()`/`vars()` return read-only snapshots without `__builtins__`;
- imports: the allow-list, plus `.py` files in the workspace loaded through this same sandbox (per executor,
  never into sys.modules); submodules that reach files, processes or native code are refused by module name
  wherever the module object turns up (import, attribute chain, `from m import x`, star import);
- attributes of any object: function/frame/code internals (`__globals__`, `__code__`, `__closure__`,
  `__self__`, `f_back`, `gi_frame`, `gi_code`, `tb_frame`, ...), `__subclasses__`, `__builtins__`; private
  (`_x`) attributes of anything the cell did not define (modules, `robo`, library objects); `__dict__` and
  `__getattr__` (lazy submodule loaders) of modules; `__reduce__`/`__getstate__` of foreign objects; writes
  to modules, foreign classes and foreign functions (no process-wide monkeypatching such as `math.pi = 3`);
- file and native entry points of allowed libraries: numpy/scipy load/save/fromfile/tofile/memmap/dump,
  DataSource, ctypes/ctypeslib, as_strided, f2py, testing, scipy.io/datasets/odr, LowLevelCallable; cv2
  imread/imwrite/VideoCapture/VideoWriter/FileStorage/CascadeClassifier/dnn and save/load/read/write of cv2
  objects; io.open/FileIO; the linecache readers of traceback/warnings; attribute access by string
  (operator.attrgetter/methodcaller, string.Formatter, `{0._x}` fields of str.format); eval in fresh globals
  (typing.get_type_hints/ForwardRef); process-wide warnings filters. `time.sleep` waits on the cancel token.

Remaining (not closed): numpy trusts raw addresses in `__array_interface__`; the names are refused, but a
cell object that answers them under a computed name (its `__getattr__`, its own `__dict__`) makes numpy read
or write arbitrary memory. Shared mutable containers of allowed modules
can be mutated (`random.seed`, a dict held by a library class). Memory and CPU use inside native code is not
bounded (a deadline cannot interrupt C). C extensions may crash on hostile arguments. Less common file entry
points of cv2/scipy not listed above may exist. Reprs of foreign objects can show private state. Real
isolation is the kernel process (pyrua_dojo/kernel/, tests/test_kernel.py).
"""

from __future__ import annotations

import _string
import ast
import builtins as _builtins
import functools
import io
import os
import re
import sys
import threading
import time as _time
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primitives.errors import CancelToken, CellInterrupted, EpisodeFinished

__all__ = [
    "ALLOWED_MODULES",
    "CELL_MODULE",
    "PreparedCode",
    "Sandbox",
    "SandboxError",
    "SandboxImportError",
    "SandboxRefusal",
    "audit_flags",
    "find_refusal",
]

CELL_MODULE = "__policy__"  # `__name__` of the cell namespace; classes defined in cells carry it as __module__

ALLOWED_MODULES: frozenset[str] = frozenset(
    {
        "__future__", "bisect", "cmath", "collections", "copy", "cv2", "dataclasses", "datetime", "decimal",
        "enum", "fractions", "functools", "heapq", "io", "itertools", "json", "math", "numbers", "numpy",
        "operator", "pprint", "random", "re", "scipy", "statistics", "string", "textwrap", "time",
        "traceback", "typing", "warnings",
    }
)

# Submodules of allowed packages that reach files, processes or native code (prefix match on the dotted name).
BLOCKED_MODULE_PREFIXES: tuple[str, ...] = (
    "numpy.lib.npyio", "numpy.lib._npyio_impl", "numpy.lib._datasource", "numpy.lib.format",
    "numpy.lib._format_impl", "numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing",
    "numpy._pytesttester", "scipy.io", "scipy.datasets", "scipy._lib", "scipy.odr", "scipy.misc",
    "cv2.dnn", "cv2.samples", "cv2.utils", "cv2.data", "cv2.load_config", "cv2.config", "cv2.videoio_registry",
)

# Names refused on any object, statically (attribute, bare name or string constant) and at run time.
BLOCKED_NAMES: frozenset[str] = frozenset(
    {
        "__globals__", "__subclasses__", "__builtins__", "__code__", "__closure__", "__import__", "__loader__",
        "__spec__", "__self__", "__func__", "__wrapped__",
        "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
        "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "tb_frame",
        "__array_interface__", "__array_struct__",  # numpy trusts the raw addresses these describe
    }
)
_RESERVED_PREFIX = "__cell_"  # the rewrite's helpers; cell code may not name them

# Attributes refused when the receiver (a module, a class, or an instance's class) comes from one of the roots.
_IO_HINT = "it reaches files outside the workspace; read workspace files with open()"
_ATTR_RULES: dict[str, dict[str, str]] = {}  # name -> {package root: why it is refused}


def _rule(roots: Iterable[str], names: Iterable[str], why: str) -> None:
    for name in names:
        for root in roots:
            _ATTR_RULES.setdefault(name, {})[root] = why


_rule(
    ("numpy", "scipy"),
    ("load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt", "fromfile", "fromregex",
     "tofile", "dump", "memmap", "open_memmap", "DataSource", "load_npz", "save_npz", "loadmat", "savemat"),
    _IO_HINT + " (np.frombuffer, json)",
)
_rule(("numpy", "scipy"), ("ctypes", "ctypeslib", "as_strided", "LowLevelCallable", "f2py"),
      "it gives raw memory or native-code access")
_rule(("numpy", "scipy"), ("test", "testing"), "it runs the library's test suite")
_rule(
    ("cv2",),
    ("imread", "imreadmulti", "imreadanimation", "imwrite", "imwritemulti", "imwriteanimation", "imcount",
     "haveImageReader", "haveImageWriter", "VideoCapture", "VideoWriter", "VideoWriter_fourcc", "FileStorage",
     "FileNode", "CascadeClassifier", "readOpticalFlow", "writeOpticalFlow", "dnn", "samples", "utils", "data",
     "videoio_registry", "bootstrap", "save", "load", "read", "write", "open", "writeComment"),
    _IO_HINT + " (cv2.imdecode / cv2.imencode)",
)
_rule(("io",), ("open", "open_code", "FileIO"), _IO_HINT)
_rule(("operator",), ("attrgetter", "methodcaller"), "it reads attributes by name around the sandbox; use getattr")
_rule(("string",), ("Formatter",), "it reads attributes by name around the sandbox")
_rule(("typing",), ("get_type_hints", "ForwardRef", "evaluate_forward_ref"), "it evaluates strings as code")
_rule(("traceback",), ("FrameSummary", "StackSummary", "format_list", "print_list", "walk_stack", "walk_tb"),
      "it reads arbitrary source files or live frames")
_rule(("warnings",), ("warn_explicit", "formatwarning", "showwarning"), "it reads arbitrary source files")
_rule(("warnings",), ("filterwarnings", "simplefilter", "resetwarnings", "catch_warnings"),
      "it changes process-wide state shared with other episodes; use np.errstate for numpy warnings")
_rule(("copy",), ("dispatch_table",), "it changes process-wide state shared with other episodes")

_CV2_PATTERN = re.compile(r"^(im(read|write)\w*|Video(Capture|Writer)\w*|FileStorage\w*|readNet\w*|\w*_load"
                          r"|\w*[Ff]romFile|load_config\w*)$")
_CAPTURE_PRIVATE_OK = frozenset({"_asdict", "_replace", "_fields", "_field_defaults", "_make", "_value_", "_name_"})
_FOREIGN_ONLY = frozenset({"__reduce__", "__reduce_ex__", "__getstate__"})
_WRAPPED_SLOTS = frozenset({"__getattribute__", "__setattr__", "__delattr__"})
_FORMAT_NAMES = frozenset({"format", "format_map"})
_REMOVED_BUILTINS = frozenset(
    {"exec", "eval", "compile", "__import__", "open", "breakpoint", "input", "help", "exit", "quit", "copyright",
     "credits", "license", "globals", "locals", "vars", "getattr", "setattr", "delattr", "hasattr", "print"}
)


class SandboxError(Exception):
    """Cell code used something the sandbox does not allow (raised at run time)."""


class SandboxImportError(SandboxError, ImportError):
    """An import the allow-list refuses."""


class SandboxRefusal(Exception):
    """Source that is refused before it runs. `flags` are the audit flags of the refused source."""

    def __init__(self, message: str, flags: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.flags = flags


# ----------------------------------------------------------------------------------------------- static checks


def _module_allowed_name(name: str, extra: frozenset[str] = frozenset()) -> bool:
    root = name.partition(".")[0]
    return (root in ALLOWED_MODULES or root in extra) and not _blocked_prefix(name)


def _blocked_prefix(name: str) -> bool:
    return name.startswith("cv2.load_config") or any(
        name == prefix or name.startswith(prefix + ".") for prefix in BLOCKED_MODULE_PREFIXES)


def _refused_name(name: str) -> bool:
    return name in BLOCKED_NAMES or name.startswith(_RESERVED_PREFIX)


def _refused_string(value: str) -> str | None:
    if _refused_name(value):
        return value
    for name in BLOCKED_NAMES:
        if name.startswith("__") and name in value:
            return name
    return _RESERVED_PREFIX if _RESERVED_PREFIX in value else None


def find_refusal(tree: ast.AST, *, is_workspace_module: Callable[[str], bool] = lambda _: False,
                 extra_modules: frozenset[str] = frozenset()) -> str | None:
    """The reason `tree` may not run at all (introspection escapes, refused imports), or None."""
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        what: str | None = None
        if isinstance(node, ast.Attribute):
            if _refused_name(node.attr):
                what = f"attribute `{node.attr}`"
            elif isinstance(node.ctx, (ast.Store, ast.Del)) and node.attr.startswith("__") \
                    and node.attr.endswith("__"):
                what = f"assigning the special attribute `{node.attr}`"
        elif isinstance(node, ast.Name) and _refused_name(node.id):
            what = f"name `{node.id}`"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _refused_name(node.name):
            what = f"defining `{node.name}`"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = _refused_string(node.value)
            if hit is not None:
                what = f"string naming `{hit}`"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            reason = _import_refusal(node, is_workspace_module, extra_modules)
            if reason:
                return f"line {line}: {reason}; the cell was not run"
        if what is not None:
            return (f"line {line}: {what} may not be used in cells; the cell was not run. "
                    "Stay within the documented robo API.")
    return None


def _import_refusal(node: ast.Import | ast.ImportFrom, is_workspace_module: Callable[[str], bool],
                    extra: frozenset[str]) -> str | None:
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return "relative imports are not available in cells"
        module = node.module or ""
        names = [alias.name for alias in node.names]
    else:
        module, names = "", [alias.name for alias in node.names]
    targets = [module] if module else names
    for target in targets:
        if _module_allowed_name(target, extra) or ("." not in target and is_workspace_module(target)):
            continue
        return f"import of `{target}` is not allowed (allowed: {', '.join(sorted(ALLOWED_MODULES | extra))}, " \
               "and .py files in the workspace)"
    if isinstance(node, ast.ImportFrom) and not ("." not in module and is_workspace_module(module)):
        for name in names:
            if name == "*":
                continue
            if name.startswith("_") and not name.startswith("__"):
                return f"`from {module} import {name}`: private names of modules are not available in cells"
            if _refused_name(name) or _blocked_prefix(f"{module}.{name}"):
                return f"`from {module} import {name}` is not allowed"
            why = _rule_for(name, module.partition(".")[0])
            if why:
                return f"`{module}.{name}` is not available in cells: {why}"
    return None


def _rule_for(name: str, root: str) -> str | None:
    why = _ATTR_RULES.get(name, {}).get(root)
    if why is None and root == "cv2" and _CV2_PATTERN.match(name):
        why = _ATTR_RULES["imread"]["cv2"]
    return why


_BENIGN_DUNDERS = frozenset({"__name__", "__class__", "__doc__", "__init__", "__qualname__", "__module__",
                             "__len__", "__version__", "__all__", "__mro__", "__bases__", "__annotations__"})
_PROBES = frozenset({"getattr", "setattr", "delattr", "hasattr", "vars", "dir", "globals", "locals"})
_PATH_RE = re.compile(r"^(/[^\s/][^\s]*|~[/\\]?\S*|\.\.([/\\]\S*)?|\S*[/\\]\.\.([/\\]\S*)?|[A-Za-z]:[\\/]\S*)$")
_MAX_FLAGS = 40


def audit_flags(tree: ast.AST) -> tuple[str, ...]:
    """Static audit of one cell: imports, private/special attributes, reflection probes, paths (telemetry)."""
    flags: dict[str, None] = {}

    def add(flag: str) -> None:
        if len(flags) < _MAX_FLAGS:
            flags.setdefault(flag[:100], None)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(f"import:{alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            add(f"import:{module}")
            if any(alias.name == "*" for alias in node.names):
                add(f"star-import:{module}")
        elif isinstance(node, ast.Attribute):
            name = node.attr
            if _refused_name(name):
                add(f"escape:{name}")
            elif name.startswith("__") and name.endswith("__"):
                if name not in _BENIGN_DUNDERS:
                    add(f"dunder-attr:{name}")
            elif name.startswith("_"):
                add(f"private-attr:{name}")
        elif isinstance(node, ast.Name):
            if _refused_name(node.id):
                add(f"escape:{node.id}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _PROBES:
                add(f"probe:{node.func.id}")
            elif node.func.id == "open":
                add("file:open")
            elif node.func.id == "type" and len(node.args) == 3:
                add("probe:type")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = _refused_string(node.value)
            if hit is not None:
                add(f"escape:{hit}")
            elif len(node.value) < 300 and _PATH_RE.match(node.value):
                add(f"path:{node.value[:60]}")
    return tuple(flags)


# ----------------------------------------------------------------------------------------------------- rewrite


def _helper_call(name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])
    return ast.copy_location(call, like)


def _reraise_stmt(like: ast.AST) -> ast.Expr:
    return ast.copy_location(ast.Expr(value=_helper_call("__cell_reraise__", [], like)), like)


def _mangle(name: str, class_name: str | None) -> str:
    if class_name is None or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = class_name.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


def _may_swallow(body: list[ast.stmt]) -> bool:
    """True if a `finally` body holds return/break/continue outside nested functions and classes."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


class _Harden(ast.NodeTransformer):
    """Guards attribute reads/writes and makes handlers re-raise the episode's control exceptions."""

    def __init__(self) -> None:
        self._classes: list[str | None] = [None]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        self._classes.append(node.name)
        node.body = [self.visit(s) for s in node.body]
        self._classes.pop()
        return node

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        if node.name in ("__exit__", "__aexit__") and node.body:
            node.body.insert(0, _reraise_stmt(node.body[0]))
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, _reraise_stmt(node.body[0] if node.body else node))
        return node

    def _try(self, node: ast.Try | ast.TryStar) -> ast.AST:
        self.generic_visit(node)
        if node.finalbody and _may_swallow(node.finalbody):
            node.finalbody.insert(0, _reraise_stmt(node.finalbody[0]))
        return node

    visit_Try = _try
    visit_TryStar = _try

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        value = self.visit(node.value)
        name = _mangle(node.attr, self._classes[-1])
        if isinstance(node.ctx, ast.Load):
            return _helper_call("__cell_getattr__", [value, ast.copy_location(ast.Constant(name), node)], node)
        guarded = _helper_call("__cell_target__", [value, ast.copy_location(ast.Constant(name), node)], node)
        return ast.copy_location(ast.Attribute(value=guarded, attr=node.attr, ctx=node.ctx), node)


@dataclass(frozen=True)
class PreparedCode:
    """A cell checked and compiled: run `body`, then evaluate `expr` (the trailing expression) if present."""

    body: types.CodeType
    expr: types.CodeType | None
    flags: tuple[str, ...]


# ------------------------------------------------------------------------------------------------ the sandbox


class _TimeModule(types.ModuleType):
    """`time` for cells: the real functions, with `sleep` waiting on the cancel token (a deadline ends it)."""


def _cell_time_module(cancel: CancelToken) -> types.ModuleType:
    module = _TimeModule("time", _time.__doc__)
    for name in dir(_time):
        if not name.startswith("_") and name not in ("sleep", "tzset"):
            setattr(module, name, getattr(_time, name))

    def sleep(secs: float, /) -> None:
        """Sleep `secs` seconds; returns early with the cell's interruption if the cell is cancelled."""
        seconds = float(secs)
        if seconds != seconds or seconds < 0:
            raise ValueError("sleep length must be a non-negative number")
        if cancel.wait(seconds):
            cancel.check()

    module.sleep = sleep  # type: ignore[attr-defined]
    return module


class Sandbox:
    """The restricted builtins, import hook, file access and attribute guards of one executor's cells.

    workspace: the only directory `open` reaches, and where importable `.py` modules live.
    cancel: the executor's token (`time.sleep` waits on it).
    print_fn: the `print` cells see (the executor binds it to its per-cell capture).
    """

    def __init__(self, workspace: Path, *, cancel: CancelToken, print_fn: Callable[..., None],
                 extra_allowed_modules: Iterable[str] = ()) -> None:
        self.workspace = Path(workspace).resolve()
        self._extra = frozenset(extra_allowed_modules)
        for name in self._extra:
            if not name.replace(".", "").replace("_", "a").isalnum():
                raise ValueError(f"extra_allowed_modules: {name!r} is not a module name")
        self._cancel = cancel
        self._lock = threading.Lock()
        self._workspace_modules: dict[str, tuple[tuple[int, int], types.ModuleType]] = {}
        self._cell_modules: set[str] = {CELL_MODULE}
        self.time_module = _cell_time_module(cancel)
        self.builtins = self._make_builtins(print_fn)

    # -- preparing source

    def prepare(self, source: str, filename: str, *, echo: bool = True) -> PreparedCode:
        """Parse, audit, check and compile cell source. Raises SyntaxError or SandboxRefusal (nothing ran)."""
        tree = ast.parse(source, filename=filename, mode="exec")
        flags = audit_flags(tree)
        refusal = find_refusal(tree, is_workspace_module=self._is_workspace_file, extra_modules=self._extra)
        if refusal is not None:
            raise SandboxRefusal(refusal, flags)
        tree = ast.fix_missing_locations(_Harden().visit(tree))
        expr_node: ast.expr | None = None
        if echo and tree.body and isinstance(tree.body[-1], ast.Expr):
            expr_node = tree.body.pop().value
        body = compile(tree, filename, "exec", dont_inherit=True)
        expr = None
        if expr_node is not None:
            expr = compile(ast.Expression(body=expr_node), filename, "eval", dont_inherit=True)
        return PreparedCode(body=body, expr=expr, flags=flags)

    def namespace(self, names: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh cell globals dict holding the restricted builtins and `names`."""
        return {"__name__": CELL_MODULE, "__doc__": None, "__builtins__": self.builtins, **names}

    # -- builtins

    def _make_builtins(self, print_fn: Callable[..., None]) -> dict[str, Any]:
        table: dict[str, Any] = {
            name: value for name, value in vars(_builtins).items()
            if not name.startswith("_") and name not in _REMOVED_BUILTINS
        }
        table.update(
            __build_class__=_builtins.__build_class__,
            __import__=self._import,
            __name__="builtins",
            __cell_getattr__=self.getattr,
            __cell_target__=self.target,
            __cell_reraise__=_reraise_control,
            open=self.open,
            print=print_fn,
            getattr=self._getattr_builtin,
            hasattr=self._hasattr,
            setattr=self._setattr,
            delattr=self._delattr,
            vars=self._vars,
            globals=self._globals,
            locals=self._locals,
        )
        return table

    def _getattr_builtin(self, obj: Any, name: str, *default: Any) -> Any:
        if len(default) > 1:
            raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
        if not isinstance(name, str):
            raise TypeError("attribute name must be string")
        try:
            return self.getattr(obj, name)
        except AttributeError:
            if default:
                return default[0]
            raise

    def _hasattr(self, obj: Any, name: str) -> bool:
        if not isinstance(name, str):
            raise TypeError("attribute name must be string")
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    def _setattr(self, obj: Any, name: str, value: Any) -> None:
        if not isinstance(name, str):
            raise TypeError("attribute name must be string")
        setattr(self.target(obj, name), name, value)

    def _delattr(self, obj: Any, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError("attribute name must be string")
        delattr(self.target(obj, name), name)

    def _vars(self, *obj: Any) -> Mapping[str, Any]:
        if not obj:
            return _frame_names(sys._getframe(1))
        if len(obj) > 1:
            raise TypeError(f"vars expected at most 1 argument, got {len(obj)}")
        return self._safe_dict(obj[0])

    @staticmethod
    def _globals() -> Mapping[str, Any]:
        return _frame_names(sys._getframe(1), use_globals=True)

    @staticmethod
    def _locals() -> Mapping[str, Any]:
        return _frame_names(sys._getframe(1))

    # -- files

    def resolve(self, file: Any) -> Path:
        """The absolute path of `file` if it lies inside the workspace; SandboxError otherwise."""
        if isinstance(file, (int, bool)):
            raise SandboxError("open() takes a path in the workspace, not a file descriptor")
        try:
            raw = os.fspath(file)
        except TypeError:
            raise TypeError(f"expected str, bytes or os.PathLike object, not {type(file).__name__}") from None
        text = os.fsdecode(raw)
        if "\x00" in text:
            raise ValueError("embedded null byte")
        path = Path(text)
        resolved = (path if path.is_absolute() else self.workspace / path).resolve()
        if resolved != self.workspace and self.workspace not in resolved.parents:
            raise SandboxError(f"open(): {text!r} is outside the workspace; cells may only open files under the "
                               "workspace (use relative paths like 'notes.txt')")
        return resolved

    def open(self, file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None, closefd: bool = True,
             opener: Any = None) -> Any:
        """`open` confined to the workspace (relative paths are relative to it)."""
        if opener is not None or not closefd:
            raise SandboxError("open(): opener and closefd are not available in cells")
        return io.open(self.resolve(file), mode, buffering, encoding, errors, newline)

    # -- imports

    def _is_workspace_file(self, name: str) -> bool:
        return name.isidentifier() and (self.workspace / f"{name}.py").is_file()

    def module_allowed(self, module: types.ModuleType) -> bool:
        """Whether cell code may hold this module object."""
        name = getattr(module, "__name__", None)
        if not isinstance(name, str):
            return False
        if name in self._workspace_modules:
            return self._workspace_modules[name][1] is module
        if name == "time":
            return module is self.time_module or module is _time
        return _module_allowed_name(name, self._extra)

    def _checked_module(self, module: types.ModuleType) -> types.ModuleType:
        if not self.module_allowed(module):
            raise SandboxImportError(f"module {module.__name__!r} is not available in cells")
        return self.time_module if module is _time else module

    def _import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> types.ModuleType:
        if level:
            raise SandboxImportError("relative imports are not available in cells")
        if not isinstance(name, str) or not name:
            raise SandboxImportError("import needs a module name")
        fromlist = tuple(fromlist or ())
        root = name.partition(".")[0]
        if root not in ALLOWED_MODULES and root not in self._extra:
            if "." not in name and self._is_workspace_file(name):
                module = self._workspace_module(name)
                return self._from_names(module, fromlist)
            raise SandboxImportError(
                f"import of {name!r} is not allowed in cells (allowed: "
                f"{', '.join(sorted(ALLOWED_MODULES | self._extra))}, and .py files in the workspace)")
        if not _module_allowed_name(name, self._extra):
            raise SandboxImportError(f"import of {name!r} is not allowed in cells")
        if root == "time":
            if name != "time":
                raise SandboxImportError(f"import of {name!r} is not allowed in cells")
            return self._from_names(self.time_module, fromlist)
        module = _builtins.__import__(name, None, None, fromlist, 0)
        if fromlist:
            return self._from_names(module, fromlist)
        return self._checked_module(module)

    def _from_names(self, module: types.ModuleType, fromlist: tuple[str, ...]) -> types.ModuleType:
        """Check `from module import a, b` (and `*`) before the names are bound."""
        if "*" in fromlist:
            names = getattr(module, "__all__", None)
            if names is None:
                names = [n for n in dir(module) if not n.startswith("_")]
            view = types.ModuleType(module.__name__)
            view.__all__ = []  # type: ignore[attr-defined]
            for attr in names:
                try:
                    value = self.getattr(module, attr)
                except (SandboxError, AttributeError):
                    continue
                setattr(view, attr, value)
                view.__all__.append(attr)  # type: ignore[attr-defined]
            return view
        for attr in fromlist:
            if not isinstance(attr, str):
                raise SandboxImportError("import names must be strings")
            try:
                self.getattr(module, attr)
            except AttributeError:
                pass  # IMPORT_FROM reports "cannot import name"
        return module

    def _workspace_module(self, name: str) -> types.ModuleType:
        """Load (or reuse) `<workspace>/<name>.py` through this sandbox, private to this executor."""
        path = self.workspace / f"{name}.py"
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            cached = self._workspace_modules.get(name)
            if cached is not None and cached[0] == key:
                return cached[1]
        source = path.read_text(encoding="utf-8")
        try:
            prepared = self.prepare(source, str(path), echo=False)
        except SandboxRefusal as refusal:
            raise SandboxImportError(f"workspace module {name!r} refused: {refusal.message}") from None
        module = types.ModuleType(name)
        module.__dict__.update(__builtins__=self.builtins, __file__=str(path))
        with self._lock:
            self._workspace_modules[name] = (key, module)
            self._cell_modules.add(name)
        try:
            exec(prepared.body, module.__dict__)
        except BaseException:
            with self._lock:
                self._workspace_modules.pop(name, None)
            raise
        return module

    # -- attribute guards

    def _cell_origin(self, klass: type) -> bool:
        return _module_of(klass) in self._cell_modules

    def _roots(self, obj: Any) -> set[str]:
        """Top-level packages `obj` comes from: a module's own, or those of every class in its (class's) MRO."""
        if isinstance(obj, types.ModuleType):
            name = obj.__dict__.get("__name__")
            return {name.partition(".")[0]} if isinstance(name, str) else set()
        klass = obj if isinstance(obj, type) else type(obj)
        return {_module_of(k).partition(".")[0] for k in _mro(klass)}

    def _private_ok(self, obj: Any, name: str) -> bool:
        """Private names are the cell's own business only: defined by a cell class, or on a cell instance."""
        if name in _CAPTURE_PRIVATE_OK:
            return True
        if isinstance(obj, types.ModuleType):
            return obj.__dict__.get("__name__") in self._workspace_modules
        if isinstance(obj, super):
            obj = obj.__self__
        klass = obj if isinstance(obj, type) else type(obj)
        for k in _mro(klass):
            if name in k.__dict__:
                return self._cell_origin(k)
        return not isinstance(obj, type) and self._cell_origin(klass)

    @staticmethod
    def _describe(obj: Any) -> str:
        if isinstance(obj, types.ModuleType):
            return str(obj.__dict__.get("__name__", "module"))
        if isinstance(obj, type):
            return obj.__qualname__
        return type(obj).__qualname__ + " object"

    def check_read(self, obj: Any, name: str) -> None:
        """Raise SandboxError if cell code may not read `obj.<name>`."""
        if _refused_name(name):
            raise SandboxError(f"`{name}` may not be used in cells")
        if name.startswith("_"):
            if name.startswith("__") and name.endswith("__"):
                if name in _FOREIGN_ONLY and not self._private_ok(obj, name):
                    raise SandboxError(f"`{name}` of {self._describe(obj)} is not available in cells")
                if name in ("__set__", "__delete__") and not self._cell_origin(type(obj)):
                    raise SandboxError(f"`{name}` of {self._describe(obj)} is not available in cells")
                if name in ("__dict__", "__getattr__") and isinstance(obj, types.ModuleType):
                    raise SandboxError(f"the {name} of a module is not available in cells; use dir() and "
                                       "plain attributes")
            elif not self._private_ok(obj, name):
                raise SandboxError(f"private attribute `{name}` of {self._describe(obj)} is not available in "
                                   "cells; use the documented API")
            return
        if _rule_lookup(name) is not None:
            for root in self._roots(obj):
                reason = _rule_for(name, root)
                if reason:
                    raise SandboxError(f"{self._describe(obj)}.{name} is not available in cells: {reason}")

    def getattr(self, obj: Any, name: str) -> Any:
        """`obj.<name>` for cell code: refused names raise SandboxError; modules met on the way are checked."""
        return self._get(obj, name, getattr)

    def _get(self, obj: Any, name: str, fetch: Callable[[Any, str], Any]) -> Any:
        if name[:1] == "_" or _rule_lookup(name) is not None:
            self.check_read(obj, name)
            if name == "__dict__":
                return self._safe_dict(obj)
            if name in _WRAPPED_SLOTS:
                return self._wrapped_slot(obj, name)
        return self._wrap(obj, name, fetch(obj, name))

    def _wrap(self, obj: Any, name: str, value: Any) -> Any:
        """What cell code receives for `obj.<name>`: modules checked, str.format made to respect the rules."""
        if isinstance(value, types.ModuleType):
            return self._checked_module(value)
        if name in _FORMAT_NAMES and (isinstance(obj, str) or isinstance(obj, type) and issubclass(obj, str)):
            return self._format_method(obj, value)
        return value

    def _format_method(self, obj: Any, method: Callable[..., str]) -> Callable[..., str]:
        """`str.format` / `format_map` that refuse fields reaching private or refused attributes."""
        unbound = isinstance(obj, type)

        def format_checked(*args: Any, **kwargs: Any) -> str:
            template = args[0] if unbound and args else obj
            if isinstance(template, str):
                _check_format_fields(template)
            return method(*args, **kwargs)
        return format_checked

    def target(self, obj: Any, name: str) -> Any:
        """Return `obj` if cell code may set or delete `obj.<name>`; SandboxError otherwise."""
        if _refused_name(name):
            raise SandboxError(f"`{name}` may not be used in cells")
        if isinstance(obj, types.ModuleType):
            if obj.__dict__.get("__name__") not in self._workspace_modules:
                raise SandboxError(f"modules are read-only in cells (cannot set {self._describe(obj)}.{name}); "
                                   "they are shared with other episodes")
            return obj
        if isinstance(obj, type):
            if not self._cell_origin(obj):
                raise SandboxError(f"class {obj.__qualname__} is read-only in cells (shared with other episodes)")
            return obj
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            module = getattr(obj, "__module__", None)
            if module not in self._cell_modules:
                raise SandboxError(f"library function {getattr(obj, '__qualname__', '?')} is read-only in cells")
            return obj
        if name.startswith("_") and not self._private_ok(obj, name):
            raise SandboxError(f"private attribute `{name}` of {self._describe(obj)} is not available in cells")
        return obj

    def _safe_dict(self, obj: Any) -> Mapping[str, Any]:
        """`obj.__dict__` / `vars(obj)`: the real dict of the cell's own objects, else a public snapshot."""
        if isinstance(obj, types.ModuleType):
            raise SandboxError("the __dict__ of a module is not available in cells; use dir()")
        try:
            real = obj.__dict__
        except AttributeError:
            raise TypeError("vars() argument must have __dict__ attribute") from None
        klass = obj if isinstance(obj, type) else type(obj)
        if self._cell_origin(klass):
            if not isinstance(obj, type):
                return real
            return types.MappingProxyType({k: v for k, v in real.items() if not _refused_name(k)})
        snapshot = {}
        for key, value in real.items():
            if not isinstance(key, str) or key.startswith("_") or \
                    isinstance(value, types.ModuleType) and not self.module_allowed(value):
                continue
            try:
                self.check_read(obj, key)
            except SandboxError:
                continue
            snapshot[key] = self._wrap(obj, key, value)
        return types.MappingProxyType(snapshot)

    def _wrapped_slot(self, obj: Any, name: str) -> Callable[..., Any]:
        """`__getattribute__` / `__setattr__` / `__delattr__` that apply the same checks as plain access."""
        slot = getattr(obj, name)
        unbound = isinstance(obj, type)

        def split(args: tuple[Any, ...]) -> tuple[Any, Any]:
            if len(args) < (2 if unbound else 1):
                raise TypeError(f"{name} expected more arguments")
            return (args[0], args[1]) if unbound else (obj, args[0])

        if name == "__getattribute__":
            def get(*args: Any) -> Any:
                target, attr = split(args)
                if not isinstance(attr, str):
                    raise TypeError("attribute name must be string")
                return self._get(target, attr, lambda _o, _n: slot(*args))
            return get

        def put(*args: Any) -> Any:
            target, attr = split(args)
            if isinstance(target, super):
                target = target.__self__
            if not isinstance(attr, str):
                raise TypeError("attribute name must be string")
            if attr.startswith("__") and attr.endswith("__") and \
                    not self._cell_origin(target if isinstance(target, type) else type(target)):
                raise SandboxError(f"`{attr}` of {self._describe(target)} is read-only in cells")
            self.target(target, attr)
            return slot(*args)
        return put


def _module_of(klass: type) -> str:
    module = type.__dict__["__module__"].__get__(klass)
    return module if isinstance(module, str) else ""


def _mro(klass: type) -> tuple[type, ...]:
    return type.__dict__["__mro__"].__get__(klass)


def _check_format_fields(template: str, depth: int = 0) -> None:
    """Refuse `{0._x}`-style fields: str.format reads attributes by name, around the guard."""
    try:
        fields = list(_string.formatter_parser(template))
    except ValueError:
        return  # malformed: the real format call reports it
    for _, field_name, spec, _ in fields:
        if field_name:
            _, rest = _string.formatter_field_name_split(field_name)
            for is_attribute, key in rest:
                if is_attribute and (str(key).startswith("_") or _rule_lookup(str(key)) is not None):
                    raise SandboxError(f"format field {{{field_name}}}: attribute {key!r} is not available in "
                                       "format strings in cells; use an f-string")
        if spec and depth < 2:
            _check_format_fields(spec, depth + 1)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _frame_names(frame: types.FrameType, *, use_globals: bool = False) -> Mapping[str, Any]:
    names = frame.f_globals if use_globals else frame.f_locals
    return types.MappingProxyType({k: v for k, v in names.items() if k != "__builtins__"})


@functools.lru_cache(maxsize=8192)
def _rule_lookup(name: str) -> str | None:
    """A quick test: can `name` be refused on some receiver? (exact rules, cv2 patterns, blocked names)."""
    if name in _ATTR_RULES:
        return next(iter(_ATTR_RULES[name].values()))
    if name in BLOCKED_NAMES:
        return "blocked"
    if _CV2_PATTERN.match(name):
        return _ATTR_RULES["imread"]["cv2"]
    return None


def _reraise_control() -> None:
    """Placed first in every handler by the rewrite: the end of an episode or cell cannot be swallowed."""
    exc = sys.exc_info()[1]
    if isinstance(exc, (EpisodeFinished, CellInterrupted)):
        raise exc
