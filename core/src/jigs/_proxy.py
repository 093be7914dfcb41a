"""A per-step credential proxy: the model key stays in the worker, the agent gets a placeholder.

A :class:`CredentialProxy` listens on ``127.0.0.1`` (a fresh port) under a random step token.
The CLI is given :attr:`CredentialProxy.base_url` (``http://127.0.0.1:<port>/<token>``) as its
API base URL and :attr:`CredentialProxy.placeholder_key` as its key. Every request whose path
starts with the token is forwarded to ``upstream`` + the rest of the path (and query), with the
client's auth headers removed and the real key set, and the response is streamed back chunk by
chunk as the upstream sends it (SSE passes through unbuffered; request bodies stream too).

Guarantees:

- the key is only in this process's memory: it is never logged, never in ``repr``, never sent
  anywhere but to ``upstream``, and the client's own auth headers never reach the upstream;
- a request with a wrong token, a path that is not under the token, a method and path that are
  not one of ``model_calls`` (jigs' model-only policy), one the ``admit`` gate refuses (the
  step's budget is spent), or one that arrives on a connection after the proxy closed gets an
  error status (401, 403 or 400) and a ``jigs.proxy.refused`` log event, which names neither
  the token tried nor the query; nothing of it reaches the upstream;
- the real key and the step token never come back to the client: every response header and
  body the proxy relays has them masked by value (:class:`~jigs._redact.StreamRedactor`, a
  secret that straddles two chunks of a streamed body included), upstream bodies are asked for
  uncompressed (``accept-encoding: identity``) so they can be checked, and an encoded one is
  refused with 502;
- after :meth:`CredentialProxy.aclose` returns (or the ``async with`` block ends) the port is
  closed (a new connection is refused) and every open connection, in-flight responses
  included, is cut: the step is over;
- upstream failures never raise: the client gets 502 (unreachable) or 504 (timed out) before a
  response started, or a cut connection after; the request is still recorded.

Each forwarded request is recorded as a :class:`ProxiedRequest` (status, timings, sizes, and the
token ``usage`` the upstream reported) in :attr:`CredentialProxy.requests` and handed to the
``on_request`` callback when it ends.

The upstream side is an httpcore connection pool (:mod:`jigs._upstream`), with the host's
``HTTPS_PROXY`` / ``NO_PROXY`` and ``SSL_CERT_FILE`` applied as httpx's ``trust_env`` does. The
loopback side is h11 on an anyio listener. The port is bound when the proxy reports started; the
upstream pool (importing httpcore, and the TLS context for an ``https`` upstream) is built 50 ms
later or at the first request, whichever comes first, on the proxy's own loop, so it overlaps
the CLI's start-up instead of delaying it. A request that arrives first waits for it; if it
cannot be built (an unreadable ``SSL_CERT_FILE``, an unusable proxy URL), every request gets 502
naming the error and ``jigs.proxy.client_failed`` is logged.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self, TypeAlias, cast
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from jigs._hosts import INVALID_HOST, host_bytes, valid_host
from jigs._logging import logger
from jigs._redact import StreamRedactor, redact_bytes
from jigs._usage import Usage
from jigs._usage_tap import UsageTap
from jigs.errors import CredentialProxyError

if TYPE_CHECKING:
    import h11
    import httpcore

__all__ = [
    "AuthScheme",
    "CredentialProxy",
    "Outcome",
    "ProxiedRequest",
    "loopback_socket",
    "parse_model_calls",
]

AuthScheme: TypeAlias = Literal["x-api-key", "bearer"]
"""How the real key is sent upstream: ``x-api-key: KEY`` (Anthropic) or
``authorization: Bearer KEY`` (OpenAI and most others)."""

Outcome: TypeAlias = Literal[
    "ok", "upstream_unreachable", "upstream_timeout", "upstream_cut", "client_gone", "closed"
]

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_CLIENT_AUTH = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}
)
_DROPPED_REQUEST = _HOP_BY_HOP | _CLIENT_AUTH | {"host", "accept-encoding"}
_METHOD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")

_READ_SIZE = 65536
_MAX_HEAD = 256 * 1024
_LINGER = 1.0
"""Seconds a refused connection waits for the client to finish sending before it closes."""
_debug_enabled = functools.partial(logging.getLogger("jigs").isEnabledFor, logging.DEBUG)
_IO_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


class _ClientGone(Exception):
    """The client closed or reset its connection to the proxy."""


class _EncodedBody(Exception):
    """The upstream sent a compressed body although asked for none (it cannot be checked for
    the key, so it is not relayed)."""


@dataclass(frozen=True)
class ProxiedRequest:
    """One request the proxy forwarded (refused requests are only counted and logged).

    ``path`` is the path after the step token, without the query (e.g. ``/v1/messages``).
    ``status`` is the status the client got: the upstream's, 502/504 when the upstream failed
    before answering, 0 when the client went away before any answer. ``usage`` is what the
    upstream reported for a model response (``None`` for anything else); ``model`` is the model
    the response names. ``first_byte_seconds`` is the time from the request head to the first
    body byte sent back (``None`` if none was).
    ``outcome`` says how it ended: ``"ok"``, ``"upstream_unreachable"``,
    ``"upstream_timeout"``, ``"upstream_cut"`` (the upstream broke off mid-response),
    ``"client_gone"`` or ``"closed"`` (cut by :meth:`CredentialProxy.aclose`).
    """

    method: str
    path: str
    status: int
    usage: Usage | None
    model: str | None
    request_bytes: int
    response_bytes: int
    seconds: float
    first_byte_seconds: float | None
    outcome: Outcome


def _error_body(kind: str, message: str) -> bytes:
    """An error both Anthropic and OpenAI clients can read and show."""
    error = {"type": kind, "message": f"jigs credential proxy: {message}", "code": kind}
    return json.dumps({"type": "error", "error": error}).encode()


def _check_upstream(upstream: str) -> str:
    """``upstream`` without a trailing ``/``, or :class:`CredentialProxyError` saying what is
    wrong with it, showing only the URL's scheme and host (it may hold credentials)."""
    if not isinstance(upstream, str):
        raise CredentialProxyError(f"upstream must be a URL string, not {type(upstream).__name__}")
    problem = None
    shown = "(not shown)"
    try:
        parts = urlsplit(upstream)
    except ValueError:  # a malformed IPv6 literal, say
        problem = "it is not a valid URL"
    else:
        if parts.scheme and parts.hostname:  # never the credentials, path or query
            shown = f"{parts.scheme}://{parts.hostname}"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = "it must be an http:// or https:// URL with a host"
        elif parts.username is not None or parts.password is not None:
            problem = "it must not carry credentials (give the key as `key`)"
        elif parts.query or parts.fragment:
            problem = "it must not have a query or fragment"
        elif not valid_host(parts.hostname):
            problem = f"it has {INVALID_HOST}"
        else:
            try:
                parts.port  # noqa: B018 - urllib checks the port when it is read
            except ValueError:
                problem = "its port must be a number from 0 to 65535"
    if problem:
        raise CredentialProxyError(
            f"the credential proxy's upstream {shown} is not usable: {problem}, e.g. "
            "https://api.anthropic.com or https://api.openai.com/v1",
            upstream=shown,
        )
    return upstream.rstrip("/")


