"""The credential proxy's upstream side (an httpcore pool) at its edges: request and response
framing, keep-alive, headers, request targets, failures, and the key's secrecy through all of
them. Each test states what the httpx-based upstream side did, or what HTTP requires."""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import h11
import httpx
import pytest
from h11_upstream import Exchange, Handler, Upstream, echo, running_upstream
from jigs.proxy._credential import CredentialProxy
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-REALKEY-0123456789abcdefghijklmnopqrstuvwxyz"
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def _no_host_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loopback upstream is reached directly, whatever the machine's proxy settings."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


# -- a raw loopback client: exact bytes out, every detail of the answer in ------------------


@dataclass
class Reply:
    status: int | None = None
    reason: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    complete: bool = False  # the whole response arrived (not cut)
    informational: list[int] = field(default_factory=list)

    def values(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.headers if key.lower() == name]


class Client:
    """One connection to the proxy, spoken with h11 (which frames exactly what it is given)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    async def send(self, *events: Any) -> None:
        await self.stream.send(b"".join(self.conn.send(event) or b"" for event in events))

    async def _more(self) -> None:
        with anyio.fail_after(5):
            try:
                data = await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                data = b""
        self.conn.receive_data(data)

    async def informational(self) -> int:
        """Wait for a 1xx (e.g. ``100 Continue``) and return its status."""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                await self._more()
                continue
            assert isinstance(event, h11.InformationalResponse), event
            return event.status_code

    async def reply(self) -> Reply:
        reply = Reply()
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError:  # the connection ended mid-response
                return reply
            if event is h11.NEED_DATA:
                await self._more()
            elif isinstance(event, h11.InformationalResponse):
                reply.informational.append(event.status_code)
            elif isinstance(event, h11.Response):
                reply.status, reply.reason = event.status_code, bytes(event.reason)
                reply.headers = [(bytes(k), bytes(v)) for k, v in event.headers.raw_items()]
            elif isinstance(event, h11.Data):
                reply.body += event.data
            elif isinstance(event, h11.EndOfMessage):
                reply.complete = True
                return reply
            else:  # ConnectionClosed
                return reply

    def next_cycle(self) -> None:
        self.conn.start_next_cycle()


@contextlib.asynccontextmanager
async def _client(proxy: CredentialProxy) -> AsyncIterator[Client]:
    async with await anyio.connect_tcp("127.0.0.1", proxy.port) as stream:
        yield Client(stream)


def _target(proxy: CredentialProxy, path: str) -> str:
    return "/" + proxy.base_url.rsplit("/", 1)[1] + path


def _request(
    proxy: CredentialProxy, method: str, path: str, headers: list[tuple[str, str]] | None = None
) -> h11.Request:
    headers = [("host", "client.example"), *(headers or [])]
    return h11.Request(method=method, target=_target(proxy, path), headers=headers)


# -- request bodies --------------------------------------------------------------------------


async def _ask(handler: Handler, method: str, path: str) -> tuple[Upstream, CredentialProxy, Reply]:
    """One body-less request through a proxy to an upstream answering with ``handler``; returns
    once the proxy has recorded it and closed."""
    async with (
        running_upstream(handler) as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, method, path), h11.EndOfMessage())
        reply = await client.reply()
        await _recorded(proxy)
    return upstream, proxy, reply


async def _recorded(proxy: CredentialProxy) -> None:
    """Wait for the proxy's first record: a request is recorded once the proxy has closed its
    upstream response, which can be just after the client saw the end of the answer."""
    with anyio.fail_after(5):
        while not proxy.requests:
            await anyio.sleep(0.001)


async def test_a_chunked_request_body_of_several_chunks_arrives_whole_and_chunked():
    parts = [b"alpha;", b"b" * 70_000, b";gamma", b";delta"]
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        headers = [("transfer-encoding", "chunked"), ("content-type", "text/plain")]
        await client.send(_request(proxy, "POST", "/v1/upload", headers))
        for part in parts:
            await client.send(h11.Data(data=part))
            await anyio.sleep(0.01)
        await client.send(h11.EndOfMessage())
        reply = await client.reply()
    assert reply.status == 200
    assert reply.complete
    assert reply.body == b"".join(parts)
    [seen] = upstream.seen
    assert seen.values("transfer-encoding") == ["chunked"]
    assert seen.values("content-length") == []
    assert seen.body == b"".join(parts)
    assert proxy.requests[0].request_bytes == len(b"".join(parts))
    assert proxy.requests[0].response_bytes == len(b"".join(parts))


async def test_a_large_body_with_content_length_goes_upstream_unchunked():
    payload = bytes(range(256)) * (5 * 1024 * 1024 // 256)  # 5 MiB
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as client,
    ):
        with anyio.fail_after(10):
            response = await client.post("/v1/files", content=payload)
    assert response.status_code == 200
    assert response.content == payload
    [seen] = upstream.seen
    assert seen.values("content-length") == [str(len(payload))]
    assert seen.values("transfer-encoding") == []
    assert seen.body == payload
    [record] = proxy.requests
    assert (record.request_bytes, record.response_bytes) == (len(payload), len(payload))
    assert record.outcome == "ok"


async def test_an_empty_post_with_content_length_zero_stays_content_length_zero():
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(
            _request(proxy, "POST", "/v1/batches/b1/cancel", [("content-length", "0")]),
            h11.EndOfMessage(),
        )
        reply = await client.reply()
    assert (reply.status, reply.complete, reply.body) == (200, True, b"")
    [seen] = upstream.seen
    assert seen.values("content-length") == ["0"]
    assert seen.values("transfer-encoding") == []
    assert seen.body == b""
    assert proxy.requests[0].request_bytes == 0


async def test_a_post_without_framing_headers_goes_upstream_with_content_length_zero():
    # A bodiless POST with neither Content-Length nor Transfer-Encoding (legal HTTP/1.1: no
    # body). httpx sent it upstream with `Content-Length: 0`, as RFC 9110 section 8.6 asks of
    # a POST; without it some fronts answer 411 Length Required.
    upstream, _proxy, reply = await _ask(echo, "POST", "/v1/batches/b1/cancel")
    assert reply.status == 200
    [seen] = upstream.seen
    assert seen.values("transfer-encoding") == []
    assert seen.values("content-length") == ["0"]


async def test_expect_100_continue_gets_a_continue_and_the_body_goes_through():
    payload = b'{"model": "m", "max_tokens": 1}'
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        headers = [("content-length", str(len(payload))), ("expect", "100-continue")]
        await client.send(_request(proxy, "POST", "/v1/messages", headers))
        assert await client.informational() == 100  # only then is the body sent
        await client.send(h11.Data(data=payload), h11.EndOfMessage())
        reply = await client.reply()
    assert (reply.status, reply.body) == (200, payload)
    assert upstream.seen[0].body == payload


# -- responses -------------------------------------------------------------------------------


async def _by_path(ex: Exchange) -> None:
    await ex.read_body()
    path = ex.seen.target
    if ex.seen.method == "HEAD":
        await ex.head(200, [("content-type", "application/json"), ("content-length", "1234")])
    elif path.endswith("/204"):
        await ex.head(204, [("x-kind", "none")])
    elif path.endswith("/304"):
        await ex.head(304, [("etag", '"v1"'), ("content-length", "1234")])
    elif path.endswith("/sized"):
        await ex.head(200, [("content-type", "application/json"), ("content-length", "13")])
        await ex.send(b'{"ok": true}\n')
    else:
        await ex.head(200, [("content-type", "text/plain")])
        await ex.send(b"plain")
    await ex.end()


async def test_head_204_and_304_have_no_body_and_the_connections_stay_usable():
    async with (
        running_upstream(_by_path) as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        replies = []
        for method, path in [
            ("HEAD", "/v1/models"),
            ("GET", "/v1/204"),
            ("GET", "/v1/304"),
            ("GET", "/v1/after"),
        ]:
            await client.send(_request(proxy, method, path), h11.EndOfMessage())
            replies.append(await client.reply())
            client.next_cycle()
    head, no_content, not_modified, after = replies
    assert (head.status, head.body, head.complete) == (200, b"", True)
    assert head.values(b"content-length") == [b"1234"]  # what a GET would have carried
    assert (no_content.status, no_content.body, no_content.complete) == (204, b"", True)
    assert no_content.values(b"x-kind") == [b"none"]
    assert (not_modified.status, not_modified.body, not_modified.complete) == (304, b"", True)
    assert not_modified.values(b"etag") == [b'"v1"']
    assert (after.status, after.body) == (200, b"plain")
    assert upstream.connections == 1
    assert [r.outcome for r in proxy.requests] == ["ok"] * 4
    assert [r.response_bytes for r in proxy.requests] == [0, 0, 0, 5]


async def test_a_response_with_content_length_is_relayed_with_it_not_chunked():
    _upstream, _proxy, reply = await _ask(_by_path, "GET", "/v1/sized")
    assert (reply.status, reply.body, reply.complete) == (200, b'{"ok": true}\n', True)
    assert reply.values(b"content-length") == [b"13"]
    assert reply.values(b"transfer-encoding") == []


async def test_a_close_delimited_response_is_relayed_whole():
    async def close_delimited(ex: Exchange) -> None:
        await ex.read_body()
        await ex.raw(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of ")
        await anyio.sleep(0.02)
        await ex.raw(b"it, then the close")
        await ex.close()

    _upstream, proxy, reply = await _ask(close_delimited, "GET", "/v1/legacy")
    assert (reply.status, reply.complete) == (200, True)
    assert reply.body == b"all of it, then the close"
    assert [r.outcome for r in proxy.requests] == ["ok"]


async def test_an_http10_client_gets_the_whole_streamed_response_close_delimited():
    events = [b'data: {"type":"message_start"}\n\n', b'data: {"type":"message_stop"}\n\n']

    async def stream(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head()
        for event in events:
            await ex.send(event)
        await ex.end()

    async with (
        running_upstream(stream) as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        await anyio.connect_tcp("127.0.0.1", proxy.port) as raw,
    ):
        await raw.send(f"GET {_target(proxy, '/v1/s')} HTTP/1.0\r\n\r\n".encode())
        data = b""
        with anyio.fail_after(5), contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
            while True:
                data += await raw.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"transfer-encoding" not in head.lower()  # an HTTP/1.0 client cannot read chunks
    assert body == b"".join(events)
    assert [r.outcome for r in proxy.requests] == ["ok"]


async def test_an_informational_103_before_the_answer_does_not_confuse_the_relay():
    async def early_hints(ex: Exchange) -> None:
        await ex.read_body()
        await ex.raw(b"HTTP/1.1 103 Early Hints\r\nlink: </x>; rel=preload\r\n\r\n")
        await ex.raw(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await ex.close()

    _upstream, _proxy, reply = await _ask(early_hints, "GET", "/v1/x")
    assert (reply.status, reply.body, reply.complete) == (200, b"ok", True)


async def test_an_upstream_framing_its_body_twice_is_relayed_by_its_chunks():
    # RFC 9112 section 6.3: with Transfer-Encoding present, Content-Length means nothing and a
    # proxy must remove it (forwarding it made the relayed body contradict its own framing)
    async def both(ex: Exchange) -> None:
        await ex.read_body()
        await ex.raw(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 50\r\n"
            b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        )

    _upstream, proxy, reply = await _ask(both, "GET", "/v1/x")
    assert (reply.status, reply.complete, reply.body) == (200, True, b"hello")
    assert reply.values(b"content-length") == []
    assert proxy.requests[0].outcome == "ok"


async def test_a_client_that_leaves_mid_request_body_does_not_poison_the_upstream_pool():
    async with running_upstream() as upstream, CredentialProxy(upstream.url, KEY) as proxy:
        async with _client(proxy) as client:
            headers = [("content-length", "1000")]
            await client.send(_request(proxy, "POST", "/v1/messages", headers))
            await client.send(h11.Data(data=b"x" * 10))
            with anyio.fail_after(5):
                while not upstream.seen:  # the upstream got the head and started on the body
                    await anyio.sleep(0.01)
        await _recorded(proxy)
        async with httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as http:
            after = await http.post("/v1/messages", content=b"clean")
    assert (after.status_code, after.content) == (200, b"clean")
    assert upstream.seen[-1].body == b"clean"
    assert upstream.connections == 2  # the half-sent request's connection was not reused
    # the client left: recorded as such (not "ok" with status 0)
    assert (proxy.requests[0].status, proxy.requests[0].outcome) == (0, "client_gone"), (
        proxy.requests[0]
    )


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_a_response_the_upstream_cuts_is_cut_for_the_client(framing):
    events = b'data: {"type":"message_start"}\n\ndata: {"type":"ping"}\n\n'

    async def cut(ex: Exchange) -> None:
        await ex.read_body()
        headers = [("content-type", "text/event-stream")]
        if framing == "content-length":
            headers.append(("content-length", "100000"))
        await ex.head(200, headers)
        await ex.send(events)
        await anyio.sleep(0.05)
        await ex.close()

    _upstream, proxy, reply = await _ask(cut, "GET", "/v1/stream")
    assert reply.status == 200
    assert reply.body == events
    assert not reply.complete, "a cut stream must not look complete to the client"
    [record] = proxy.requests
    assert (record.status, record.outcome, record.response_bytes) == (
        200,
        "upstream_cut",
        len(events),
    )


async def test_an_upstream_that_closes_without_answering_is_502():
    async def hang_up(ex: Exchange) -> None:
        await ex.read_body()
        await ex.close()

    async with (
        running_upstream(hang_up) as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as client,
    ):
        response = await client.post("/v1/messages", content=b"{}")
    assert response.status_code == 502
    assert "unreachable" in response.json()["error"]["message"]
    assert [(r.status, r.outcome) for r in proxy.requests] == [(502, "upstream_unreachable")]


async def test_an_upstream_slower_than_read_timeout_is_504_before_and_cut_after_the_head():
    async def slow(ex: Exchange) -> None:
        await ex.read_body()
        if ex.seen.target.endswith("/mid"):
            await ex.head()
            await ex.send(b'data: {"type":"message_start"}\n\n')
        await anyio.sleep(3)

    async with (
        running_upstream(slow) as upstream,
        CredentialProxy(upstream.url, KEY, read_timeout=0.2) as proxy,
    ):
        async with httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as http:
            with anyio.fail_after(5):
                before = await http.get("/v1/before")
        async with _client(proxy) as client:
            await client.send(_request(proxy, "GET", "/v1/mid"), h11.EndOfMessage())
            mid = await client.reply()
        with anyio.fail_after(5):
            while len(proxy.requests) < 2:
                await anyio.sleep(0.01)
    assert before.status_code == 504
    assert (mid.status, mid.complete) == (200, False)
    assert [(r.status, r.outcome) for r in proxy.requests] == [
        (504, "upstream_timeout"),
        (200, "upstream_cut"),
    ]


# -- keep-alive to the upstream --------------------------------------------------------------


async def test_sequential_requests_share_one_upstream_connection():
    async with running_upstream() as upstream, CredentialProxy(upstream.url, KEY) as proxy:
        for i in range(3):  # a new client connection each time: the pool is the proxy's
            async with httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as client:
                first = await client.post("/v1/messages", content=b"%d" % i)
                second = await client.post("/v1/messages", content=b"again")
            assert (first.content, second.content) == (b"%d" % i, b"again")
    assert upstream.connections == 1
    assert len(proxy.requests) == 6


async def test_a_request_after_the_upstream_closed_an_idle_connection_succeeds():
    async def answer_then_close(ex: Exchange) -> None:
        await echo(ex)  # a keep-alive response (no `connection: close`) ...
        await anyio.sleep(0.02)
        await ex.close()  # ... then the upstream drops the idle connection

    async with (
        running_upstream(answer_then_close) as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as client,
    ):
        bodies = []
        for i in range(3):
            response = await client.post("/v1/messages", content=b"n%d" % i)
            bodies.append((response.status_code, response.content))
            await anyio.sleep(0.15)
    assert bodies == [(200, b"n0"), (200, b"n1"), (200, b"n2")]
    assert upstream.connections == 3
    assert [r.outcome for r in proxy.requests] == ["ok"] * 3


async def test_an_idle_upstream_connection_is_not_reused_after_the_keepalive_expiry(monkeypatch):
    # httpx's pool (Limits() default) dropped a connection idle for more than 5 s. Without an
    # expiry a connection idle for minutes (an agent running tools between model calls) is
    # reused: if a NAT or load balancer has dropped it silently, the request waits for
    # read_timeout (600 s) and fails; if the server closes it as it is reused, the CLI gets 502.
    from httpcore._async import http11

    real = http11.time.monotonic
    offset = [0.0]
    monkeypatch.setattr(http11, "time", types.SimpleNamespace(monotonic=lambda: real() + offset[0]))
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        httpx.AsyncClient(base_url=proxy.base_url, trust_env=False) as client,
    ):
        first = await client.post("/v1/messages", content=b"one")
        await _recorded(proxy)
        offset[0] = 600.0  # ten minutes of tool calls later
        second = await client.post("/v1/messages", content=b"two")
    assert (first.content, second.content) == (b"one", b"two")
    assert upstream.connections == 2, "a connection idle for 10 minutes was reused"


# -- headers ---------------------------------------------------------------------------------


async def test_the_host_header_is_the_upstreams_host_and_port_once():
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url + "/v1", KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", "/models"), h11.EndOfMessage())
        reply = await client.reply()
    assert reply.status == 200
    assert upstream.seen[0].values("host") == [f"127.0.0.1:{upstream.port}"]


async def test_hop_by_hop_and_client_auth_headers_never_reach_the_upstream():
    headers = [
        ("connection", "keep-alive, x-named-by-connection"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("te", "trailers"),
        ("trailer", "x-checksum"),
        ("upgrade", "websocket"),
        ("proxy-authorization", "Basic Y2xpZW50OnNlY3JldA=="),
        ("authorization", "Bearer placeholder"),
        ("x-api-key", "placeholder"),
        ("x-named-by-connection", "drop me"),
        ("x-kept", "kept"),
        ("transfer-encoding", "chunked"),
    ]
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(
            _request(proxy, "POST", "/v1/messages", headers),
            h11.Data(data=b"{}"),
            h11.EndOfMessage(),
        )
        reply = await client.reply()
    assert (reply.status, reply.body) == (200, b"{}")
    [seen] = upstream.seen
    for name in (
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "authorization",
        "x-named-by-connection",
    ):
        assert name not in seen.names(), name
    assert seen.values("x-api-key") == [KEY]  # the real key, once, instead of the client's
    assert seen.values("transfer-encoding") == ["chunked"]  # the proxy's own framing, once
    assert seen.values("x-kept") == ["kept"]


async def test_duplicate_request_headers_are_forwarded_in_order():
    headers = [("x-foo", "1"), ("x-bar", "b"), ("x-foo", "2"), ("anthropic-beta", "a,b")]
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", "/v1/models", headers), h11.EndOfMessage())
        await client.reply()
    [seen] = upstream.seen
    assert seen.values("x-foo") == ["1", "2"]
    assert seen.values("anthropic-beta") == ["a,b"]
    names = seen.names()
    assert names.index("x-foo") < names.index("x-bar")


async def test_response_headers_keep_their_case_values_order_and_the_reason_phrase():
    sent = [
        ("Content-Type", "application/json"),
        ("X-Request-ID", "req_01ABC"),
        ("Set-Cookie", "a=1; Path=/"),
        ("Retry-After", "7"),
        ("Set-Cookie", "b=2; Path=/"),
        ("anthropic-ratelimit-requests-remaining", "0"),
    ]

    async def limited(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head(429, [*sent, ("Content-Length", "2")], reason=b"Slow Down Please")
        await ex.send(b"{}")
        await ex.end()

    _upstream, proxy, reply = await _ask(limited, "GET", "/v1/messages")
    assert (reply.status, reply.reason, reply.body) == (429, b"Slow Down Please", b"{}")
    relayed = [(k.decode(), v.decode()) for k, v in reply.headers if k.lower() != b"date"]
    assert [h for h in relayed if h[0].lower() != "content-length"] == sent
    assert reply.values(b"content-length") == [b"2"]
    assert proxy.requests[0].status == 429


async def test_a_latin1_response_header_value_passes_through_byte_for_byte():
    async def odd(ex: Exchange) -> None:
        await ex.read_body()
        headers = [(b"content-length", b"0"), (b"x-note", b"caf\xe9")]
        await ex.stream.send(ex.conn.send(h11.Response(status_code=200, headers=headers)))
        await ex.end()

    _upstream, _proxy, reply = await _ask(odd, "GET", "/v1/x")
    assert reply.values(b"x-note") == [b"caf\xe9"]


# -- request targets -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/models?after_id=a%2Fb&q=%E2%9C%93+x&empty=&flag&sig=abc%3D%3D",
        "/v1/models?",  # an empty query (httpx kept the `?`)
        "/v1/files/file_01;v=2",  # `;` in the last segment is part of the path
        "/v1/models/claude:countTokens?alt=sse",
    ],
)
async def test_the_path_and_query_reach_the_upstream_byte_for_byte(path):
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", path), h11.EndOfMessage())
        reply = await client.reply()
    assert reply.status == 200
    assert [s.target for s in upstream.seen] == [path]


@pytest.mark.parametrize("base", ["/prefix/v1", "/prefix/v1/"])
async def test_an_upstream_base_path_prefixes_every_request(base):
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url + base, KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", "/messages?beta=true"), h11.EndOfMessage())
        await client.reply()
        client.next_cycle()
        await client.send(_request(proxy, "GET", "/"), h11.EndOfMessage())
        await client.reply()
    assert [s.target for s in upstream.seen] == ["/prefix/v1/messages?beta=true", "/prefix/v1/"]


@pytest.mark.parametrize("path", ["/v1/messages/..;", "/v1/messages/..;x=1", "/v1/messages/..#"])
async def test_no_dot_segment_reaches_the_upstream_through_params_or_a_fragment(path):
    # `..;params` is `..` to a server that strips path parameters, and a fragment has no place
    # in a request: either could step out of `model_calls` or the upstream's base path
    # (`/api/v1/messages/..` is `/api/v1/` to a server that resolves dot segments). Such a
    # path is refused like a bare `..` and nothing reaches the upstream.
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url + "/api", KEY, model_calls=["GET /v1/messages"]) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", path), h11.EndOfMessage())
        reply = await client.reply()
    assert reply.status == 400
    assert upstream.seen == []


# -- failures that must still be answered ----------------------------------------------------


async def test_an_idn_upstream_host_is_answered_not_dropped():
    # httpx IDNA-encoded the host; an upstream that cannot be reached is a 502 (or 504 if the
    # name lookup times out), never a connection closed without an answer.
    async with (
        CredentialProxy("http://bücher.invalid:9", KEY, connect_timeout=2) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", "/v1/models"), h11.EndOfMessage())
        reply = await client.reply()
    assert reply.status in (502, 504), "the connection was closed without an answer"
    assert [(r.status, r.outcome) for r in proxy.requests] in (
        [(502, "upstream_unreachable")],
        [(504, "upstream_timeout")],
    )


async def test_a_socks_proxy_setting_without_socksio_is_answered_502(monkeypatch):
    # httpx refused to build a client for a SOCKS proxy without `socksio` (ImportError): the
    # proxy answered 502 naming it. httpcore only imports socksio at the first request.
    pytest.importorskip("httpcore")
    with contextlib.suppress(ImportError):
        import socksio  # noqa: F401

        pytest.skip("socksio is installed: the SOCKS proxy is usable")
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:9")
    async with (
        CredentialProxy("http://api.example.invalid/v1", KEY) as proxy,
        _client(proxy) as client,
    ):
        await client.send(_request(proxy, "GET", "/models"), h11.EndOfMessage())
        reply = await client.reply()
    assert reply.status == 502, "the connection was closed without an answer"
    assert [r.status for r in proxy.requests] == [502]


# -- the key ---------------------------------------------------------------------------------


async def test_the_key_reaches_only_the_upstream_whatever_happens(caplog):
    async def varied(ex: Exchange) -> None:
        body = await ex.read_body()
        kind = ex.seen.target.rsplit("/", 1)[1]
        if kind == "hangup":
            await ex.close()
        elif kind == "slow":
            await anyio.sleep(2)
        elif kind == "cut":
            await ex.head()
            await ex.send(b'data: {"type":"message_start"}\n\n')
            await ex.close()
        else:
            await ex.head(200, [("content-type", "application/json")])
            await ex.send(body)
            await ex.end()

    caplog.set_level(logging.DEBUG, logger="jigs")
    replies: list[Reply] = []
    with capture_logs() as logs:
        async with (
            running_upstream(varied) as upstream,
            CredentialProxy(upstream.url, KEY, scheme="bearer", read_timeout=0.3) as proxy,
        ):
            for path, token_ok in [
                ("/v1/ok", True),
                ("/v1/hangup", True),
                ("/v1/slow", True),
                ("/v1/cut", True),
                ("/v1/ok", False),
            ]:
                auth = [("authorization", f"Bearer {proxy.placeholder_key}")]
                request = _request(proxy, "POST", path, [*auth, ("content-length", "2")])
                if not token_ok:
                    request = h11.Request(
                        method="POST", target="/wrong-token" + path, headers=request.headers
                    )
                async with _client(proxy) as client:
                    await client.send(request, h11.Data(data=b"{}"), h11.EndOfMessage())
                    replies.append(await client.reply())
            with anyio.fail_after(5):
                while len(proxy.requests) < 4:
                    await anyio.sleep(0.01)
            records = repr(proxy.requests) + repr(proxy)
    assert [s.values("authorization") for s in upstream.seen] == [[f"Bearer {KEY}"]] * 4
    assert [r.outcome for r in proxy.requests] == [
        "ok",
        "upstream_unreachable",
        "upstream_timeout",
        "upstream_cut",
    ]
    assert [r.status for r in replies] == [200, 502, 504, 200, 401]
    assert KEY not in repr(replies)
    assert KEY not in records
    assert KEY not in repr(logs)
    assert KEY not in caplog.text
