"""Reference programs: cells an LLM could have written with the public `robo` API, one file per task.

Each file is a sequence of cells, each starting with a `# %% <title>` line (the percent format of notebooks);
anything before the first marker is a header and is not played. A line `# %% include NAME` stands for the cells of
`NAME.py` in this package (helpers several programs share: files whose names start with `_` are no program). The scripted planner plays the cells as
`python(code)` calls; `pyrua-dojo bench programs` measures them on the twin.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

CELL_MARKER = "# %%"
INCLUDE_MARKER = "# %% include "


def available() -> tuple[str, ...]:
    """Task names that have a reference program."""
    root = resources.files(__name__)
    return tuple(sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".py") and not p.name.startswith("_")))


def program_for(task: str) -> str | None:
    """The program that serves a task (`X_random` uses X's), or None."""
    for name in (task, task.removesuffix("_random")):
        if name in available():
            return name
    return None


def split_cells(text: str, include: Callable[[str], str] | None = None) -> list[str]:
    """Cells of a percent-format program; each keeps its title as a leading comment. `include(name)` gives the
    text of an included file (ValueError when the program includes one and there is no `include`)."""
    cells: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(INCLUDE_MARKER):
            name = line[len(INCLUDE_MARKER):].strip()
            if include is None:
                raise ValueError(f"this program includes {name!r}, which only packaged programs can")
            cells.extend([c.rstrip("\n").split("\n") for c in split_cells(include(name))])
            cells.append([])  # lines up to the next marker belong to no cell
        elif line.startswith(CELL_MARKER):
            title = line[len(CELL_MARKER):].strip()
            cells.append([f"# {title}"] if title else [])
        elif cells:
            cells[-1].append(line)
    return ["\n".join(c).strip("\n") + "\n" for c in cells if any(ln.strip() and not ln.lstrip().startswith("#") for ln in c)]


def _packaged(name: str) -> str:
    try:
        return resources.files(__name__).joinpath(f"{name}.py").read_text()
    except FileNotFoundError:
        raise ValueError(f"no packaged program file {name}.py") from None


def cells(task: str) -> list[str]:
    """The cells of a task's reference program; ValueError if there is none."""
    name = program_for(task)
    if name is None:
        raise ValueError(f"no reference program for {task!r}; available: {', '.join(available())}")
    return split_cells(_packaged(name), include=_packaged)
