"""The API reference in the system prompt, generated from the live `Robo` class: signatures and docstrings of its
methods and of the result dataclasses they return (so it cannot drift from the code), with the station's numbers
filled in from the station model and `RoboConfig`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import string
import textwrap
import tokenize
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from primitives.results import CapturedImage

if TYPE_CHECKING:
    from calibration.station import Station
    from primitives.robot import RoboConfig

__all__ = [
    "api_reference",
    "referenced_types",
    "robo_api_reference",
    "station_facts",
]


def _fmt_annotation(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    return inspect.formatannotation(annotation)


def _fmt_param(p: inspect.Parameter) -> str:
    text = p.name
    if p.kind is inspect.Parameter.VAR_POSITIONAL:
        text = "*" + text
    elif p.kind is inspect.Parameter.VAR_KEYWORD:
        text = "**" + text
    ann = _fmt_annotation(p.annotation)
    if ann:
        text += f": {ann}"
    if p.default is not inspect.Parameter.empty:
        text += f" = {p.default!r}" if ann else f"={p.default!r}"
    return text


def _signature(prefix: str, func: Any, width: int) -> str:
    """`prefix(params) -> ret`, one parameter per line when the single line exceeds `width`."""
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    parts: list[str] = []
    star_done = False
    for i, p in enumerate(params):
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            star_done = True
        parts.append(_fmt_param(p))
        nxt = params[i + 1] if i + 1 < len(params) else None
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and (nxt is None or nxt.kind is not p.kind):
            parts.append("/")
    ret = _fmt_annotation(sig.return_annotation)
    tail = f" -> {ret}" if ret else ""
    one = f"{prefix}({', '.join(parts)}){tail}"
    if len(one) <= width:
        return one
    inner = "".join(f"    {part},\n" for part in parts)
    return f"{prefix}(\n{inner}){tail}"


def _doc(obj: Any) -> str:
    doc = inspect.getdoc(obj)
    return doc.strip() if doc else ""


def _indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(text, prefix) if text else ""


def _hidden(cls: type) -> frozenset[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(getattr(klass, "__prompt_hidden__", ()))
    return frozenset(names)


def _is_hidden(name: str, value: Any, hidden: frozenset[str]) -> bool:
    if name.startswith("_") or name in hidden:
        return True
    target = value.fget if isinstance(value, property) else value
    target = getattr(target, "__func__", target)
    return bool(getattr(target, "__prompt_hidden__", False) is True)


def _field_comments(cls: type) -> dict[str, str]:
    """Trailing `# comments` on the field lines of a dataclass's source: they document the fields."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
        tree = ast.parse(source)
    except (tokenize.TokenError, SyntaxError):
        return {}
    out: dict[str, str] = {}
    klass = tree.body[0] if tree.body else None
    if not isinstance(klass, ast.ClassDef):
        return {}
    for node in klass.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = node.end_lineno or node.lineno
            if line in comments:
                out[node.target.id] = comments[line]
    return out


def _members(cls: type, stop: tuple[type, ...]) -> list[tuple[str, Any]]:
    """Public members defined on `cls` or its bases up to (excluding) `stop`, in definition order."""
    seen: dict[str, Any] = {}
    for klass in reversed([k for k in cls.__mro__ if k not in stop and k is not object]):
        for name, value in vars(klass).items():
            seen[name] = value
    return list(seen.items())


def _render_result_type(rtype: type, width: int) -> str:
    hidden = _hidden(rtype)
    lines = [f"class {rtype.__name__}:"]
    doc = _doc(rtype)
    if doc:
        lines.append(_indent(doc))
    if dataclasses.is_dataclass(rtype):
        comments = _field_comments(rtype)
        hints = {f.name: f.type for f in dataclasses.fields(rtype)}
        for f in dataclasses.fields(rtype):
            if f.name.startswith("_") or f.name in hidden:
                continue
            ann = _fmt_annotation(hints[f.name])
            note = comments.get(f.name, "")
            line = f"    {f.name}: {ann}" + (f"  # {note}" if note else "")
            lines.append(line)
    for name, value in _members(rtype, ()):
        if _is_hidden(name, value, hidden) or (dataclasses.is_dataclass(rtype) and name in rtype.__dataclass_fields__):
            continue
        if isinstance(value, property):
            pdoc = _doc(value)
            ret = ""
            if value.fget is not None:
                ret = _fmt_annotation(inspect.signature(value.fget).return_annotation)
            lines.append(f"    {name}{': ' + ret if ret else ''}  (property)" + (f"  # {pdoc.splitlines()[0]}" if pdoc else ""))
        elif inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if name in ("__init__",) or name.startswith("__"):
                continue
            lines.append(_indent(_signature(f"{name}", func, width - 4)))
            fdoc = _doc(func)
            if fdoc:
                lines.append(_indent(fdoc, "        "))
    return "\n".join(lines)


