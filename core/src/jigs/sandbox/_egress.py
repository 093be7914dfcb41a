"""A step's egress proxy: an HTTP/1.1 forward proxy that opens only the hosts the step allows.

:class:`EgressProxy` serves a listener (an anyio socket listener, or a listening
``socket.socket``) until cancelled. It speaks two forms of HTTP/1.1 proxying:

- ``CONNECT host:port``: a tunnel; the proxy connects and then copies bytes both ways without
  looking at them (TLS goes end to end, nothing is intercepted);
- absolute-form requests (``GET http://host/path``, any method): the request is sent to the host
  on a connection of its own (hop-by-hop and ``Proxy-*`` headers removed) and the response is
  relayed back; the client's connection may carry further requests.

The allowlist (:func:`parse_allow`) holds host names (``pypi.org``: that host only),
``*.example.com`` (every subdomain, not ``example.com`` itself), and IP literals (``10.0.0.5``,
``[2001:db8::1]``), each optionally with ``:port``; an entry without a port allows 80 and 443.
Matching is case-insensitive, internationalised names compare in their IDNA form, one trailing
dot is ignored, and an IP literal in a request passes only if that literal is listed.

The worker resolves names itself and connects to the addresses it got (never re-resolving, so a
second answer cannot differ from the one checked). An address that is not globally routable
(loopback, private, link-local, multicast, unspecified, reserved, shared) is used only when the
host was listed exactly (not through a wildcard) or that IP literal is listed: a DNS name under
an allowed wildcard that points at ``127.0.0.1`` cannot reach the worker's loopback services.
Residual risk: a listed host that really is on a private network is reachable as listed, and a
public address that routes to a private network (a NAT64 prefix, a cloud metadata alias behind a
public name) is not recognised.

Failure modes (each answered with a short plain-text body, then the connection is closed):

- ``407`` when the proxy has a token (the step's proxy URL is ``http://TOKEN@127.0.0.1:PORT``,
  so clients send ``Proxy-Authorization: Basic base64(TOKEN:)``) and the request lacks it or
  has another; compared in constant time;
- ``403`` for a host or port not allowed, or a name that resolves only to non-public addresses
  it may not use: the body names the host and how to allow it (``network={"allow": [...]}`` on
  the step's descriptor), and ``sandbox.egress.refused`` is logged with the host, port and
  reason; ``refused`` counts these (and 407s, and connections turned away);
- ``400`` for a malformed request, an origin-form request (this is a proxy, not a server) or a
  non-``http`` absolute URL, ``431`` for a request head over 16 KiB;
- ``502``/``504`` when the name does not resolve, or no address accepts the connection in time
  (``sandbox.egress.failed``); an upstream that breaks after its response started cuts the
  client's connection;
- ``503`` for a connection past ``max_connections`` (sent before reading anything);
- a connection idle for ``idle_timeout`` seconds (no request head within 30 s or that timeout,
  whichever is less; no byte moving either way through a tunnel; a stalled body) is closed.

Log events never carry a path, a query, a header value or a byte of payload; the token is never
logged or shown in ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeAlias, cast

import anyio
import anyio.abc
import h11

from jigs.engine._logging import logger
from jigs.policy._hosts import host_bytes
from jigs.proxy._accept import accept_forever
from jigs.proxy._http1 import ClientGone, Http1Server, phrase, serve_requests
from jigs.sandbox._relay import as_listener, splice

__all__ = [
    "DEFAULT_PORTS",
    "AllowRule",
    "EgressProxy",
    "Resolve",
    "parse_allow",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolve: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port)`` -> the IP addresses (text) a name resolves to; raises ``OSError``."""

#: The ports an allowlist entry without ``:port`` opens.
DEFAULT_PORTS = frozenset({80, 443})

_MAX_HEAD = 16 * 1024  # a request head past this gets 431
_MAX_RESPONSE_HEAD = 64 * 1024  # upstream response heads (cookies make them larger)
_READ_SIZE = 64 * 1024
_HEAD_TIMEOUT = 30.0
_ADDRESSES_TRIED = 4  # a name's addresses tried in turn, each for connect_timeout

# a DNS label as jigs accepts it (after IDNA and lower-casing); "_" appears in real names
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# a last label that inet_aton would read as a number: such a "name" is an address in disguise
_NUMERIC = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_TOKEN = re.compile(r"[A-Za-z0-9._~-]{16,256}")