def _host_header(netloc: str) -> bytes:
    """The ``Host`` header for an upstream's ``netloc`` (credentials already refused): the host
    as :func:`host_bytes` encodes it, then the port as written (encoded apart: a port is no
    label of the host name)."""
    if netloc.startswith("["):  # an IPv6 literal: the port follows the bracket
        host, _, port = netloc.partition("]")
        return host_bytes(host + "]") + port.encode("ascii")
    host, colon, port = netloc.partition(":")
    return host_bytes(host) + (colon + port).encode("ascii")


def _check_key(key: str, upstream: str) -> bytes:
    if not isinstance(key, str) or not key.strip():
        raise CredentialProxyError(
            f"the credential proxy for {upstream} got an empty key: pass the real API key "
            "(read from the worker's environment)",
            upstream=upstream,
        )
    if not key.isprintable() or key != key.strip():
        raise CredentialProxyError(
            f"the credential proxy for {upstream} got a key with whitespace or control "
            "characters: strip the value read from the environment or file",
            upstream=upstream,
        )
    try:
        return key.encode("ascii")
    except UnicodeEncodeError:
        raise CredentialProxyError(
            f"the credential proxy for {upstream} got a non-ASCII key: API keys are ASCII; "
            "check where the value comes from",
            upstream=upstream,
        ) from None


def _unsafe_path(path: str) -> bool:
    """Dot segments (``..``, also as ``..;params``) or encoded slashes/dots could step out of the
    upstream's base path; a fragment (``#``) has no business in a request."""
    lowered = path.lower()
    if "%2e" in lowered or "%2f" in lowered or "%5c" in lowered or "\\" in path or "#" in path:
        return True
    return any(segment.split(";", 1)[0] in (".", "..") for segment in path.split("/"))


def parse_model_calls(calls: Sequence[str], where: str) -> frozenset[tuple[str, str]]:
    """``["POST /v1/messages", ...]`` as ``{("POST", "/v1/messages"), ...}``, or
    :class:`CredentialProxyError` naming ``where`` and the entry's problem.

    An entry is an upper-case method, one space and an exact path (relative to the upstream's
    base path): no query, no trailing slash, no dot segment or encoded separator. A request
    matches when its method and its path (the query left aside) are equal to an entry's.
    """
    if isinstance(calls, str) or not isinstance(calls, Sequence):
        raise CredentialProxyError(
            f"{where} must be a list of 'METHOD /path' entries, e.g. ['POST /v1/messages']"
        )
    parsed: set[tuple[str, str]] = set()
    for entry in calls:
        method, _, path = entry.partition(" ") if isinstance(entry, str) else ("", "", "")
        problem = None
        if not method or not set(method) <= _METHOD_CHARS:
            problem = "it must start with an upper-case HTTP method"
        elif not path.startswith("/") or " " in path or "?" in path:
            problem = "its path must start with '/' and have no query"
        elif _unsafe_path(path) or "//" in path or (path != "/" and path.endswith("/")):
            problem = "its path must be exact: no dot segment, encoded separator, or '//'/'/' end"
        if problem:
            shown = repr(entry)[:80] if isinstance(entry, str) else type(entry).__name__
            raise CredentialProxyError(
                f"{where} has the entry {shown}: {problem}; write e.g. 'POST /v1/messages'"
            )
        parsed.add((method, path))
    return frozenset(parsed)


