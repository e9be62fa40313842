"""The prompt, assembled from the texts in `prompts/` and an API reference generated from the live `robo` class.

System prompt = contract (the tool, the namespace, feedback and images, limits) + API reference (signatures and
docstrings of the robot class and its result dataclasses, so it cannot drift from the code) + operating notes for
the X5 station (with the measuring notes of the RGB or the depth variant) + how RoboDojo judges a final scene.
The first user message is the task card: task name, instruction verbatim, step limit, and the first images.
No recipe for any task is written anywhere here.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import io
import re
import string
import textwrap
import tokenize
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from primitives.results import CapturedImage
from prompts import load_text, render
from pyrua_dojo.images import ImageAttachment, encode_image

if TYPE_CHECKING:
    from calibration.station import Station
    from primitives.robot import RoboConfig

__all__ = [
    "CHARS_PER_TOKEN",
    "CORE_TOKEN_BUDGET",
    "Prompt",
    "PromptOptions",
    "TaskCard",
    "api_reference",
    "build_prompt",
    "estimate_tokens",
    "load_text",
    "referenced_types",
    "render",
    "robo_api_reference",
    "station_facts",
    "run_cli",
]

CHARS_PER_TOKEN = 4
"""The estimate used for prompt budgets: one token per 4 characters of English and code."""

def estimate_tokens(text: str) -> int:
    """A character-based token estimate (ceil(chars / 4))."""
    return -(-len(text) // CHARS_PER_TOKEN)


# ---------------------------------------------------------------------------------------------------------------
# API reference
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Task card and assembly
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskCard:
    """What the agent is told about this episode: the task, the instruction verbatim, the step limit, whether the
    arms must end at their start pose, and the first camera images (step 0)."""

    task: str
    instruction: str
    step_limit: int
    back_to_origin: bool | None = None  # None: unknown (not in the catalogue)
    images: tuple[CapturedImage, ...] = field(default=(), repr=False)
    seed: int | None = None
    layout: int | None = None

    def __post_init__(self) -> None:
        if not self.task or not isinstance(self.task, str):
            raise ValueError("a task card needs a task name")
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise ValueError(f"task card {self.task}: the instruction is empty")
        if isinstance(self.step_limit, bool) or not isinstance(self.step_limit, int) or self.step_limit <= 0:
            raise ValueError(f"task card {self.task}: step_limit must be a positive int, got {self.step_limit!r}")

    @classmethod
    def for_task(
        cls,
        task: str,
        instruction: str | None = None,
        *,
        images: Sequence[CapturedImage] = (),
        step_limit: int | None = None,
        seed: int | None = None,
        layout: int | None = None,
    ) -> TaskCard:
        """A card from the task catalogue: step limit and back-to-origin from the catalogue; the instruction is
        the one the episode received (verbatim), else the catalogue's text."""
        from pyrua_dojo.catalog import get_task

        spec = get_task(task)
        return cls(
            task=task,
            instruction=instruction if instruction is not None else spec.instruction,
            step_limit=step_limit if step_limit is not None else spec.step_limit,
            back_to_origin=spec.back_to_origin,
            images=tuple(images),
            seed=seed,
            layout=layout,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "instruction": self.instruction,
            "step_limit": self.step_limit,
            "back_to_origin": self.back_to_origin,
            "seed": self.seed,
            "layout": self.layout,
            "images": [{"source": im.source, "step": im.step, "label": im.label, "shape": list(im.image.shape)} for im in self.images],
        }


@dataclass(frozen=True)
class PromptOptions:
    """Choices that change the prompt's wording or attachments."""

    depth: bool = False  # the depth variant of the measuring notes
    card_images: bool = True  # attach the first camera images to the card
    images: bool = True  # the model can see images at all (False: text-only models)
    cell_deadline_s: float = 120.0
    calls_left_notice: bool = False  # tool results say how many LLM calls are left
    judging_card: bool = True  # the card says what RoboDojo's success check of this task accepts
    image_format: Literal["jpeg", "png"] = "jpeg"
    jpeg_quality: int = 85
    image_max_side: int | None = 640