# request headers that belong to one hop (RFC 9110 section 7.6.1) or to this proxy
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
        b"expect",  # this proxy answers 100-continue itself
        b"host",  # set from the URL
    }
)
_IO_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)

_HOW = (
    "expected a host name ('pypi.org'), a wildcard for its subdomains ('*.github.com') or an IP "
    "address ('10.0.0.5', '[2001:db8::1]'), each optionally with ':port'"
)


class AllowRule(NamedTuple):
    """One parsed allowlist entry."""

    #: the host, normalised (lower-case IDNA, no trailing dot); for a wildcard the suffix after
    #: ``*.``; for an IP literal its compressed text
    host: str
    wildcard: bool
    #: the one port it opens; ``None`` for :data:`DEFAULT_PORTS`
    port: int | None
    ip: IPAddress | None

    def opens(self, port: int) -> bool:
        return port == self.port if self.port is not None else port in DEFAULT_PORTS


# -- the allowlist ----------------------------------------------------------------------------


def parse_allow(entries: Iterable[str]) -> tuple[AllowRule, ...]:
    """The rules of ``entries`` (see the module docstring for the forms). Raises ``ValueError``
    naming the first bad entry and why: a URL instead of a host, an empty or malformed host, a
    ``*`` other than a leading ``*.`` label, a wildcard over a single label (``*.com``) or an IP
    address, a port outside 1-65535."""
    if isinstance(entries, str | bytes):
        raise ValueError(f"network allow must be a list of host patterns, not {entries!r}")
    return tuple(_parse_entry(entry) for entry in entries)


def _parse_entry(entry: object) -> AllowRule:
    if not isinstance(entry, str):
        raise ValueError(f"network allow entry {entry!r} is not a string; {_HOW}")
    try:
        text = entry.strip()
        if not text or any(c in text for c in "/@?#") or any(c.isspace() for c in text):
            raise ValueError("not a bare host (no scheme, path, user or spaces)")
        wildcard = text.startswith("*.")
        host_text, port = _split(text[2:] if wildcard else text, bare_ipv6=True)
        if "*" in host_text:
            raise ValueError("'*' is allowed only as the whole first label ('*.example.com')")
        host, ip = _normalise(host_text)
        if wildcard and ip is not None:
            raise ValueError("a wildcard cannot cover an IP address")
        if wildcard and "." not in host:
            raise ValueError("a wildcard over a top-level domain opens too much")
    except ValueError as exc:
        raise ValueError(f"network allow entry {entry!r}: {exc}; {_HOW}") from None
    return AllowRule(host, wildcard, port, ip)


def _split(text: str, *, bare_ipv6: bool) -> tuple[str, int | None]:
    """``host[:port]`` -> (host, port or None); an IPv6 literal is bracketed (``[::1]:443``),
    or bare when ``bare_ipv6`` (then without a port). Raises ``ValueError``."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("an unclosed '['")
        host, rest = text[: end + 1], text[end + 1 :]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise ValueError("text after ']' that is not ':port'")
        return host, _port(rest[1:])
    if text.count(":") > 1:
        if not bare_ipv6:
            raise ValueError("an IPv6 address must be in brackets ('[2001:db8::1]:443')")
        return text, None
    host, colon, port = text.partition(":")
    return host, _port(port) if colon else None


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise ValueError(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


def _normalise(text: str) -> tuple[str, IPAddress | None]:
    """The host as rules and requests compare it, and its address if it is an IP literal.
    Raises ``ValueError`` for anything that is neither a valid name nor an address."""
    if "%" in text:
        raise ValueError("an IPv6 zone ('%eth0') is not allowed")
    if text.startswith("[") and text.endswith("]"):
        ip: IPAddress = ipaddress.IPv6Address(text[1:-1])
        return ip.compressed, ip
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        pass
    else:
        return ip.compressed, ip
    name = text[:-1] if text.endswith(".") else text
    try:
        name = host_bytes(name).decode("ascii").lower()
    except UnicodeError:
        name = ""
    labels = name.split(".")
    if not name or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{text!r} is not a valid host name")
    if _NUMERIC.fullmatch(labels[-1]):
        raise ValueError(f"{text!r} looks like a malformed IP address")
    return name, None


def _non_public(ip: IPAddress) -> bool:
    """Whether ``ip`` is one the worker must not reach through a name it did not list."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_unspecified
        or ip.is_reserved
        or not ip.is_global
    )


