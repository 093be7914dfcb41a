"""What the server remembers: the script, the request log, refused proxy attempts and
failures. Thread-safe, so a test thread can read it while the server runs in another."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from .record import RecordedRequest, WireFormat
from .replies import Reply
from .script import Script

__all__ = ["DEFAULT_MODEL", "ServerState"]

DEFAULT_MODEL = "fake-model"


class ServerState:
    """The shared, lock-protected state of one :class:`~jigs_testing.ModelServer`."""

    def __init__(self, script: Script, models: Sequence[str], keep: int | None = None) -> None:
        self.script = script
        self._keep = keep
        self.models = list(models)
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._connects: list[str] = []
        self._proxied: list[str] = []
        self._failures: list[str] = []
        self._forgotten = 0  # requests dropped by clear_log: indexes go on from there

    def record(
        self,
        *,
        method: str,
        path: str,
        query: str,
        wire: WireFormat,
        header_names: tuple[str, ...],
        user_agent: str | None,
        body: Any,
        model: str | None,
        message_count: int,
        stream: bool,
        reply_index: int | None,
        problem: str | None,
        body_size: int,
    ) -> RecordedRequest:
        """Append a request to the log, giving it the next index."""
        with self._lock:
            recorded = RecordedRequest(
                index=self._forgotten + len(self._requests),
                method=method,
                path=path,
                query=query,
                wire=wire,
                header_names=header_names,
                user_agent=user_agent,
                body=body,
                model=model,
                message_count=message_count,
                stream=stream,
                reply_index=reply_index,
                received_at=time.time(),
                problem=problem,
                body_size=body_size,
            )
            self._requests.append(recorded)
            if self._keep is not None and len(self._requests) > self._keep:
                del self._requests[0]  # a long-lived server keeps the newest only
                self._forgotten += 1
            return recorded

    def clear_log(self) -> None:
        """Drop every log entry recorded so far; new requests' indexes go on counting."""
        with self._lock:
            self._forgotten += len(self._requests)
            for log in (self._requests, self._connects, self._proxied, self._failures):
                log.clear()

    @property
    def served(self) -> int:
        """Every request received, forgotten ones included."""
        with self._lock:
            return self._forgotten + len(self._requests)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the request log."""
        with self._lock:
            return list(self._requests)

    def add_connect(self, target: str) -> None:
        """Log a refused ``CONNECT host:port``."""
        with self._lock:
            self._connects.append(target)

    def add_proxied(self, line: str) -> None:
        """Log a refused absolute-URI proxy request (``"GET http://host/path"``)."""
        with self._lock:
            self._proxied.append(line)

    def add_failure(self, message: str) -> None:
        """Log something that went wrong on the server's side."""
        with self._lock:
            self._failures.append(message)

    @property
    def connects(self) -> list[str]:
        """A copy of the refused CONNECT targets."""
        with self._lock:
            return list(self._connects)

    @property
    def proxied(self) -> list[str]:
        """A copy of the refused absolute-URI requests."""
        with self._lock:
            return list(self._proxied)

    @property
    def failures(self) -> list[str]:
        """A copy of the failure messages."""
        with self._lock:
            return list(self._failures)

    def model_ids(self) -> list[str]:
        """Models for ``/v1/models``: the configured ones, then those the script's replies
        name; ``fake-model`` when there are none."""
        named = [
            entry.model
            for entry in self.script.entries()
            if isinstance(entry, Reply) and entry.model
        ]
        ids = [*self.models, *named]
        return ids or [DEFAULT_MODEL]