class CredentialProxy:
    """A loopback reverse proxy for one step that adds the real API key to every request.

    ``upstream`` is the real API base URL the CLI would otherwise use (``https://api.anthropic.com``,
    ``https://api.openai.com/v1``, a descriptor's ``base_url``); a request for
    ``base_url + "/v1/messages"`` goes to ``upstream + "/v1/messages"``. ``key`` is the real
    key, sent as ``scheme`` says. ``model_calls``, if given, are the only requests forwarded
    (``"POST /v1/messages"``: method and exact path after the token; see
    :func:`parse_model_calls`); any other gets 403 and never reaches the upstream. ``admit``, if
    given, is asked before each of them is forwarded and returns why not (the request then gets
    403 with that message) or ``None``. ``on_request`` is called with each :class:`ProxiedRequest`
    when it ends (an exception it raises is logged and ignored). ``connect_timeout`` bounds
    connecting to the upstream; ``read_timeout`` bounds each wait for upstream bytes (a model may
    think for minutes between events).
    ``trust_env`` applies the host's proxy and CA settings (see :mod:`jigs._upstream`).
    ``sock``, if given, is a bound, listening loopback socket (:func:`loopback_socket`) to serve
    on: the port, and so :attr:`base_url`, is known before :meth:`serve` runs (the CLI may
    connect before it does; its connection waits in the backlog). The proxy owns it: it is
    closed when the proxy stops, or by :meth:`aclose` if the proxy never served.

    Run it either as ``async with CredentialProxy(...) as proxy:`` or inside an existing task
    group: ``await group.start(proxy.serve)`` then ``await proxy.aclose()`` (cancelling the
    group also stops it). A proxy serves once. Raises :class:`~jigs.errors.CredentialProxyError`
    for bad arguments, and :class:`OSError` if it cannot bind a loopback port.
    """

    def __init__(
        self,
        upstream: str,
        key: str,
        *,
        scheme: AuthScheme = "x-api-key",
        model_calls: Sequence[str] | None = None,
        admit: Callable[[], str | None] | None = None,
        on_request: Callable[[ProxiedRequest], object] | None = None,
        connect_timeout: float = 30.0,
        read_timeout: float = 600.0,
        trust_env: bool = True,
        sock: socket.socket | None = None,
    ) -> None:
        self._upstream = _check_upstream(upstream)
        parts = urlsplit(self._upstream)
        #: (scheme, host, port, base path) of the upstream, as httpcore takes them: the target
        #: is then sent exactly as built (a URL string would be re-parsed, and ``;params`` or an
        #: empty ``?`` dropped)
        self._origin = (
            parts.scheme.encode("ascii"),
            host_bytes(parts.hostname or ""),
            parts.port,
            parts.path.rstrip("/"),
        )
        self._host = _host_header(parts.netloc)
        key_bytes = _check_key(key, self._upstream)
        if scheme == "x-api-key":
            self._auth = (b"x-api-key", key_bytes)
        elif scheme == "bearer":
            self._auth = (b"authorization", b"Bearer " + key_bytes)
        else:
            raise CredentialProxyError(
                f"unknown auth scheme {scheme!r} for the credential proxy of {self._upstream}: "
                "use 'x-api-key' (Anthropic) or 'bearer' (OpenAI and compatible)",
                upstream=self._upstream,
            )
        self._calls = (
            None
            if model_calls is None
            else parse_model_calls(model_calls, f"model_calls of the proxy for {self._upstream}")
        )
        self._admit = admit
        self._on_request = on_request
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._trust_env = trust_env
        # as secrets.token_urlsafe(24) / token_hex(8), without importing secrets (which loads
        # hmac, hashlib and random: milliseconds of a cold step)
        self._token = base64.urlsafe_b64encode(os.urandom(24)).rstrip(b"=").decode("ascii")
        self._token_bytes = self._token.encode("ascii")
        #: masked by value in everything relayed back to the client
        self._secrets = (key_bytes, self._token_bytes)
        self.placeholder_key = f"jigs-placeholder-{os.urandom(8).hex()}"
        """The key to give the CLI. The proxy ignores it (it strips every client auth header),
        so it is worthless anywhere, including against this proxy without the token."""
        self._sock = sock
        self._port: int | None = int(sock.getsockname()[1]) if sock is not None else None
        #: Sockets it also serves (one per sandboxed launch, made inside that launch's network
        #: namespace), before it serves; then how to start one more on its loop.
        self._more: list[socket.socket] = []
        self._more_lock = threading.Lock()
        self._serve_more: Callable[[socket.socket], None] | None = None
        self._started = False
        self._closed = False
        # made by serve(), on the loop that serves (the proxy may be built on another thread)
        self._close_requested: anyio.Event
        self._stopped: anyio.Event
        self._client_ready: anyio.Event
        self._records: list[ProxiedRequest] = []
        self._refused = 0
        self._group: anyio.abc.TaskGroup | None = None
        self._client: httpcore.AsyncConnectionPool | None = None
        self._client_error: Exception | None = None

    # -- addresses and logs ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The loopback port. Raises :class:`CredentialProxyError` before the proxy started."""
        if self._port is None:
            raise CredentialProxyError(
                f"the credential proxy for {self._upstream} has not started: use "
                "`async with CredentialProxy(...)` or `await task_group.start(proxy.serve)`",
                upstream=self._upstream,
            )
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/<step token>``: the CLI's API base URL. It is a secret of
        the step (it holds the token): pass it to the CLI, never log it."""
        return f"http://127.0.0.1:{self.port}/{self._token}"

    @property
    def upstream(self) -> str:
        """The upstream base URL, without a trailing slash."""
        return self._upstream

    @property
    def closed(self) -> bool:
        """Whether the proxy has been closed (it refuses every request from then on)."""
        return self._closed

    @property
    def requests(self) -> list[ProxiedRequest]:
        """Every forwarded request that has ended, in the order they ended (a copy)."""
        return list(self._records)

    @property
    def refused(self) -> int:
        """How many requests were refused (wrong token, not a model call, not admitted,
        closed)."""
        return self._refused

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self._port}" if self._port is not None else "not started"
        state = "closed" if self._closed else "open"
        return f"<CredentialProxy {where} -> {self._upstream} ({state})>"

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        try:
            await group.start(self.serve)
        except BaseException as exc:
            await group.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        group, self._group = self._group, None
        await self.aclose()
        if group is not None:
            # The body's own exception propagates as it is, not wrapped in an ExceptionGroup.
            await group.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Stop: refuse every further request, close the port, cut open connections. Returns
        when the port is closed. Idempotent; before :meth:`serve` it is :meth:`discard`."""
        if not self._started:
            self.discard()
            return
        self._closed = True
        self._close_requested.set()
        await self._stopped.wait()

    def discard(self) -> None:
        """Before :meth:`serve`: close ``sock`` (a client connecting is refused) and mark the
        proxy closed, so it never serves. No effect once it has served."""
        if self._started:
            return
        with self._more_lock:
            self._closed = True
            pending, self._more = self._more, []
        for sock in pending:
            sock.close()
        if self._sock is not None:
            self._sock.close()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Bind, report started (for ``task_group.start``), and serve until :meth:`aclose`
        or cancellation. Raises :class:`CredentialProxyError` if called twice."""
        if self._started:
            raise CredentialProxyError(
                f"the credential proxy for {self._upstream} was already started: a proxy "
                "serves one step once; create a new one",
                upstream=self._upstream,
            )
        self._started = True
        self._close_requested = anyio.Event()
        self._stopped = anyio.Event()
        self._client_ready = anyio.Event()
        if self._closed:  # closed before it served: its socket is gone
            self._stopped.set()
            raise CredentialProxyError(
                f"the credential proxy for {self._upstream} was closed before it served; "
                "create a new one",
                upstream=self._upstream,
            )
        try:
            listener = await _loopback_listener(self._sock)
        except BaseException:
            self._closed = True
            self._stopped.set()
            raise
        try:
            self._port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
            async with anyio.create_task_group() as group:
                group.start_soon(self._accept_loop, listener, group)
                self._start_more(group)
                logger.info("jigs.proxy.started", port=self._port, upstream=self._upstream)
                task_status.started()
                # at once: a step's proxy starts serving right after its CLI's launch, so the
                # upstream client's imports run while the CLI starts up (50 ms later, they ran
                # during Codex's thread start and cost a cold step 7-12 ms of wall time)
                group.start_soon(self._build_client_now)
                await self._close_requested.wait()
                group.cancel_scope.cancel()
        finally:
            with self._more_lock:
                self._closed = True
                pending, self._more = self._more, []
            for sock in pending:
                sock.close()
            self._client_ready.set()
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                if self._client is not None:
                    await self._client.aclose()
            self._stopped.set()
            logger.info(
                "jigs.proxy.stopped",
                port=self._port,
                upstream=self._upstream,
                requests=len(self._records),
                refused=self._refused,
            )

    async def _build_client_now(self) -> None:
        """Build the upstream client once the accept loop runs (a request waits for it)."""
        self._build_client()

    def _build_client(self) -> None:
        """The upstream pool (blocks this proxy's loop while httpcore, and h11 for the loopback
        side, load); on failure the error is kept and every request answered 502 with it.
        Never raises."""
        try:
            import hmac  # noqa: F401  (the token check's, with hashlib: loaded here too)

            import h11  # noqa: F401  (loaded here, off the step's critical path)

            from jigs._upstream import open_pool

            client = open_pool(self._upstream, trust_env=self._trust_env)
            self._client = client
        except Exception as exc:
            self._client_error = exc
            logger.error(
                "jigs.proxy.client_failed",
                error=type(exc).__name__,
                upstream=self._upstream,
                port=self._port,
            )
        finally:
            self._client_ready.set()

    def add_socket(self, sock: socket.socket) -> None:
        """Serve ``sock`` too (a listening socket, e.g. made inside a sandbox's network
        namespace), from now until the proxy stops; the proxy owns it. Callable from any thread,
        before or while the proxy serves; after it stopped, the socket is closed at once."""
        with self._more_lock:
            if self._closed:
                sock.close()
                return
            serve = self._serve_more
            if serve is None:
                self._more.append(sock)
                return
        serve(sock)

    def _start_more(self, group: anyio.abc.TaskGroup) -> None:
        """On the serving loop: serve the sockets added so far, and set how later ones start."""
        token = anyio.lowlevel.current_token()

        def serve_here(sock: socket.socket) -> None:
            group.start_soon(self._serve_socket, sock, group)

        def serve(sock: socket.socket) -> None:
            try:
                same_loop = anyio.lowlevel.current_token() == token
            except RuntimeError:  # not on any event loop
                same_loop = False
            try:
                if same_loop:
                    serve_here(sock)
                else:
                    anyio.from_thread.run_sync(serve_here, sock, token=token)
            except RuntimeError:  # the loop ended meanwhile
                sock.close()

        with self._more_lock:
            pending, self._more = self._more, []
            self._serve_more = serve
        for sock in pending:
            serve_here(sock)

    async def _serve_socket(self, sock: socket.socket, group: anyio.abc.TaskGroup) -> None:
        listener = await _loopback_listener(sock)
        try:
            await self._accept_loop(listener, group)
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()

    async def _accept_loop(
        self,
        listener: anyio.abc.Listener[anyio.abc.SocketStream],
        group: anyio.abc.TaskGroup,
    ) -> None:
        from jigs._accept import accept_forever

        def failed(exc: OSError) -> None:
            logger.warning("jigs.proxy.accept_failed", port=self._port, error=str(exc))

        await accept_forever(listener, group, self._serve_connection, failed)

    # -- one client connection ---------------------------------------------------------------

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        import h11

        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        async with stream:
            try:
                while True:
                    event = await _next_event(conn, stream)
                    if not isinstance(event, h11.Request):
                        return
                    if not await self._handle(conn, stream, event):
                        return
                    if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                        return
                    conn.start_next_cycle()
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    with contextlib.suppress(_ClientGone, h11.LocalProtocolError):
                        body = _error_body("invalid_request_error", f"bad HTTP request: {exc}")
                        await _send_plain(conn, stream, exc.error_status_hint, body)
            except _ClientGone:
                return
            except Exception as exc:  # a bug here must cost one connection, not the step's proxy
                logger.error("jigs.proxy.internal_error", error=type(exc).__name__, port=self._port)

    async def _refuse(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        request: h11.Request,
        *,
        status: int,
        reason: str,
        path: str,
        why: str | None = None,
    ) -> bool:
        self._refused += 1
        method = request.method.decode("ascii", "replace")
        shown = path[:200]  # the client's own path, after the token; never the query
        logger.warning(
            "jigs.proxy.refused",
            reason=reason,
            status=status,
            method=method,
            path=shown,
            port=self._port,
        )
        kind = {401: "authentication_error", 403: "permission_error"}.get(
            status, "invalid_request_error"
        )
        messages = {
            "wrong_token": "this address does not belong to a running step",
            "closed": "the step this proxy belonged to has ended",
            "not_a_model_call": f"{method} {shown} is refused by jigs' model-only policy: the "
            "step's proxy forwards model calls only, and nothing was sent upstream",
            "not_admitted": f"{method} {shown} is refused: {why}",
            "unsafe_path": "the path has dot segments or encoded separators",
        }
        body = redact_bytes(_error_body(kind, messages[reason]), self._secrets)
        await _send_plain(conn, stream, status, body)
        # Let the client finish sending, so it reads the answer rather than a reset.
        with contextlib.suppress(*_IO_ERRORS):
            await stream.send_eof()
            with anyio.move_on_after(_LINGER):
                received = 0
                while received < 16 * _READ_SIZE:
                    received += len(await stream.receive(_READ_SIZE))
        return False

    async def _handle(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        request: h11.Request,
    ) -> bool:
        """Answer one request; ``False`` if the connection must close afterwards."""
        target = request.target.decode("latin-1")
        raw_path, has_query, query = target.partition("?")
        if raw_path.startswith("/"):
            token, slash, rest = raw_path[1:].partition("/")
            path = slash + rest
        else:  # absolute-form or authority-form: never ours
            token, path = "", ""
        if self._closed:
            return await self._refuse(conn, stream, request, status=401, reason="closed", path=path)
        import hmac  # here, not at the top: its hashlib costs a cold step ~1.8 ms pre-launch

        if not hmac.compare_digest(token.encode("latin-1"), self._token_bytes):
            return await self._refuse(
                conn, stream, request, status=401, reason="wrong_token", path=path
            )
        if _unsafe_path(path):
            return await self._refuse(
                conn, stream, request, status=400, reason="unsafe_path", path=""
            )
        method = request.method.decode("ascii", "replace")
        if self._calls is not None and (method, path) not in self._calls:
            return await self._refuse(
                conn, stream, request, status=403, reason="not_a_model_call", path=path
            )
        why = self._admit() if self._admit is not None else None
        if why is not None:
            return await self._refuse(
                conn, stream, request, status=403, reason="not_admitted", path=path, why=why
            )
        target = self._origin[3] + path + ("?" + query if has_query else "")
        await self._client_ready.wait()
        client = self._client
        if client is None:
            return await self._no_client(conn, stream, request, path)
        return await self._forward(conn, stream, request, client, target=target, path=path)

    async def _no_client(
        self, conn: h11.Connection, stream: anyio.abc.SocketStream, request: h11.Request, path: str
    ) -> bool:
        """The upstream client could not be built (or the proxy closed first): 502, recorded."""
        import h11

        error = self._client_error
        why = f"{type(error).__name__}: {error}"[:300] if error is not None else "proxy closed"
        body = _error_body(
            "api_error",
            f"the credential proxy cannot reach the upstream {self._upstream}: its HTTP client "
            f"could not be built ({why}); check SSL_CERT_FILE / SSL_CERT_DIR and the proxy "
            "variables (HTTPS_PROXY, ALL_PROXY)",
        )
        with contextlib.suppress(_ClientGone, h11.LocalProtocolError):
            await _send_plain(conn, stream, 502, redact_bytes(body, self._secrets))
        self._record(
            ProxiedRequest(
                method=request.method.decode("ascii", "replace"),
                path=path,
                status=502,
                usage=None,
                model=None,
                request_bytes=0,
                response_bytes=0,
                seconds=0.0,
                first_byte_seconds=None,
                outcome="upstream_unreachable",
            )
        )
        return False

    async def _forward(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        request: h11.Request,
        client: httpcore.AsyncConnectionPool,
        *,
        target: str,
        path: str,
    ) -> bool:
        import h11
        import httpcore

        from jigs._upstream import timeout_errors, timeouts

        timed_out = timeout_errors()
        started = time.perf_counter()
        method = request.method.decode("ascii", "replace")
        connection_tokens = {
            token.strip().lower()
            for name, value in request.headers
            if name == b"connection"
            for token in value.decode("latin-1").split(",")
        }
        headers = [
            (name, value)
            for name, value in request.headers
            if name.decode("latin-1") not in _DROPPED_REQUEST
            and name.decode("latin-1") not in connection_tokens
        ]
        headers.append(self._auth)
        headers.append((b"host", self._host))
        # a compressed body could not be checked for the key on its way back
        headers.append((b"accept-encoding", b"identity"))
        has_body = any(
            (name == b"content-length" and value.strip() != b"0") or name == b"transfer-encoding"
            for name, value in request.headers
        )
        has_length = any(name == b"content-length" for name, _ in request.headers)
        if has_body and not has_length:
            # the client's own framing is hop-by-hop (dropped above): a body of unknown length
            # goes upstream chunked
            headers.append((b"transfer-encoding", b"chunked"))
        elif not has_length and method in ("POST", "PUT", "PATCH"):
            headers.append((b"content-length", b"0"))  # RFC 9110 8.6: some front ends want it
        sizes = [0, 0]  # request bytes, response bytes
        first_byte: float | None = None
        status = 0
        outcome: Outcome = "ok"
        tap: UsageTap | None = None
        keep = True
        request_body: AsyncGenerator[bytes, None] | None = None

        async def body() -> AsyncGenerator[bytes, None]:
            if conn.they_are_waiting_for_100_continue:
                await _send(conn, stream, h11.InformationalResponse(status_code=100, headers=[]))
            while True:
                try:
                    part = await _next_event(conn, stream)
                except h11.RemoteProtocolError as exc:  # the client hung up mid-body
                    raise _ClientGone from exc
                if isinstance(part, h11.Data):
                    sizes[0] += len(part.data)
                    yield bytes(part.data)
                elif isinstance(part, h11.EndOfMessage):
                    return
                else:
                    raise _ClientGone

        try:
            if not has_body:
                end = await _next_event(conn, stream)
                if not isinstance(end, h11.EndOfMessage):
                    raise _ClientGone
            request_body = body() if has_body else None
            scheme, host, port, _ = self._origin
            upstream_request = httpcore.Request(
                method,
                httpcore.URL(scheme=scheme, host=host, port=port, target=target.encode("latin-1")),
                headers=headers,
                content=request_body,
                extensions=timeouts(self._connect_timeout, self._read_timeout),
            )
            try:
                response = await client.handle_async_request(upstream_request)
            except timed_out as exc:
                status, outcome, keep = 504, "upstream_timeout", False
                await self._upstream_failed(conn, stream, status, path, exc)
                return False
            except _ClientGone:
                raise
            except Exception as exc:  # failed, and whatever else the transport raises
                status, outcome, keep = 502, "upstream_unreachable", False
                await self._upstream_failed(conn, stream, status, path, exc)
                return False
            chunks = response.aiter_stream()
            try:
                status = response.status
                head = self._response_head(response)
                if head is None:
                    status, outcome, keep = 502, "upstream_unreachable", False
                    await self._upstream_failed(conn, stream, status, path, _EncodedBody())
                    return False
                head_bytes = conn.send(head) or b""
                # A chunked body is framed here, not by h11: it is the per-event hot path.
                chunked = b"\r\ntransfer-encoding: chunked\r\n" in head_bytes.lower()
                await _write(stream, head_bytes)
                tap = UsageTap(
                    _header(response.headers, b"content-type"),
                    _header(response.headers, b"content-encoding"),
                )
                feed = tap.feed
                redactor = StreamRedactor(self._secrets)

                def seen(chunk: bytes) -> None:
                    sizes[1] += len(chunk)
                    feed(chunk)

                async def write(data: bytes) -> None:
                    nonlocal first_byte
                    data = redactor.feed(data)
                    if not data:  # all held back (a secret's start): an empty chunk would end
                        return
                    if first_byte is None:
                        first_byte = time.perf_counter() - started
                    if chunked:
                        await _write(stream, b"%x\r\n%b\r\n" % (len(data), data))
                    else:
                        await _send(conn, stream, h11.Data(data=data))

                broken = await _relay(chunks, seen, write)
                if broken is not None:
                    outcome, keep = "upstream_cut", False
                    logger.warning(
                        "jigs.proxy.upstream_cut",
                        path=path,
                        status=status,
                        error=type(broken).__name__,
                        port=self._port,
                    )
                    return False  # what the redactor holds is cut off with the rest
                rest = redactor.flush()
                if rest:
                    await (
                        _write(stream, b"%x\r\n%b\r\n" % (len(rest), rest))
                        if chunked
                        else _send(conn, stream, h11.Data(data=rest))
                    )
                await _send(conn, stream, h11.EndOfMessage())
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
                    await _finish(chunks)
        except _ClientGone:
            outcome, keep = "client_gone", False
            return False
        except anyio.get_cancelled_exc_class():
            outcome, keep = "closed", False
            raise
        finally:
            if request_body is not None:
                with anyio.CancelScope(shield=True):
                    await request_body.aclose()
            self._record(
                ProxiedRequest(
                    method=method,
                    path=path,
                    status=status,
                    usage=tap.result() if tap is not None else None,
                    model=tap.model if tap is not None else None,
                    request_bytes=sizes[0],
                    response_bytes=sizes[1],
                    seconds=time.perf_counter() - started,
                    first_byte_seconds=first_byte,
                    outcome=outcome,
                )
            )
        return keep

    def _response_head(self, response: httpcore.Response) -> h11.Response | None:
        """The head to send the client for ``response``: hop-by-hop headers dropped, the key and
        token masked in every value; ``None`` for a compressed body (the key could hide in
        it)."""
        import h11

        encoding = _header(response.headers, b"content-encoding")
        if encoding is not None and encoding.strip().lower() not in ("", "identity"):
            return None
        # RFC 9112 6.3: with a transfer-encoding, a content-length means nothing (and the relay
        # frames the body itself); both are dropped from what the client gets
        dropped = _HOP_BY_HOP
        if any(name.lower() == b"transfer-encoding" for name, _ in response.headers):
            dropped = _HOP_BY_HOP | {"content-length"}
        headers = [
            (name, redact_bytes(value, self._secrets))
            for name, value in response.headers
            if name.decode("latin-1").lower() not in dropped
        ]
        reason = response.extensions.get("reason_phrase", b"")
        return h11.Response(
            status_code=response.status,
            headers=headers,
            reason=redact_bytes(reason, self._secrets) if isinstance(reason, bytes) else b"",
        )

    async def _upstream_failed(
        self,
        conn: h11.Connection,
        stream: anyio.abc.SocketStream,
        status: int,
        path: str,
        exc: Exception,
    ) -> None:
        import h11

        logger.warning(
            "jigs.proxy.upstream_failed",
            path=path,
            status=status,
            error=type(exc).__name__,
            upstream=self._upstream,
            port=self._port,
        )
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            what = "timed out" if status == 504 else f"is unreachable ({type(exc).__name__})"
            if isinstance(exc, _EncodedBody):
                what = "sent a compressed body, which the proxy cannot check for the key"
            body = _error_body("api_error", f"the upstream {self._upstream} {what}")
            with contextlib.suppress(_ClientGone, h11.LocalProtocolError):
                await _send_plain(conn, stream, status, body)

    def _record(self, record: ProxiedRequest) -> None:
        self._records.append(record)
        usage = record.usage
        if _debug_enabled():  # rendering an event stdlib then drops costs ~0.1 ms a request
            logger.debug(
                "jigs.proxy.request",
                method=record.method,
                path=record.path,
                status=record.status,
                outcome=record.outcome,
                seconds=round(record.seconds, 4),
                input_tokens=usage.input_tokens if usage else None,
                output_tokens=usage.output_tokens if usage else None,
                port=self._port,
            )
        if self._on_request is not None:
            try:
                self._on_request(record)
            except Exception as exc:
                logger.warning("jigs.proxy.hook_failed", error=type(exc).__name__, port=self._port)


def loopback_socket() -> socket.socket:
    """A listening, non-blocking socket on ``127.0.0.1`` and a fresh port, bound here rather
    than through ``anyio.create_tcp_listener``, whose address lookup starts an executor thread
    on the proxy's event loop (the first step of a process pays for it). Raises ``OSError``."""
    from jigs.sandbox._netns import listening_socket

    return listening_socket(0)


