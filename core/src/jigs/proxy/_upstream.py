"""The credential proxy's upstream side: one httpcore connection pool for one upstream origin.

httpcore is the transport httpx is built on; the proxy uses it directly because it needs no
more than httpcore gives (HTTP/1.1, a keep-alive pool, streamed bodies both ways, timeouts,
proxies) and httpx adds ~70 ms of imports to a fresh process (its cookie and auth support loads
``urllib.request``, ``http.client`` and ``email``) that every proxied step would pay.

What httpx's ``trust_env=True`` did is done here, with the same rules:

- **CAs** (an ``https`` upstream only; a plain-HTTP one loads none): ``SSL_CERT_FILE``, else
  ``SSL_CERT_DIR``, else certifi's bundle. One context per process and per setting, as loading
  a bundle costs ~40 ms.
- **The host's proxy**: ``<scheme>_proxy`` then ``all_proxy`` (either case, the lower-case one
  first) unless ``no_proxy`` names the upstream's host (the standard library's rules:
  ``urllib.request.proxy_bypass_environment``, only imported when a proxy variable is set). A
  proxy URL may carry ``user:password@``; it is sent as ``Proxy-Authorization``.

:func:`open_pool` raises ``OSError`` / ``ssl.SSLError`` (an unreadable CA file) or
``ValueError`` (an unusable proxy URL); the proxy answers 502 naming it.

**Pools kept between steps.** A worker's step proxies all run on one event loop
(:mod:`jigs.proxy._endpoint`), and :class:`UpstreamPools` keeps their pools there between steps,
one per upstream and per what the pool is built from (the proxy and CA settings read when the
step began), so a step reuses the connections (and, for ``https``, the TLS sessions) of the steps
before it rather than opening its own. Nothing of a step is in its pool: the key is a header of
each request (:mod:`jigs.proxy._routes`), a connection returns to the pool only after a whole
exchange, and one cut mid-exchange (a step that closed, a client gone) is closed, not kept. A
pool no step has used for ``keepalive_expiry`` is closed (its connections could not be reused
anyway), and every pool is closed with the loop.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import ssl
from collections.abc import Hashable
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import (  # type: ignore[attr-defined]  # in CPython, not in typeshed
    getproxies_environment,
    proxy_bypass_environment,
)

import anyio
import anyio.abc
import certifi
import httpcore

__all__ = [
    "UpstreamPools",
    "environment_proxy",
    "open_pool",
    "ssl_context",
    "timeout_errors",
    "timeouts",
]

_SSL_CONTEXTS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_KEEPALIVE_EXPIRY = 5.0


def ssl_context(trust_env: bool) -> ssl.SSLContext:
    """A verifying client context with the CAs ``trust_env`` chooses (cached per setting)."""
    cafile = capath = None
    if trust_env:
        cafile = os.environ.get("SSL_CERT_FILE") or None
        capath = None if cafile else os.environ.get("SSL_CERT_DIR") or None
    key = (cafile, capath)
    context = _SSL_CONTEXTS.get(key)
    if context is None:
        if cafile is None and capath is None:
            cafile = certifi.where()
        context = _SSL_CONTEXTS[key] = ssl.create_default_context(cafile=cafile, capath=capath)
    return context


def environment_proxy(upstream: str) -> str | None:
    """The proxy URL the host's environment names for ``upstream``, or None (no proxy variable,
    or ``no_proxy`` covers the upstream's host)."""
    if not any(name in os.environ or name.upper() in os.environ for name in _PROXY_VARIABLES):
        return None  # the common case

    proxies = getproxies_environment()
    parts = urlsplit(upstream)
    if proxies.get("no") and proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    found = proxies.get(parts.scheme) or proxies.get("all")
    if not found:
        return None
    return found if "://" in found else f"http://{found}"


def _proxy(url: str, trust_env: bool) -> httpcore.Proxy:
    parts = urlsplit(url)
    # httpcore would only fail at connect
    if parts.scheme in ("socks5", "socks5h") and importlib.util.find_spec("socksio") is None:
        raise ValueError(
            "the host's proxy setting names a socks5:// proxy, which needs the socksio "
            "package: pip install socksio, or use an http:// proxy"
        )
    if parts.scheme not in ("http", "https", "socks5", "socks5h") or not parts.hostname:
        raise ValueError(
            "the host's proxy setting (HTTP_PROXY / HTTPS_PROXY / ALL_PROXY) is not an "
            "http://, https:// or socks5:// URL"
        )
    auth = None
    if parts.username is not None:
        auth = (unquote(parts.username), unquote(parts.password or ""))
    netloc = parts.netloc.rpartition("@")[2]  # without the credentials, sent as a header
    return httpcore.Proxy(
        url=f"{parts.scheme}://{netloc}/",
        auth=auth,
        ssl_context=ssl_context(trust_env) if parts.scheme == "https" else None,
    )


