"""Exceptions and the cancel token shared by the primitives, the step bridge and the cell executor.

`EpisodeFinished` and `CellInterrupted` derive from BaseException on purpose: agent code that writes
`except Exception:` must not be able to swallow the end of an episode or a cell deadline.
"""

from __future__ import annotations

import threading


class EpisodeFinished(BaseException):
    """The episode is over (success, step limit, failure, reset or budget); no further motion is possible.

    `reason` is one of: "success", "step_limit", "failed", "reset", "budget", "cancelled". `ran`: how many actions
    of the chunk being exchanged the station had received when the episode ended (they count against the step
    limit; a benchmark that ends the episode partway through a chunk skips the rest, so this is an upper bound).
    """

    def __init__(self, reason: str, detail: str = "", *, ran: int = 0) -> None:
        super().__init__(f"episode finished: {reason}" + (f" ({detail})" if detail else ""))
        self.reason = reason
        self.detail = detail
        self.ran = int(ran)


class CellInterrupted(BaseException):
    """The running cell was interrupted (its deadline passed, or the host cancelled it)."""

    def __init__(self, reason: str = "deadline") -> None:
        super().__init__(f"cell interrupted: {reason}")
        self.reason = reason


class CancelToken:
    """A thread-safe flag a host sets to stop primitives between chunks.

    The host calls `cancel(exc)` with the exception primitives should raise (e.g. `CellInterrupted("deadline")`
    or `EpisodeFinished("reset")`); primitives call `check()` between chunks and `wait(timeout)` when they block.
    `clear()` re-arms the token for the next cell; an `EpisodeFinished` is sticky and survives `clear()`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._exc: BaseException | None = None

    def cancel(self, exc: BaseException) -> None:
        with self._lock:
            if isinstance(self._exc, EpisodeFinished):
                return  # the end of the episode wins over any later cancel
            self._exc = exc
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def exception(self) -> BaseException | None:
        with self._lock:
            return self._exc

    def check(self) -> None:
        """Raise the stored exception if the token is cancelled."""
        with self._lock:
            exc = self._exc
        if exc is not None:
            raise exc

    def wait(self, timeout: float | None) -> bool:
        """Block until cancelled or `timeout` seconds pass; True if cancelled."""
        return self._event.wait(timeout)

    def clear(self) -> None:
        """Re-arm after a cell interruption (an EpisodeFinished stays)."""
        with self._lock:
            if isinstance(self._exc, EpisodeFinished):
                return
            self._exc = None
            self._event.clear()
