"""The persisted step log: every event of a step as one JSON line in the run's state dir.

``<data dir>/runs/<run>/<kind>/events/<started>-<token>.jsonl``, one file per step, 0600. Each line
is ``{"turn": n, "at": <unix seconds>, ...the event...}``. Every secret value the step handles is
replaced by ``[redacted]`` before the line is written (by value, whatever the field). Writing never
fails a step: an unwritable log is reported once as a structlog warning and then skipped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from jigs.policy._redact import redact

__all__ = ["StepLog", "read_events", "step_logs"]

_DIR = "events"


class StepLog:
    """Append-only JSON lines for one step."""

    def __init__(self, state_dir: Path, secret_values: Sequence[str], log: Any = None) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.path = state_dir / _DIR / f"{stamp}-{os.urandom(4).hex()}.jsonl"
        self._secrets = list(secret_values)
        self._file: IO[str] | None = None
        self._broken = False
        self._log = log

    def write(self, turn: int, event: Any) -> None:
        """Append one event (a record) of turn ``turn``."""
        self.note(turn, event.to_data())

    def note(self, turn: int, data: dict[str, Any]) -> None:
        """Append one line of turn ``turn`` that is not an event (``data`` has its ``type``)."""
        if self._broken:
            return
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self._file = os.fdopen(fd, "w", encoding="utf-8")
            line = json.dumps(
                {"turn": turn, "at": round(time.time(), 3), **data},
                separators=(",", ":"),
                default=str,
            )
            self._file.write(redact(line, self._secrets) + "\n")
            self._file.flush()
        except OSError as exc:
            self._broken = True
            if self._log is not None:
                self._log.warning("step_log.unwritable", path=str(self.path), error=str(exc))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def step_logs(run_dir: Path) -> list[Path]:
    """Every step log of a run (``<data>/runs/<run>``), oldest first."""
    return sorted(run_dir.glob(f"*/{_DIR}/*.jsonl"), key=lambda p: p.name)


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The events of one step log (lines that do not parse are skipped)."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value