async def _getaddrinfo(host: str, port: int) -> list[str]:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


# -- one request's target ---------------------------------------------------------------------


class _Target(NamedTuple):
    host: str
    ip: IPAddress | None
    port: int
    #: for an absolute-form request: the Host header and the origin-form target to send
    authority: str = ""
    path: str = ""

    @property
    def suggestion(self) -> str:
        """The allowlist entry that would open this target."""
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        return host if self.port in DEFAULT_PORTS else f"{host}:{self.port}"


def _target(request: h11.Request) -> _Target:
    """Where ``request`` goes. Raises ``ValueError`` saying what is wrong with it."""
    text = request.target.decode("ascii")  # UnicodeDecodeError is a ValueError
    if request.method == b"CONNECT":
        host_text, port = _split(text, bare_ipv6=False)
        if port is None:
            raise ValueError("CONNECT needs host:port")
        host, ip = _normalise(host_text)
        return _Target(host, ip, port)
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() != "http":
        raise ValueError(
            "this is a forward proxy: send an absolute http:// URL, or CONNECT for https"
        )
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    authority, path = (rest, "/") if end < 0 else (rest[:end], rest[end:])
    if "@" in authority:
        raise ValueError("credentials in a proxied URL are not forwarded")
    path = path.partition("#")[0]
    path = path if path.startswith("/") else "/" + path
    host_text, port = _split(authority, bare_ipv6=False)
    host, ip = _normalise(host_text)
    return _Target(host, ip, port or 80, authority, path)


# -- the proxy --------------------------------------------------------------------------------


class _NoUpstream(Exception):
    """The request ends here with ``status`` and ``body``; ``refused`` when policy said no."""

    def __init__(self, status: int, reason: str, body: str, *, refused: bool) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.body = body
        self.refused = refused


class _Drop(ClientGone):
    """The client's connection is closed without a word: a peer vanished or went idle."""


