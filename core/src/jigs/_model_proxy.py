"""The step's model endpoint: a :class:`~jigs._proxy.CredentialProxy` on a thread of its own.

:func:`open_model_endpoint` reads the key a :class:`~jigs.plugin.ModelRoute` names from the
worker's environment, starts the proxy and registers its stop on the step's exit stack, and
returns the :class:`~jigs.plugin.ModelEndpoint` the kind gives its CLI. Each forwarded request is
logged on the step's structlog logger as ``proxy.request`` (method, path after the token, status,
outcome, timings, sizes, model and tokens; never the token or the key).

The proxy runs on its own event loop in a thread (an anyio blocking portal), not in a task group
of the caller's task: a step holds no cancel scope between ``create_agent_runner`` and
``close()``, so the runner can be opened and closed from different tasks or cancel scopes, and the
proxy keeps answering while the caller's loop is busy. Closing stops the proxy (the port is
closed, open connections are cut) and joins the thread; it is bounded by the step's close
timeout like every other cleanup.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio

from jigs.errors import DescriptorError
from jigs.plugin import ModelEndpoint, ModelRoute

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from jigs._proxy import CredentialProxy, ProxiedRequest

__all__ = ["open_model_endpoint"]


class _ProxyThread:
    """The proxy and the portal (event-loop thread) it runs on; stop is idempotent.

    The proxy is built on the portal's loop (its events belong to that loop, whatever backend
    the worker runs)."""

    def __init__(self, factory: Callable[[], CredentialProxy]) -> None:
        self._factory = factory
        self.proxy: CredentialProxy | None = None
        self._cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        from anyio.from_thread import start_blocking_portal

        with self._lock:
            cm = start_blocking_portal()
            self._portal = cm.__enter__()
            self._cm = cm
            self.proxy = self._portal.call(self._factory)
            self._portal.start_task(self.proxy.serve)

    def stop(self) -> None:
        with self._lock:
            portal, cm = self._portal, self._cm
            self._portal = self._cm = None
            if portal is None or cm is None:
                return
            try:
                if self.proxy is not None:
                    portal.call(self.proxy.aclose)
            finally:
                cm.__exit__(None, None, None)

    async def astop(self) -> None:
        # abandonable: the step's bounded close may give up waiting (the thread still finishes)
        await anyio.to_thread.run_sync(self.stop, abandon_on_cancel=True)


def _hook(log: Any) -> Any:
    def on_request(record: ProxiedRequest) -> None:
        usage = record.usage
        log.info(
            "proxy.request",
            method=record.method,
            path=record.path,
            status=record.status,
            outcome=record.outcome,
            seconds=round(record.seconds, 4),
            first_byte_seconds=None
            if record.first_byte_seconds is None
            else round(record.first_byte_seconds, 4),
            request_bytes=record.request_bytes,
            response_bytes=record.response_bytes,
            model=record.model,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
        )

    return on_request


async def open_model_endpoint(
    route: ModelRoute,
    *,
    kind: str,
    stack: AsyncExitStack,
    log: Any,
    host_env: Mapping[str, str] | None = None,
) -> ModelEndpoint:
    """Start the step's proxy for ``route`` and return the endpoint for the CLI.

    The key is read from ``host_env`` (default: the worker's ``os.environ``) by
    ``route.key_env``. Raises :class:`~jigs.errors.DescriptorError` when it is not set,
    :class:`~jigs.errors.CredentialProxyError` for an unusable upstream or key, and ``OSError``
    when no loopback port can be bound. The proxy stops when ``stack`` closes.
    """
    from jigs._proxy import CredentialProxy

    host = os.environ if host_env is None else host_env
    key = host.get(route.key_env)
    if not key:
        raise DescriptorError(
            f"the {kind} descriptor names {route.key_env} for its model key, but it is not set "
            f"in the worker's environment; set it where the service runs",
            kind=kind,
            key="api_key_env",
        )
    from jigs._secrets import remember

    remember([key])  # redacted by value from every error, log line and stderr tail
    runner = _ProxyThread(
        functools.partial(
            CredentialProxy,
            route.upstream,
            key,
            scheme=route.scheme,
            allow_paths=route.allow_paths,
            on_request=_hook(log),
        )
    )
    # registered first: a cancelled or failed start still stops whatever did start
    stack.push_async_callback(runner.astop)
    await anyio.to_thread.run_sync(runner.start)
    proxy = runner.proxy
    assert proxy is not None
    return ModelEndpoint(base_url=proxy.base_url, key=proxy.placeholder_key, route=route)