@dataclass(frozen=True)
class Prompt:
    """An assembled prompt: the system text, the card's text and encoded images, and section sizes."""

    system: str
    card: TaskCard
    card_text: str
    card_images: tuple[ImageAttachment, ...]
    sections: Mapping[str, int]  # characters per section: contract, api, notes, judging, card, judging_card (in card)
    options: PromptOptions

    @property
    def text(self) -> str:
        """What prompt.txt holds: the system prompt, then the first user message's text."""
        return f"{self.system}\n\n{_CARD_MARK}\n\n{self.card_text}\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def core_tokens(self) -> int:
        """Estimated tokens of contract + API + notes + judging (the part that must stay under budget)."""
        return sum(-(-self.sections[k] // CHARS_PER_TOKEN) for k in ("contract", "api", "notes", "judging"))


_CARD_MARK = "=== first user message: task card ==="


def build_prompt(
    card: TaskCard,
    *,
    api: str | None,
    options: PromptOptions = PromptOptions(),
    facts: Mapping[str, str] | None = None,
) -> Prompt:
    """Assemble the prompt. `api` is the API reference text (`robo_api_reference(...)`); None states that it is
    unavailable (only for inspecting texts before the robot class exists). `facts`: the station's numbers the
    notes state (`station_facts(...)`; default the packaged station's)."""

    images_text = load_text("contract_images" if options.images else "contract_no_images")
    calls_left = load_text("contract_calls_left") if options.calls_left_notice else ""
    contract = render(
        "contract",
        images=images_text,
        cell_deadline_s=_num(options.cell_deadline_s),
        calls_left=calls_left,
    )
    contract = re.sub(r"\n{3,}", "\n\n", contract)
    api_text = "# API reference (the `robo` object)\n\n" + (
        api if api is not None else "(unavailable: the robot class could not be imported)"
    )
    notes = render("notes", measuring=load_text("measure_depth" if options.depth else "measure_rgb"),
                   **(facts if facts is not None else station_facts()))
    judging = load_text("judging")
    system = "\n\n".join([contract, api_text, notes, judging])

    attachments: list[Any] = []
    if options.card_images and options.images:
        for k, im in enumerate(card.images, start=1):
            data, mime, w, h = encode_image(
                im.image, fmt=options.image_format, quality=options.jpeg_quality, max_side=options.image_max_side
            )
            label = f"image {k}: {im.source} @ step {im.step}" + (f", {im.label}" if im.label else "")
            attachments.append(ImageAttachment(label=label, source=im.source, step=im.step, mime=mime, data=data, width=w, height=h))
    if attachments:
        images_line = render("card_images", sources=", ".join(a.source for a in attachments))
    else:
        images_line = load_text("card_no_images")
    if card.back_to_origin is True:
        origin_line = load_text("card_back_to_origin")
    elif card.back_to_origin is False:
        origin_line = load_text("card_no_back_to_origin")
    else:
        origin_line = ""
    judging_card = ""
    if options.judging_card:
        from pyrua_dojo.catalog import TASKS as CATALOGUE
        from pyrua_dojo.judging_cards import judging_text

        if card.task in CATALOGUE:  # a catalogue task without a text raises; a name outside it has none
            judging_card = "\n" + render("card_judging", text=judging_text(card.task))
    card_text = render(
        "card",
        task=card.task,
        instruction=card.instruction,
        step_limit=card.step_limit,
        seconds=_num(card.step_limit * 0.04),
        back_to_origin=origin_line,
        judging=judging_card,
        images=images_line,
    )
    card_text = re.sub(r"\n{3,}", "\n\n", card_text).strip()
    sections = {
        "contract": len(contract),
        "api": len(api_text),
        "notes": len(notes),
        "judging": len(judging),
        "card": len(card_text),
        "judging_card": len(judging_card.strip()),
    }
    return Prompt(
        system=system,
        card=card,
        card_text=card_text,
        card_images=tuple(attachments),
        sections=types.MappingProxyType(sections),
        options=options,
    )


def _num(x: float) -> str:
    return f"{x:g}"


# ---------------------------------------------------------------------------------------------------------------
# `pyrua-dojo prompt`
# ---------------------------------------------------------------------------------------------------------------

CORE_TOKEN_BUDGET = 8000
"""Contract + API reference + notes + judging must stay under this many estimated tokens."""


def run_cli(
    task: str,
    *,
    depth: bool = False,
    instruction: str | None = None,
    step_limit: int | None = None,
    size_only: bool = False,
    judging_card: bool = True,
    out: Any = None,
    err: Any = None,
) -> int:
    """Print the prompt an episode of `task` would get (the card as with the three step-0 images attached), then
    its size per section. Exit status 0; 1 when contract + API + notes exceed CORE_TOKEN_BUDGET or the task's judging
    text exceeds JUDGING_CARD_TOKEN_BUDGET; 2 on bad input."""
    from pyrua_dojo.judging_cards import JUDGING_CARD_TOKEN_BUDGET

    import sys

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    cameras = ("cam_head", "cam_left_wrist", "cam_right_wrist")
    blank = tuple(CapturedImage(c, 0, np.zeros((480, 640, 3), np.uint8)) for c in cameras)
    try:
        card = TaskCard.for_task(task, instruction, images=blank, step_limit=step_limit)
    except ValueError as exc:
        print(f"pyrua-dojo prompt: {exc}", file=err)
        return 2
    api = robo_api_reference()
    if api is None:
        print("pyrua-dojo prompt: primitives.robot.Robo is not available; the API reference is left out", file=err)
    prompt = build_prompt(card, api=api, options=PromptOptions(depth=depth, judging_card=judging_card))
    if not size_only:
        print(prompt.text, file=out)
        labels = ", ".join(a.label for a in prompt.card_images)
        print(f"[{len(prompt.card_images)} images attached to the card: {labels}]\n", file=out)
    print(f"prompt size ({'depth' if depth else 'RGB'} variant; tokens estimated as chars / {CHARS_PER_TOKEN}):", file=out)
    for name, chars in prompt.sections.items():
        if name == "judging_card":
            continue
        print(f"  {name:<10} {chars:>7,} chars  ~{estimate_tokens('x' * chars):>6,} tokens", file=out)
    jc = prompt.sections["judging_card"]
    jc_tokens = estimate_tokens("x" * jc)
    jc_ok = jc_tokens <= JUDGING_CARD_TOKEN_BUDGET
    jc_state = f"{'within' if jc_ok else 'OVER'} the {JUDGING_CARD_TOKEN_BUDGET:,} budget" if judging_card else "off"
    print(f"    judging card (in card) {jc:>5,} chars  ~{jc_tokens:>4,} tokens: {jc_state}", file=out)
    total = len(prompt.text)
    print(f"  {'total':<10} {total:>7,} chars  ~{estimate_tokens(prompt.text):>6,} tokens  sha256 {prompt.sha256[:16]}", file=out)
    ok = prompt.core_tokens <= CORE_TOKEN_BUDGET
    verdict = "within" if ok else "OVER"
    print(f"  contract + api + notes + judging ~{prompt.core_tokens:,} tokens: {verdict} the {CORE_TOKEN_BUDGET:,} budget", file=out)
    return 0 if ok and jc_ok else 1