async def _loopback_listener(sock: socket.socket | None) -> anyio.abc.SocketListener:
    """An anyio listener on ``sock``, or on a fresh :func:`loopback_socket`. Raises ``OSError``
    (the socket is closed then)."""
    sock = sock if sock is not None else loopback_socket()
    try:
        return await anyio.abc.SocketListener.from_socket(sock)
    except BaseException:
        sock.close()
        raise


async def _relay(
    chunks: AsyncIterator[bytes],
    seen: Callable[[bytes], None],
    write: Callable[[bytes], Awaitable[None]],
) -> Exception | None:
    """Copy an upstream body to the client as it arrives; the upstream error that cut it off,
    or ``None`` at its end. Raises what ``write`` raises (:class:`_ClientGone`).

    A reader task takes each chunk the moment it is parsed (``seen`` sees it) and the writer
    sends everything that arrived while it was busy in one write: one write per event when
    events come apart (the SSE first byte is never held back), far fewer than one per event
    when the upstream bursts.
    """
    pending: list[bytes] = []
    wake = [anyio.Event()]
    ended: list[Exception | None] = []

    async def read() -> None:
        try:
            async for chunk in chunks:
                seen(chunk)
                pending.append(chunk)
                wake[0].set()
        except Exception as exc:  # whatever broke reading the upstream body cut it off
            ended.append(exc)
        else:
            ended.append(None)
        wake[0].set()

    gone: _ClientGone | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(read)
        while True:
            await wake[0].wait()
            wake[0] = anyio.Event()
            if pending:
                data = pending[0] if len(pending) == 1 else b"".join(pending)
                pending.clear()
                try:
                    await write(data)
                except _ClientGone as exc:
                    gone = exc
                    group.cancel_scope.cancel()
                    break
            if ended and not pending:
                break
    if gone is not None:
        raise gone
    return ended[0]


