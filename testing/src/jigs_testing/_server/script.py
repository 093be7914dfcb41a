"""The script: an ordered queue of replies, consumed one per model request."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from .replies import ScriptEntry, ScriptItem, coerce_entry

__all__ = ["Script"]


class Script:
    """Replies in the order they will be served; each model request takes the next one.

    Entries are never removed: ``script[i]`` stays the i-th reply, and :attr:`used` counts how
    many have been handed out, so ``reply_index`` in the request log points back here. Safe to
    extend from another thread while the server runs (``ModelServer.run_in_thread``).
    """

    def __init__(self, items: Iterable[ScriptItem] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: list[ScriptEntry] = [coerce_entry(item) for item in items]
        self._used = 0

    def add(self, *items: ScriptItem) -> None:
        """Append replies (a :class:`Reply`, a str for text, or a callable of the request)."""
        self.extend(items)

    def append(self, item: ScriptItem) -> None:
        """Append one reply."""
        self.extend((item,))

    def extend(self, items: Iterable[ScriptItem]) -> None:
        """Append replies; every item is validated before any is added."""
        entries = [coerce_entry(item) for item in items]
        with self._lock:
            self._entries.extend(entries)

    def take(self) -> tuple[int, ScriptEntry] | None:
        """Hand out the next reply with its index, or ``None`` when the script has run out."""
        with self._lock:
            if self._used >= len(self._entries):
                return None
            index = self._used
            self._used += 1
            return index, self._entries[index]

    def skip_remaining(self) -> int:
        """Mark every reply not yet handed out as used (a turn that was stopped early left
        them); returns how many were skipped. Entries stay, so indexes keep their meaning."""
        with self._lock:
            skipped = len(self._entries) - self._used
            self._used = len(self._entries)
            return skipped

    @property
    def used(self) -> int:
        """How many replies have been handed out."""
        with self._lock:
            return self._used

    @property
    def remaining(self) -> int:
        """How many replies are left."""
        with self._lock:
            return len(self._entries) - self._used

    def entries(self) -> list[ScriptEntry]:
        """A copy of all entries, used or not."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __getitem__(self, index: int) -> ScriptEntry:
        with self._lock:
            return self._entries[index]

    def __iter__(self) -> Iterator[ScriptEntry]:
        return iter(self.entries())

    def __repr__(self) -> str:
        with self._lock:
            return f"Script({len(self._entries)} replies, {self._used} used)"