class EgressProxy:
    """The forward proxy of one step (see the module docstring for the contract).

    ``allow`` is the step's allowlist (:func:`parse_allow`; ``ValueError`` if bad); ``token``
    the step's proxy token (16-256 URL-safe characters; ``ValueError`` otherwise) or ``None``
    for none. ``resolve`` replaces the worker's DNS lookup (``anyio.getaddrinfo``)."""

    def __init__(
        self,
        allow: Sequence[str],
        *,
        token: str | None,
        log: Any = logger,
        max_connections: int = 128,
        idle_timeout: float = 300.0,
        connect_timeout: float = 10.0,
        resolve: Resolve | None = None,
    ) -> None:
        self._rules = parse_allow(allow)
        if token is not None and not _TOKEN.fullmatch(token):
            # the token itself is never echoed: it is a credential
            raise ValueError(
                "the egress proxy token must be 16-256 characters from A-Z a-z 0-9 . _ ~ - "
                "(it is the user part of the proxy URL)"
            )
        self._expected = None if token is None else f"{token}:".encode("ascii")
        self._log = log
        self._max_connections = max_connections
        self._idle = idle_timeout
        self._connect_timeout = connect_timeout
        self._resolve: Resolve = resolve if resolve is not None else _getaddrinfo
        self._active = 0
        #: requests and connections refused by policy (403, 407, turned away at the limit)
        self.refused = 0
        #: CONNECT tunnels opened
        self.tunnels = 0
        #: absolute-form requests whose response started
        self.forwarded = 0

    def __repr__(self) -> str:
        hosts = [("*." if r.wildcard else "") + r.host for r in self._rules]
        token = "set" if self._expected is not None else "none"
        return f"EgressProxy(allow={hosts!r}, token={token})"

    @property
    def rules(self) -> tuple[AllowRule, ...]:
        return self._rules

    def allowed(self, host: str, port: int) -> bool:
        """Whether the allowlist opens ``host`` (a name or an IP literal, IPv6 with or without
        brackets) on ``port``; the DNS check happens only when a request connects."""
        try:
            name, ip = _normalise(host)
        except ValueError:
            return False
        return self._match(name, ip, port) is not None

    def _match(self, host: str, ip: IPAddress | None, port: int) -> AllowRule | None:
        """The rule opening the target, an exact one rather than a wildcard."""
        found = None
        for rule in self._rules:
            if not rule.opens(port):
                continue
            if ip is not None:
                if rule.ip == ip:
                    return rule
            elif rule.wildcard:
                if host.endswith("." + rule.host):
                    found = rule
            elif rule.ip is None and rule.host == host:
                return rule
        return found

    def _listed_ip(self, ip: IPAddress, port: int) -> bool:
        return any(rule.ip == ip and rule.opens(port) for rule in self._rules)

    async def serve(
        self, listener: anyio.abc.Listener[anyio.abc.SocketStream] | socket.socket
    ) -> None:
        """Serve ``listener`` until cancelled (or until it is closed by someone else); it is
        closed on return and every open connection cut. Raises ``TypeError`` for a listener
        that is not a socket listener, ``OSError`` if a socket cannot be wrapped."""
        server = await as_listener(listener)

        def failed(exc: OSError) -> None:
            self._log.warning("sandbox.egress.accept_failed", error=str(exc))

        try:
            async with anyio.create_task_group() as group:
                await accept_forever(server, group, self._serve_counted, failed)
        finally:
            with anyio.CancelScope(shield=True):
                await server.aclose()

    async def _serve_counted(self, stream: anyio.abc.SocketStream) -> None:
        if self._active >= self._max_connections:
            self.refused += 1
            self._log.warning("sandbox.egress.refused", reason="too_many_connections", status=503)
            async with stream:
                body = b"jigs sandbox: too many connections through the egress proxy\n"
                head = f"HTTP/1.1 503 Service Unavailable\r\ncontent-length: {len(body)}\r\n"
                head += "content-type: text/plain\r\nconnection: close\r\n\r\n"
                with contextlib.suppress(*_IO_ERRORS):
                    await stream.send(head.encode("ascii") + body)
            return
        self._active += 1
        try:
            await self._serve_connection(stream)
        finally:
            self._active -= 1

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        await serve_requests(
            Http1Server(stream, max_head=_MAX_HEAD, timeout=self._idle),
            self._handle,
            bad_request=_bad_request,
            failed=self._internal_error,
            head_timeout=min(_HEAD_TIMEOUT, self._idle),
        )

    def _internal_error(self, exc: Exception) -> None:
        self._log.error("sandbox.egress.internal_error", error=type(exc).__name__)

    # -- one request ------------------------------------------------------------------------

    async def _handle(self, conn: Http1Server, request: h11.Request) -> bool:
        """Answer one request; whether the connection may carry another."""
        try:
            target = _target(request)
        except ValueError as exc:
            await _reply(conn, 400, f"jigs sandbox: {exc}\n")
            return False
        try:
            if not self._authorized(request):
                raise _NoUpstream(407, "proxy_token", _NO_TOKEN, refused=True)
            rule = self._match(target.host, target.ip, target.port)
            if rule is None:
                raise _NoUpstream(403, "not_allowed", _not_allowed(target), refused=True)
            if request.method == b"CONNECT":
                await self._tunnel(conn, target, rule)
                return False
            return await self._forward(conn, request, target, rule)
        except _NoUpstream as exc:
            fields = {"host": target.host, "port": target.port, "status": exc.status}
            if exc.refused:
                self.refused += 1
                self._log.warning("sandbox.egress.refused", reason=exc.reason, **fields)
            else:
                self._log.warning("sandbox.egress.failed", reason=exc.reason, **fields)
            extra = (
                [("proxy-authenticate", 'Basic realm="jigs sandbox"')] if exc.status == 407 else []
            )
            await _reply(conn, exc.status, exc.body, extra)
            return False

    def _authorized(self, request: h11.Request) -> bool:
        if self._expected is None:
            return True
        value = _header(request.headers, b"proxy-authorization")
        if value is None:
            return False
        scheme, _, encoded = value.strip().partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self._expected)

    async def _open(self, target: _Target, rule: AllowRule) -> anyio.abc.SocketStream:
        """A connection to ``target``. Raises :class:`_NoUpstream`."""
        if target.ip is not None:  # an IP literal passes only when listed as such
            addresses = [target.ip.compressed]
        else:
            addresses = await self._addresses(target, exact=not rule.wildcard)
        failure: OSError = OSError("no address")
        for address in addresses[:_ADDRESSES_TRIED]:
            try:
                # by address, never by name again: what connects is what was checked
                with anyio.fail_after(self._connect_timeout):
                    return await anyio.connect_tcp(address, target.port)
            except OSError as exc:  # TimeoutError included
                failure = exc
        late = isinstance(failure, TimeoutError)
        raise _NoUpstream(
            504 if late else 502,
            f"unreachable ({type(failure).__name__})",
            f"jigs sandbox: could not connect to {target.suggestion}"
            + (" in time\n" if late else "\n"),
            refused=False,
        )

    async def _addresses(self, target: _Target, *, exact: bool) -> list[str]:
        """The addresses ``target``'s name may be connected at. Raises :class:`_NoUpstream`."""
        try:
            with anyio.fail_after(self._connect_timeout):
                found = await self._resolve(target.host, target.port)
        except OSError as exc:
            raise _NoUpstream(
                502,
                f"unresolved ({type(exc).__name__})",
                f"jigs sandbox: could not resolve {target.host}\n",
                refused=False,
            ) from None
        usable: list[str] = []
        for text in found:
            ip = ipaddress.ip_address(text.partition("%")[0])
            usable_here = exact or not _non_public(ip) or self._listed_ip(ip, target.port)
            if usable_here and ip.compressed not in usable:
                usable.append(ip.compressed)
        if usable:
            return usable
        if found:
            raise _NoUpstream(403, "non_public_address", _non_public_body(target), refused=True)
        raise _NoUpstream(
            502, "unresolved", f"jigs sandbox: {target.host} has no address\n", refused=False
        )

    async def _tunnel(self, conn: Http1Server, target: _Target, rule: AllowRule) -> None:
        if not isinstance(await conn.next_event(), h11.EndOfMessage):
            await _reply(conn, 400, "jigs sandbox: a CONNECT request has no body\n")
            return
        upstream = await self._open(target, rule)
        async with upstream:
            established = h11.Response(
                status_code=200, headers=[], reason=b"Connection established"
            )
            await conn.send(established)
            self.tunnels += 1
            self._log.info("sandbox.egress.tunnel", host=target.host, port=target.port)
            early, _ = conn.h11.trailing_data  # bytes the client sent right behind its CONNECT
            error: Exception | None = None
            try:
                if early:
                    await upstream.send(early)
            except _IO_ERRORS as exc:
                error = exc
            else:
                error = await splice(conn.stream, upstream, idle=self._idle)
        if error is not None:
            fields = {"host": target.host, "port": target.port, "error": type(error).__name__}
            self._log.info("sandbox.egress.cut", **fields)

    async def _forward(
        self,
        conn: Http1Server,
        request: h11.Request,
        target: _Target,
        rule: AllowRule,
    ) -> bool:
        """Send an absolute-form request on and its response back; whether the client's
        connection may carry another request."""
        upstream = await self._open(target, rule)
        async with upstream:
            up = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_RESPONSE_HEAD)
            headers = _request_headers(request.headers, target.authority)
            onward = h11.Request(method=request.method, target=target.path, headers=headers)
            try:
                await _up_send(up, upstream, onward, self._idle)
                await self._send_body(conn, up, upstream)
                response = await self._response_head(up, upstream)
            except _UpstreamBroken as exc:
                late = isinstance(exc.__cause__, TimeoutError)
                body = f"jigs sandbox: {target.suggestion} did not answer\n"
                raise _NoUpstream(504 if late else 502, str(exc), body, refused=False) from None
            self.forwarded += 1
            fields = {"host": target.host, "port": target.port, "status": response.status_code}
            self._log.info("sandbox.egress.forwarded", **fields)
            back = h11.Response(
                status_code=response.status_code,
                headers=_response_headers(response.headers),
                reason=response.reason,
            )
            await conn.send(back)
            try:
                await self._copy_body(up, upstream, conn)
            except _UpstreamBroken as exc:  # too late for a status: cut the client off
                self._log.info("sandbox.egress.cut", error=str(exc), **fields)
                raise _Drop from exc
        return True

    async def _send_body(
        self, conn: Http1Server, up: h11.Connection, upstream: anyio.abc.SocketStream
    ) -> None:
        """The client's request body, sent on as it arrives (in full before the response is
        read: an upstream that answers early waits for it)."""
        async for data in conn.body():
            await _up_send(up, upstream, h11.Data(data=data), self._idle)
        await _up_send(up, upstream, h11.EndOfMessage(), self._idle)

    async def _response_head(
        self, up: h11.Connection, upstream: anyio.abc.SocketStream
    ) -> h11.Response:
        while True:
            event = await _up_event(up, upstream, self._idle)
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):  # 1xx are this hop's
                raise _UpstreamBroken("closed before its response")

    async def _copy_body(
        self, up: h11.Connection, upstream: anyio.abc.SocketStream, conn: Http1Server
    ) -> None:
        while True:
            event = await _up_event(up, upstream, self._idle)
            if isinstance(event, h11.Data):
                await conn.send(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                await conn.send(h11.EndOfMessage())
                return
            else:
                raise _UpstreamBroken("closed mid-body")


# -- messages ---------------------------------------------------------------------------------

_NO_TOKEN = (
    "jigs sandbox: the egress proxy needs this step's proxy token; use the proxy URL the step "
    "was given (HTTP_PROXY / HTTPS_PROXY) as it is\n"
)


def _not_allowed(target: _Target) -> str:
    entry = target.suggestion
    return (
        f"jigs sandbox: {entry} is not in this step's network allowlist. To allow it, add it to "
        f'the step\'s descriptor: network={{"allow": ["{entry}"]}}\n'
    )


def _non_public_body(target: _Target) -> str:
    entry = target.suggestion
    return (
        f"jigs sandbox: {target.host} resolves only to loopback, private or other non-public "
        "addresses, which a wildcard pattern does not open. To allow it, list it exactly in the "
        f'step\'s descriptor: network={{"allow": ["{entry}"]}}\n'
    )


# -- HTTP plumbing ----------------------------------------------------------------------------


class _UpstreamBroken(Exception):
    """The upstream failed, timed out or spoke bad HTTP; the message says which."""


_RESPONSE_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
        b"transfer-encoding",  # h11 frames the body for the client itself
    }
)


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    return next((value for key, value in headers if key == name), None)


