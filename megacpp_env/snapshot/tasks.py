"""Threads with a result, for the snapshot's critical path: ``concurrent.futures`` imports
``logging`` (~4 ms before the first collector can start, every snapshot) for what these do in a
few lines: one call in a thread of its own (``Task``), and a call per item on a few threads
(``map_threads``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Task(Generic[T]):
    """``fn(*args, **kwargs)`` in a daemon thread, started at once."""

    def __init__(self, fn: Callable[..., T], *args: Any, name: str = "snapshot-task", **kwargs: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def exception(self) -> BaseException | None:
        """Waits; what the call raised, or None."""
        self._thread.join()
        return self._error

    def result(self) -> T:
        """Waits; what the call returned, or raises what it raised."""
        if self.exception() is not None:
            raise self._error  # type: ignore[misc]
        return self._value  # type: ignore[return-value]


class Handoff(Generic[T]):
    """One value handed from one thread to others: ``put`` once, ``get`` waits (bounded)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._value: T | None = None

    def put(self, value: T | None) -> None:
        self._value = value
        self._event.set()

    def get(self, timeout: float) -> T | None:
        """The value, or None when none was put within ``timeout`` (or None was put)."""
        return self._value if self._event.wait(timeout) else None


def map_threads(fn: Callable[[T], R], items: Iterable[T], *, workers: int) -> list[R]:
    """``[fn(item) for item in items]`` on at most ``workers`` threads, in the items' order; once
    all have run, the error of the first item (by position) that raised is raised."""
    todo = list(items)
    lanes = max(1, min(workers, len(todo)))

    def lane(first: int) -> list[tuple[int, Any, BaseException | None]]:
        done: list[tuple[int, Any, BaseException | None]] = []
        for i in range(first, len(todo), lanes):
            try:
                done.append((i, fn(todo[i]), None))
            except Exception as exc:  # raised below, in the items' order
                done.append((i, None, exc))
        return done

    tasks = [Task(lane, first, name="snapshot-map") for first in range(lanes)]
    results = sorted((row for task in tasks for row in task.result()), key=lambda row: row[0])
    for _i, _value, error in results:
        if error is not None:
            raise error
    return [value for _i, value, _error in results]