def _pool_settings(
    upstream: str, trust_env: bool
) -> tuple[ssl.SSLContext | None, httpcore.Proxy | None, Hashable]:
    """What a pool for ``upstream`` is built from, and the key that names it (the TLS context
    is cached per setting, so the same object for the same CAs)."""
    proxy_url = environment_proxy(upstream) if trust_env else None
    context = ssl_context(trust_env) if upstream.startswith("https:") else None
    proxy = _proxy(proxy_url, trust_env) if proxy_url else None
    return context, proxy, (upstream, trust_env, proxy_url, context)


def _new_pool(
    context: ssl.SSLContext | None, proxy: httpcore.Proxy | None
) -> httpcore.AsyncConnectionPool:
    return httpcore.AsyncConnectionPool(
        ssl_context=context,
        proxy=proxy,
        max_connections=None,
        max_keepalive_connections=32,
        # as httpx: an idle connection is not reused after 5 s (a NAT or load balancer may have
        # dropped it silently; reusing it would hang until the read timeout)
        keepalive_expiry=_KEEPALIVE_EXPIRY,
    )


def open_pool(upstream: str, *, trust_env: bool) -> httpcore.AsyncConnectionPool:
    """A pool for ``upstream`` (no connection is made yet). See the module for the errors."""
    context, proxy, _ = _pool_settings(upstream, trust_env)
    return _new_pool(context, proxy)


class UpstreamPools:
    """The pools of every proxy served on one event loop, kept between them (see the module).
    Use it on that loop only; ``group`` is the loop's task group (it runs the idle sweep)."""

    def __init__(self, group: anyio.abc.TaskGroup, *, idle: float = _KEEPALIVE_EXPIRY) -> None:
        self._group = group
        self._idle = idle
        self._pools: dict[Hashable, httpcore.AsyncConnectionPool] = {}
        self._users: dict[Hashable, int] = {}
        self._idle_since: dict[Hashable, float] = {}
        self._sweeping = False

    def acquire(
        self, upstream: str, *, trust_env: bool
    ) -> tuple[httpcore.AsyncConnectionPool, Hashable]:
        """The pool for ``upstream`` with the host's settings as they are now, and the lease to
        hand back to :meth:`release`. Raises as :func:`open_pool` does."""
        context, proxy, key = _pool_settings(upstream, trust_env)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _new_pool(context, proxy)
        self._users[key] = self._users.get(key, 0) + 1
        self._idle_since.pop(key, None)
        return pool, key

    def release(self, key: Hashable) -> None:
        """A proxy is done with the pool (none of its requests is in flight any more)."""
        users = self._users[key] = self._users[key] - 1
        if users == 0:
            self._idle_since[key] = anyio.current_time()
            if not self._sweeping:
                self._sweeping = True
                self._group.start_soon(self._sweep)

    async def _sweep(self) -> None:
        """Close each pool that stayed unused for ``idle`` seconds."""
        try:
            while self._idle_since:
                await anyio.sleep(self._idle)
                now = anyio.current_time()
                for key, since in list(self._idle_since.items()):
                    if now - since >= self._idle:
                        del self._idle_since[key], self._users[key]
                        with contextlib.suppress(Exception):  # its connections go either way
                            await self._pools.pop(key).aclose()
        finally:
            self._sweeping = False

    async def aclose(self) -> None:
        """Close every pool (the loop ends)."""
        pools, self._pools = list(self._pools.values()), {}
        self._users.clear()
        self._idle_since.clear()
        with anyio.CancelScope(shield=True):
            for pool in pools:
                await pool.aclose()


def timeouts(connect: float, read: float) -> dict[str, Any]:
    """The request extension that bounds each phase of one request."""
    return {"timeout": {"connect": connect, "read": read, "write": read, "pool": connect}}


def timeout_errors() -> tuple[type[Exception], ...]:
    """What httpcore raises when a phase of a request ran out of time (any other exception
    of the upstream side means it is unreachable or broke off)."""
    return (httpcore.TimeoutException,)