async def _finish(chunks: AsyncIterator[bytes]) -> None:
    """Run a left-off httpcore body iterator to its end once its response is closed.

    Leaving it suspended would leave httpcore's nested generators to the garbage collector (trio
    warns about each); with the connection closed the next read fails at once and unwinds them
    all. Bounded, in case bytes were already buffered.
    """
    with anyio.move_on_after(1.0), contextlib.suppress(Exception):
        async for _ in chunks:
            pass


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lower case), decoded; None if absent."""
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _next_event(conn: h11.Connection, stream: anyio.abc.SocketStream) -> h11.Event:
    """The next h11 event; a vanished peer reads as ``ConnectionClosed``."""
    import h11

    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(_READ_SIZE)
            except _IO_ERRORS:
                data = b""
            conn.receive_data(data)
            continue
        if event is h11.PAUSED:
            return h11.ConnectionClosed()
        return cast("h11.Event", event)


async def _write(stream: anyio.abc.SocketStream, data: bytes) -> None:
    try:
        await stream.send(data)
    except _IO_ERRORS as exc:
        raise _ClientGone from exc


async def _send(conn: h11.Connection, stream: anyio.abc.SocketStream, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await _write(stream, data)


async def _send_plain(
    conn: h11.Connection, stream: anyio.abc.SocketStream, status: int, body: bytes
) -> None:
    """A complete JSON response that closes the connection."""
    import h11

    headers = [
        ("content-type", "application/json"),
        ("content-length", str(len(body))),
        ("connection", "close"),
    ]
    await _send(conn, stream, h11.Response(status_code=status, headers=headers))
    await _send(conn, stream, h11.Data(data=body))
    await _send(conn, stream, h11.EndOfMessage())