def api_reference(
    robot_cls: type,
    result_types: Iterable[type] = (),
    *,
    instance: str = "robo",
    width: int = 88,
) -> str:
    """The API reference of `robot_cls` as the LLM reads it, generated from the live class.

    Rendered: the class docstring; constants (public UPPERCASE class attributes); every public method, property
    and static/class method with its signature (keyword-only markers, defaults, annotations as written; lines over
    `width` broken one parameter per line) and docstring; then each result type with its fields (types and the
    trailing `#` comments of their source lines), properties and methods. Hidden: `_names`, names listed in a
    class's `__prompt_hidden__` tuple, and functions marked with `__prompt_hidden__ = True` (host-side members).
    """
    hidden = _hidden(robot_cls)
    out: list[str] = []
    doc = _doc(robot_cls)
    if doc:
        out.append(doc)
    constants: list[str] = []
    methods: list[str] = []
    for name, value in _members(robot_cls, ()):
        if _is_hidden(name, value, hidden):
            continue
        if name.isupper() and not callable(value) and not isinstance(value, property):
            constants.append(f"{instance}.{name} = {value!r}")
            continue
        if isinstance(value, property):
            ret = _fmt_annotation(inspect.signature(value.fget).return_annotation) if value.fget else ""
            head = f"{instance}.{name}" + (f" -> {ret}" if ret else "") + "  (property)"
            body = _doc(value)
        elif isinstance(value, (staticmethod, classmethod)):
            head = _signature(f"{instance}.{name}", value.__func__, width)
            body = _doc(value.__func__)
        elif inspect.isfunction(value):
            head = _signature(f"{instance}.{name}", value, width)
            body = _doc(value)
        else:
            continue
        methods.append(head + ("\n" + _indent(body) if body else ""))
    if constants:
        out.append("Constants:\n" + "\n".join(constants))
    if methods:
        out.append(f"Methods and attributes of {instance}:\n\n" + "\n\n".join(methods))
    rtypes = list(dict.fromkeys(result_types))
    if rtypes:
        out.append(
            "Result types (frozen dataclasses; read fields as attributes):\n\n"
            + "\n\n".join(_render_result_type(t, width) for t in rtypes)
        )
    return "\n\n".join(out)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def referenced_types(robot_cls: type, namespace: Mapping[str, Any]) -> tuple[type, ...]:
    """The classes of `namespace` named in `robot_cls`'s public signatures, and, recursively, in their fields and
    properties: exactly the result types the LLM meets through the API."""
    found: dict[str, type] = {}
    pending: list[type] = [robot_cls]
    visited: set[type] = set()

    def scan(text: str) -> None:
        for name in _IDENT.findall(text):
            obj = namespace.get(name)
            if isinstance(obj, type) and obj is not robot_cls and name not in found:
                found[name] = obj
                pending.append(obj)

    while pending:
        cls = pending.pop(0)
        if cls in visited:
            continue
        visited.add(cls)
        hidden = _hidden(cls)
        if dataclasses.is_dataclass(cls):
            for f in dataclasses.fields(cls):
                if not f.name.startswith("_"):
                    scan(_fmt_annotation(f.type))
        for name, value in _members(cls, ()):
            if _is_hidden(name, value, hidden):
                continue
            func = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if inspect.isfunction(func):
                try:
                    sig = inspect.signature(func)
                except (TypeError, ValueError):
                    continue
                scan(_fmt_annotation(sig.return_annotation))
                for p in sig.parameters.values():
                    scan(_fmt_annotation(p.annotation))
    return tuple(found.values())


def station_facts(station: Station | None = None, config: RoboConfig | None = None) -> dict[str, str]:
    """The numbers the API reference and the operating notes state, each read from its one owner: the station
    (the agent's calibration; default the packaged one) or the primitives' configuration."""
    from calibration import load_station
    from primitives.motion import STEP_S
    from primitives.robot import RoboConfig

    station = station if station is not None else load_station()
    config = config if config is not None else RoboConfig()
    t = station.table

    def base(arm: str) -> str:
        x, y, _ = station.arms[arm].base_position
        return f"({x:g}, {y:g})"

    return {
        "table_z": f"{t.top_z:g}",
        "table_x": "{:g}..{:g}".format(*t.x_range),
        "table_y": "{:g}..{:g}".format(*t.y_range),
        "left_base": base("left"),
        "right_base": base("right"),
        "step_ms": f"{1000 * STEP_S:g}",
        "reach_mm": f"{1000 * config.reach_tolerance_m:g}",
        "reach_deg": f"{config.reach_tolerance_deg:g}",
        "contact_lag_mm": f"{1000 * config.contact_lag_m:g}",
        "held_threshold": f"{config.held_threshold:g}",
        "max_opening_m": f"{station.x5.gripper.max_width:.3f}",
        "max_opening_mm": f"{1000 * station.x5.gripper.max_width:.0f}",
    }


def fill_facts(text: str, facts: Mapping[str, str], where: str) -> str:
    """`text` with its `${fact}` placeholders filled; an unknown one raises ValueError (never a silent gap)."""
    try:
        return string.Template(text).substitute(facts)
    except KeyError as exc:
        raise ValueError(f"{where} names an unknown station fact ${{{exc.args[0]}}}") from None


def robo_api_reference(station: Station | None = None, config: RoboConfig | None = None) -> str | None:
    """The API reference of the real `primitives.robot.Robo` and the result types it uses, its numbers taken from
    `station` and `config` (see station_facts), or None while that class does not exist yet."""
    try:
        from primitives import robot as robot_module
    except ImportError:
        return None
    robo_cls = getattr(robot_module, "Robo", None)
    if not isinstance(robo_cls, type):
        return None
    import primitives.results as results_module

    namespace: dict[str, Any] = {**vars(results_module), **vars(robot_module)}
    rtypes = [
        t
        for t in referenced_types(robo_cls, namespace)
        if dataclasses.is_dataclass(t) and t.__module__.startswith("primitives") and t is not CapturedImage
    ]
    return fill_facts(api_reference(robo_cls, rtypes), station_facts(station, config), "the Robo API reference")
