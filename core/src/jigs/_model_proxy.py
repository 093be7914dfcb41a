"""The step's model endpoint: a :class:`~jigs._proxy.CredentialProxy` on a thread of its own.

:func:`prepare_model_endpoint` reads the key a :class:`~jigs.plugin.ModelRoute` names from the
worker's environment, builds the proxy and registers its stop on the step's exit stack, and
returns the :class:`~jigs.plugin.ModelEndpoint` the kind gives its CLI. Each forwarded request is
logged on the step's structlog logger as ``proxy.request`` (method, path after the token, status,
outcome, timings, sizes, model and tokens; never the token or the key).

The proxy runs on its own event loop in a thread (with an anyio blocking portal for its stop),
not in a task group of the caller's task: a step holds no cancel scope between
``create_agent_runner`` and ``close()``, so the runner can be opened and closed from different
tasks or cancel scopes, and the proxy keeps answering while the caller's loop is busy. Its
socket is bound, and its arguments checked, before the CLI is launched; the step starts the
thread right after the launch (:func:`prepare_model_endpoint`), so the thread's start runs while
the CLI starts, and a request that comes before the loop serves waits in the socket's backlog.
Closing stops the proxy (the port is closed, open connections are cut) and joins the thread; it
is bounded by the step's close timeout like every other cleanup.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio

from jigs.errors import DescriptorError
from jigs.plugin import ModelEndpoint, ModelRoute

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from jigs._proxy import CredentialProxy, ProxiedRequest

__all__ = ["prepare_model_endpoint"]


class _ProxyThread:
    """The thread whose event loop serves one proxy; :meth:`stop` is idempotent.

    :meth:`begin` returns at once: the proxy was built (its arguments checked) and its socket
    bound by the caller, so the endpoint is known; the thread's loop starts serving while the
    step goes on (a CLI that connects sooner waits in the socket's backlog). If the thread
    cannot serve, it closes the socket (the CLI's connection is refused at once, nothing hangs)
    and logs ``jigs.proxy.failed``."""

    def __init__(self, proxy: CredentialProxy, log: Any) -> None:
        self.proxy = proxy
        self._log = log
        self._portal: BlockingPortal | None = None
        self._ready = threading.Event()  # set once serving, or once that failed
        self._thread: threading.Thread | None = None
        self._begun = False
        self._lock = threading.Lock()

    def begin(self) -> None:
        """Start the thread (idempotent; not after :meth:`stop`). Never raises: a thread that
        cannot start is logged and the socket closed."""
        with self._lock:
            if self._begun:
                return
            self._begun = True
            thread = threading.Thread(target=self._run, name="jigs-proxy", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to be had
                self._log.error("jigs.proxy.failed", error=type(exc).__name__)
                self.proxy.discard()
                return
            self._thread = thread

    def _run(self) -> None:
        try:
            anyio.run(self._serve)
        except BaseException as exc:  # reported: nothing above a bare thread would see it
            self._log.error("jigs.proxy.failed", error=type(exc).__name__)
        finally:
            self.proxy.discard()  # if it never served: the CLI's connections are refused
            self._ready.set()

    async def _serve(self) -> None:
        from anyio.from_thread import BlockingPortal

        async with BlockingPortal() as portal, anyio.create_task_group() as group:
            await group.start(self.proxy.serve)
            self._portal = portal
            self._ready.set()

    def stop(self) -> None:
        """Stop the proxy (once it serves) and join its thread; a proxy that never began only
        closes its socket."""
        with self._lock:
            self._begun = True  # nothing begins after a stop
            thread, self._thread = self._thread, None
            if thread is None:
                self.proxy.discard()
                return
            self._ready.wait()
            portal, self._portal = self._portal, None
            if portal is not None:
                with contextlib.suppress(RuntimeError):  # the loop already ended
                    portal.call(self.proxy.aclose)
            thread.join()

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


def prepare_model_endpoint(
    route: ModelRoute,
    *,
    kind: str,
    stack: AsyncExitStack,
    log: Any,
    host_env: Mapping[str, str] | None = None,
) -> tuple[ModelEndpoint, Callable[[], None]]:
    """Bind the step's proxy for ``route``; return the endpoint for the CLI and the function
    that starts its thread serving (call it once the CLI is launched: the thread's start then
    runs while the CLI starts, not before it; a request that comes sooner waits in the socket's
    backlog). The function is idempotent and never raises.

    The key is read from ``host_env`` (default: the worker's ``os.environ``) by
    ``route.key_env``. Raises :class:`~jigs.errors.DescriptorError` when it is not set,
    :class:`~jigs.errors.CredentialProxyError` for an unusable upstream or key, and ``OSError``
    when no loopback port can be bound. The proxy stops (or, if it never began, its socket
    closes) when ``stack`` closes.
    """
    from jigs._proxy import CredentialProxy, loopback_socket

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
    sock = loopback_socket()
    try:
        proxy = CredentialProxy(
            route.upstream,
            key,
            scheme=route.scheme,
            allow_paths=route.allow_paths,
            on_request=_hook(log),
            sock=sock,
        )
    except BaseException:
        sock.close()
        raise
    runner = _ProxyThread(proxy, log)
    stack.push_async_callback(runner.astop)
    endpoint = ModelEndpoint(base_url=proxy.base_url, key=proxy.placeholder_key, route=route)
    return endpoint, runner.begin
