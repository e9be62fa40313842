"""Atomic file writes: a reader (another process, a crash, a resumed run) never sees half a file.

Every file the project writes for others to read goes through here: a temporary file beside the target, flushed
and synced, then renamed onto it (or hard-linked, for a file that must be written at most once).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _temporary(path: Path, suffix: str = "") -> Path:
    """A name beside `path`, unique per process and thread, hidden, ending in `suffix` (for writers that look at it)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp{suffix}")


@contextmanager
def replacing(path: Path | str, *, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block ends without an error it is renamed onto `path`,
    otherwise removed. For writers that take a path (matplotlib, a validator that reads the file back)."""
    path = Path(path)
    tmp = _temporary(path, suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path | str, data: bytes | str) -> None:
    """Write `data` (text as UTF-8, with "\\n" line ends) to `path` via a synced temporary file and a rename."""
    with replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())


def create_once(path: Path | str, data: bytes | str) -> bool:
    """Write `path` unless it exists, atomically across processes; False if it already existed (nothing written)."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