def _connection_named(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    """The header names a ``Connection`` header declares hop-by-hop."""
    return {
        token.strip().lower()
        for key, value in headers
        if key == b"connection"
        for token in value.split(b",")
    }


def _request_headers(
    headers: Iterable[tuple[bytes, bytes]], authority: str
) -> list[tuple[bytes, bytes]]:
    headers = list(headers)
    named = _connection_named(headers)
    kept = [(k, v) for k, v in headers if k not in _HOP_BY_HOP and k not in named]
    # one request per upstream connection: no pool to keep, nothing to reuse across hosts
    return [(b"host", authority.encode("ascii")), *kept, (b"connection", b"close")]


def _response_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    headers = list(headers)
    named = _connection_named(headers)
    return [(k, v) for k, v in headers if k not in _RESPONSE_HOP_BY_HOP and k not in named]


async def _reply(
    conn: Http1Server, status: int, body: str, extra: Sequence[tuple[str, str]] = ()
) -> None:
    """A complete plain-text response that closes the connection; a client already gone is
    not an error."""
    headers = [("content-type", "text/plain; charset=utf-8"), *extra]
    with contextlib.suppress(ClientGone, h11.LocalProtocolError):
        data = body.encode("utf-8")
        await conn.respond(status, headers, data, reason=phrase(status), timeout=5)


async def _bad_request(conn: Http1Server, exc: h11.RemoteProtocolError) -> None:
    await _reply(conn, exc.error_status_hint, f"jigs sandbox: bad HTTP request: {exc}\n")


async def _up_send(
    up: h11.Connection, upstream: anyio.abc.SocketStream, event: h11.Event, timeout: float
) -> None:
    try:
        data = up.send(event)
        if data:
            with anyio.fail_after(timeout):
                await upstream.send(data)
    except (h11.LocalProtocolError, *_IO_ERRORS) as exc:
        raise _UpstreamBroken(type(exc).__name__) from exc


async def _up_event(
    up: h11.Connection, upstream: anyio.abc.SocketStream, timeout: float
) -> h11.Event:
    """The upstream's next h11 event. Raises :class:`_UpstreamBroken`."""
    try:
        while True:
            event = up.next_event()
            if event is h11.NEED_DATA:
                with anyio.fail_after(timeout):
                    try:
                        data = await upstream.receive(_READ_SIZE)
                    except anyio.EndOfStream:
                        data = b""
                up.receive_data(data)
                continue
            if event is h11.PAUSED:  # never asked for: no CONNECT or Upgrade goes upstream
                raise _UpstreamBroken("paused")
            return cast("h11.Event", event)
    except (h11.RemoteProtocolError, *_IO_ERRORS) as exc:
        raise _UpstreamBroken(type(exc).__name__) from exc
