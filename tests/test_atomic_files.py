"""pyrua_dojo.runtime.atomic_files: atomic replacement, write-once, and nothing left behind on failure."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pyrua_dojo.runtime.atomic_files import create_once, replacing, write_atomic


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    write_atomic(target, "first, and longer\n")
    write_atomic(target, b"second\n")
    assert target.read_bytes() == b"second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_failing_writer_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("the writer died")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_replacing_keeps_the_suffix_a_writer_may_look_at(tmp_path: Path) -> None:
    with replacing(tmp_path / "plot.png", suffix=".png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path
        tmp.write_bytes(b"png")
    assert (tmp_path / "plot.png").read_bytes() == b"png"


def test_create_once_has_exactly_one_winner_among_racing_threads(tmp_path: Path) -> None:
    target = tmp_path / "_eval.json"
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        if create_once(target, f"writer {i}\n"):
            wins.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and target.read_text() == f"writer {wins[0]}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["_eval.json"]
