"""jigs.sandbox._egress: the step's egress proxy opens exactly what its allowlist names.

Every connection is to 127.0.0.1. A name "resolving" elsewhere comes from an injected resolver
that returns loopback or private addresses only, so nothing ever leaves the machine; names that
would resolve to public addresses are only checked against the allowlist, never connected."""

from __future__ import annotations

import base64
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc
import h11
import httpx
import pytest
from h11_upstream import Exchange, running_upstream
from hypothesis import given
from hypothesis import strategies as st
from jigs.sandbox._egress import EgressProxy, _non_public, parse_allow
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

TOKEN = "tok_0123456789abcdefXYZ"


def listening_socket() -> tuple[socket.socket, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


@dataclass
class Echo:
    port: int = 0
    accepted: int = 0


@asynccontextmanager
async def echo_upstream() -> AsyncIterator[Echo]:
    """The "HTTPS" upstream of a tunnel: a TCP echo that counts its connections."""
    state = Echo()
    multi = await anyio.create_tcp_listener(local_host="127.0.0.1")
    state.port = int(multi.extra(anyio.abc.SocketAttribute.local_port))

    async def serve(stream: anyio.abc.SocketStream) -> None:
        state.accepted += 1
        async with stream:
            try:
                async for chunk in stream:
                    await stream.send(chunk)
            except (anyio.BrokenResourceError, OSError):
                pass

    async with multi, anyio.create_task_group() as group:
        group.start_soon(multi.serve, serve)
        yield state
        group.cancel_scope.cancel()


@asynccontextmanager
async def proxying(allow: list[str], **kwargs: object) -> AsyncIterator[tuple[EgressProxy, int]]:
    kwargs.setdefault("token", None)
    proxy = EgressProxy(allow, **kwargs)  # type: ignore[arg-type]
    sock, port = listening_socket()
    async with anyio.create_task_group() as group:
        group.start_soon(proxy.serve, sock)
        yield proxy, port
        group.cancel_scope.cancel()


def resolving_to(*addresses: str) -> Callable[[str, int], Awaitable[list[str]]]:
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


async def read_head(stream: anyio.abc.ByteReceiveStream) -> tuple[int, bytes, bytes]:
    """(status, head, bytes after the head) of a response."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            data += await stream.receive()
        except anyio.EndOfStream:
            break
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, rest


async def read_all(stream: anyio.abc.ByteReceiveStream) -> bytes:
    data = b""
    while True:
        try:
            data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return data


async def connect_via(
    port: int, target: str, *, auth: str | None = None, extra: bytes = b""
) -> tuple[int, bytes, bytes, anyio.abc.SocketStream]:
    """CONNECT ``target`` through the proxy on ``port``: (status, head, body or tunnel's first
    bytes, stream)."""
    stream = await anyio.connect_tcp("127.0.0.1", port)
    request = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
    if auth is not None:
        request += f"Proxy-Authorization: {auth}\r\n"
    await stream.send(request.encode() + b"\r\n" + extra)
    status, head, rest = await read_head(stream)
    return status, head, rest, stream


def basic(user: str, password: str = "") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def events(logs: list[dict[str, object]], name: str) -> list[dict[str, object]]:
    return [e for e in logs if e["event"] == name]


# -- tunnels ---------------------------------------------------------------------------------


async def test_an_allowed_connect_tunnels_bytes_both_ways_including_early_ones():
    async with echo_upstream() as up, proxying([f"localhost:{up.port}"]) as (proxy, port):
        with anyio.fail_after(10):
            # bytes right behind the CONNECT (a TLS ClientHello, say) must not be lost
            status, _, rest, stream = await connect_via(port, f"localhost:{up.port}", extra=b"hi")
            async with stream:
                assert status == 200
                got = rest
                while len(got) < 2:
                    got += await stream.receive()
                assert got == b"hi"
                await stream.send(b"\x16\x03\x01 binary \x00\xff")
                assert await stream.receive() == b"\x16\x03\x01 binary \x00\xff"
    assert up.accepted == 1
    assert proxy.tunnels == 1
    assert proxy.refused == 0


async def test_a_host_not_listed_gets_403_naming_it_and_no_connection_is_made():
    async with echo_upstream() as up, proxying(["pypi.org"]) as (proxy, port):
        with capture_logs() as logs, anyio.fail_after(10):
            status, head, body, stream = await connect_via(port, f"127.0.0.1:{up.port}")
            body += await read_all(stream)
            await stream.aclose()
    assert status == 403
    assert b"content-type: text/plain" in head.lower()
    text = body.decode()
    assert f"127.0.0.1:{up.port} is not in this step's network allowlist" in text
    assert f'network={{"allow": ["127.0.0.1:{up.port}"]}}' in text
    assert up.accepted == 0
    assert (proxy.refused, proxy.tunnels) == (1, 0)
    assert events(logs, "sandbox.egress.refused") == [
        {
            "event": "sandbox.egress.refused",
            "host": "127.0.0.1",
            "port": up.port,
            "status": 403,
            "reason": "not_allowed",
            "log_level": "warning",
        }
    ]


async def test_a_name_under_a_wildcard_that_resolves_to_loopback_is_refused():
    async def to_localhost(host: str, port: int) -> list[str]:
        # a DNS name pointing at the worker's loopback: the real lookup of "localhost"
        infos = await anyio.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)
        return [str(info[4][0]) for info in infos]

    async with echo_upstream() as up:
        allow = [f"*.example.com:{up.port}"]
        async with proxying(allow, resolve=to_localhost) as (proxy, port):
            with capture_logs() as logs, anyio.fail_after(10):
                status, _, body, stream = await connect_via(port, f"evil.example.com:{up.port}")
                body += await read_all(stream)
                await stream.aclose()
        assert status == 403
        assert "resolves only to loopback, private or other non-public addresses" in body.decode()
        assert up.accepted == 0
        assert proxy.refused == 1
        (refused,) = events(logs, "sandbox.egress.refused")
        assert refused["reason"] == "non_public_address"
        assert refused["host"] == "evil.example.com"

        # listed exactly, the same name may use its loopback address
        exact = [f"evil.example.com:{up.port}"]
        # or with the wildcard, when that IP literal is listed too
        literal = [*allow, f"127.0.0.1:{up.port}"]
        for allowed in (exact, literal):
            async with proxying(allowed, resolve=to_localhost) as (proxy, port):
                with anyio.fail_after(10):
                    status, _, _, stream = await connect_via(port, f"evil.example.com:{up.port}")
                    async with stream:
                        assert status == 200
                        await stream.send(b"in")
                        assert await stream.receive() == b"in"
        assert up.accepted == 2


async def test_a_name_resolving_to_private_addresses_only_is_refused_without_connecting():
    # 10.x and 169.254.169.254 are never connected: they are refused before any attempt
    resolve = resolving_to("10.1.2.3", "169.254.169.254", "::ffff:127.0.0.1")
    async with proxying(["*.example.com"], resolve=resolve) as (proxy, port):
        with anyio.fail_after(10):
            status, _, _, stream = await connect_via(port, "metadata.example.com:443")
            await stream.aclose()
    assert status == 403
    assert proxy.refused == 1


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("10.0.0.1", True),
        ("172.16.5.5", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),
        ("100.64.0.1", True),  # carrier-grade NAT
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("255.255.255.255", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fc00::1", True),
        ("ff02::1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:10.0.0.1", True),
        ("8.8.8.8", False),
        ("151.101.0.223", False),
        ("2a04:4e42::223", False),
        ("::ffff:8.8.8.8", False),
    ],
)
def test_non_public_addresses(address, expected):
    assert _non_public(ipaddress.ip_address(address)) is expected


# -- the allowlist ---------------------------------------------------------------------------


async def test_ip_literals_pass_only_when_listed_as_such():
    async with echo_upstream() as up, proxying([f"127.0.0.1:{up.port}"]) as (proxy, port):
        with anyio.fail_after(10):
            status, _, _, stream = await connect_via(port, f"127.0.0.1:{up.port}")
            async with stream:
                assert status == 200
            # the name of that address, another loopback address, its IPv6 twin: not listed
            for target in (f"localhost:{up.port}", f"127.0.0.2:{up.port}", f"[::1]:{up.port}"):
                status, _, _, stream = await connect_via(port, target)
                await stream.aclose()
                assert status == 403, target
    assert up.accepted == 1
    assert proxy.refused == 3


def test_ip_literal_rules():
    proxy = EgressProxy(["10.0.0.5", "[2001:db8::1]:8443", "2001:db8::2"], token=None)
    assert proxy.allowed("10.0.0.5", 443)
    assert proxy.allowed("10.0.0.5", 80)
    assert not proxy.allowed("10.0.0.5", 22)
    assert not proxy.allowed("10.0.0.6", 443)
    assert proxy.allowed("[2001:db8::1]", 8443)
    assert proxy.allowed("2001:db8:0:0::1", 8443)  # the same address written longer
    assert not proxy.allowed("[2001:db8::1]", 443)
    assert proxy.allowed("[2001:db8::2]", 443)
    assert not proxy.allowed("::ffff:10.0.0.5", 443)  # a different literal: not listed
    assert not proxy.allowed("0x0a000005", 443)  # 10.0.0.5 in disguise
    assert not proxy.allowed("10.0.5", 443)


async def test_a_port_not_opened_by_the_entry_is_refused():
    async with echo_upstream() as up, proxying(["localhost"]) as (proxy, port):
        with anyio.fail_after(10):
            status, _, body, stream = await connect_via(port, f"localhost:{up.port}")
            body += await read_all(stream)
            await stream.aclose()
    assert status == 403
    assert f'network={{"allow": ["localhost:{up.port}"]}}' in body.decode()
    assert up.accepted == 0
    assert proxy.refused == 1


def test_port_rules():
    proxy = EgressProxy(["pypi.org", "git.example.com:8443", "*.github.com:22"], token=None)
    assert proxy.allowed("pypi.org", 443)
    assert proxy.allowed("pypi.org", 80)
    assert not proxy.allowed("pypi.org", 8443)
    assert proxy.allowed("git.example.com", 8443)
    assert not proxy.allowed("git.example.com", 443)
    assert proxy.allowed("api.github.com", 22)
    assert not proxy.allowed("api.github.com", 443)


def test_wildcards_match_subdomains_only():
    proxy = EgressProxy(["*.example.com"], token=None)
    assert proxy.allowed("a.example.com", 443)
    assert proxy.allowed("a.b.example.com", 443)
    assert proxy.allowed("A.Example.COM", 443)
    assert proxy.allowed("a.example.com.", 443)
    assert not proxy.allowed("example.com", 443)
    assert not proxy.allowed("evilexample.com", 443)
    assert not proxy.allowed("a.example.com.evil.net", 443)
    assert not proxy.allowed("a.example.co", 443)


def test_names_are_matched_case_insensitively_and_by_their_idna_form():
    proxy = EgressProxy(["Bücher.Example", "PyPI.org."], token=None)
    assert proxy.rules[0].host == "xn--bcher-kva.example"
    assert proxy.allowed("bücher.example", 443)
    assert proxy.allowed("XN--BCHER-KVA.example", 443)
    assert proxy.allowed("pypi.ORG", 443)
    assert not proxy.allowed("bucher.example", 443)
    assert not proxy.allowed("", 443)
    assert not proxy.allowed("a..b", 443)


LABEL = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
NAME = (
    st.lists(LABEL, min_size=1, max_size=3)
    .map(".".join)
    .filter(lambda name: not name.rpartition(".")[2].isdigit())
)


@given(suffix=NAME, sub=NAME, glued=LABEL, upper=st.booleans())
def test_wildcard_matching_property(suffix, sub, glued, upper):
    suffix = f"{suffix}.test"
    proxy = EgressProxy([f"*.{suffix}"], token=None)
    host = f"{sub}.{suffix}"
    assert proxy.allowed(host.upper() if upper else host, 443)
    assert not proxy.allowed(suffix, 443)
    assert not proxy.allowed(f"{glued}{suffix}", 443)  # no dot: another domain
    assert not proxy.allowed(f"{host}.other", 443)
    exact = EgressProxy([suffix], token=None)
    assert exact.allowed(suffix, 443)
    assert not exact.allowed(host, 443)


@pytest.mark.parametrize(
    "entry",
    [
        "https://pypi.org",
        "pypi.org/simple",
        "user@pypi.org",
        "",
        "  ",
        "*",
        "*.com",
        "a.*.example.com",
        "*example.com",
        "*.10.0.0.1",
        "pypi.org:0",
        "pypi.org:65536",
        "pypi.org:https",
        "pypi .org",
        "[::1",
        "[::1]x",
        "-bad-.example.com",
        "a" * 64 + ".example.com",
        "fe80::1%eth0",
        "10.0.5",
    ],
)
def test_parse_allow_names_the_bad_entry(entry):
    with pytest.raises(ValueError, match="network allow entry") as info:
        parse_allow(["pypi.org", entry])
    assert repr(entry) in str(info.value)


def test_parse_allow_refuses_a_non_string_and_a_bare_string():
    with pytest.raises(ValueError, match="network allow entry 443"):
        parse_allow(["pypi.org", 443])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="a list of host patterns"):
        parse_allow("pypi.org")


def test_parse_allow_forms():
    rules = parse_allow(["PyPI.org", "*.GitHub.com:8443", "10.0.0.5:22", "[::1]", "::2"])
    assert [(r.host, r.wildcard, r.port, r.ip is not None) for r in rules] == [
        ("pypi.org", False, None, False),
        ("github.com", True, 8443, False),
        ("10.0.0.5", False, 22, True),
        ("::1", False, None, True),
        ("::2", False, None, True),
    ]


# -- the proxy token -------------------------------------------------------------------------


async def test_a_missing_or_wrong_token_gets_407_and_the_right_one_passes():
    async with (
        echo_upstream() as up,
        proxying([f"localhost:{up.port}"], token=TOKEN) as (proxy, port),
    ):
        target = f"localhost:{up.port}"
        with capture_logs() as logs, anyio.fail_after(10):
            for auth in (
                None,
                basic("tok_wrong_0123456789ab"),
                basic(TOKEN, "x"),
                basic(TOKEN[:-1]),
                f"Bearer {TOKEN}",
                "Basic !!!not-base64",
            ):
                status, head, _, stream = await connect_via(port, target, auth=auth)
                await stream.aclose()
                assert status == 407, auth
                assert b'proxy-authenticate: Basic realm="jigs sandbox"' in head
            status, _, _, stream = await connect_via(port, target, auth=basic(TOKEN))
            async with stream:
                assert status == 200
    assert up.accepted == 1
    assert proxy.refused == 6
    assert TOKEN not in repr(logs)
    assert TOKEN not in repr(proxy)
    assert {e["reason"] for e in events(logs, "sandbox.egress.refused")} == {"proxy_token"}


def test_a_token_unfit_for_a_proxy_url_is_refused_without_echoing_it():
    for token in ("short", "has:colon-0123456789", "has space 0123456789", "x" * 300):
        with pytest.raises(ValueError, match="16-256 characters") as info:
            EgressProxy([], token=token)
        assert token not in str(info.value)


# -- absolute-form requests ------------------------------------------------------------------


async def test_absolute_form_requests_are_forwarded_with_proxy_headers_stripped():
    async def answer(ex: Exchange) -> None:
        body = await ex.read_body()
        await ex.head(200, [("content-type", "text/plain"), ("x-upstream", "yes")])
        await ex.send(b"you sent: " + body)
        await ex.end()

    async with running_upstream(answer) as up:
        authority = f"localhost:{up.port}"
        async with proxying([authority], token=TOKEN) as (proxy, port):
            proxy_url = f"http://{TOKEN}@127.0.0.1:{port}"
            with capture_logs() as logs, anyio.fail_after(10):
                async with httpx.AsyncClient(proxy=proxy_url) as client:
                    got = await client.get(f"http://{authority}/simple/pkg/?q=secret-query")
                    posted = await client.post(f"http://{authority}/upload", content=b"x" * 5000)
    assert got.status_code == 200
    assert got.text == "you sent: "
    assert got.headers["x-upstream"] == "yes"
    assert posted.text == "you sent: " + "x" * 5000
    first = up.seen[0]
    assert (first.method, first.target) == ("GET", "/simple/pkg/?q=secret-query")
    assert first.values("host") == [authority]
    assert first.values("connection") == ["close"]
    assert "proxy-authorization" not in first.names()
    assert up.seen[1].target == "/upload"
    assert proxy.forwarded == 2
    assert proxy.refused == 0
    forwarded = events(logs, "sandbox.egress.forwarded")
    assert [(e["host"], e["port"], e["status"]) for e in forwarded] == [
        ("localhost", up.port, 200),
        ("localhost", up.port, 200),
    ]
    assert "secret-query" not in repr(logs)
    assert "/simple" not in repr(logs)
    assert TOKEN not in repr(logs)


async def test_a_forwarded_request_to_a_host_not_listed_is_refused_before_connecting():
    async with running_upstream() as up, proxying(["pypi.org"]) as (proxy, port):
        with anyio.fail_after(10):
            async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}") as client:
                got = await client.get(f"http://localhost:{up.port}/x")
    assert got.status_code == 403
    assert "not in this step's network allowlist" in got.text
    assert up.connections == 0
    assert proxy.refused == 1


async def test_an_upstream_that_refuses_connections_gets_502():
    closed, closed_port = listening_socket()
    closed.close()  # nothing listens there now
    async with proxying([f"127.0.0.1:{closed_port}"]) as (proxy, port):
        with anyio.fail_after(10):
            status, _, _, stream = await connect_via(port, f"127.0.0.1:{closed_port}")
            await stream.aclose()
    assert status == 502
    assert proxy.refused == 0


async def test_a_name_that_does_not_resolve_gets_502():
    async def nowhere(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async with proxying(["pypi.org"], resolve=nowhere) as (_, port):
        with anyio.fail_after(10):
            status, _, body, stream = await connect_via(port, "pypi.org:443")
            body += await read_all(stream)
            await stream.aclose()
    assert status == 502
    assert b"could not resolve pypi.org" in body


# -- malformed and oversized requests, limits ------------------------------------------------


async def test_oversized_headers_get_431_and_malformed_requests_400():
    async with proxying(["pypi.org"]) as (proxy, port):
        with anyio.fail_after(10):
            cases = [
                (b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org\r\nX: " + b"a" * 20000, 431),
                (b"NOT HTTP AT ALL\r\n\r\n", 400),
                (b"GET /local HTTP/1.1\r\nHost: x\r\n\r\n", 400),  # origin-form: not a server
                (b"GET https://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", 400),
                (b"CONNECT pypi.org HTTP/1.1\r\nHost: pypi.org\r\n\r\n", 400),  # no port
            ]
            for request, expected in cases:
                async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                    await stream.send(request)
                    status, _, _ = await read_head(stream)
                    assert status == expected, request[:40]
    assert proxy.refused == 0


async def test_past_the_connection_limit_a_client_gets_503():
    async with (
        echo_upstream() as up,
        proxying([f"localhost:{up.port}"], max_connections=1) as (
            proxy,
            port,
        ),
    ):
        with capture_logs() as logs, anyio.fail_after(10):
            status, _, _, tunnel = await connect_via(port, f"localhost:{up.port}")
            async with tunnel:
                assert status == 200
                async with await anyio.connect_tcp("127.0.0.1", port) as second:
                    status, _, _ = await read_head(second)
                    assert status == 503
                await tunnel.send(b"still")
                assert await tunnel.receive() == b"still"
    assert proxy.refused == 1
    assert [e["reason"] for e in events(logs, "sandbox.egress.refused")] == ["too_many_connections"]


async def test_idle_connections_are_closed():
    async with (
        echo_upstream() as up,
        proxying([f"localhost:{up.port}"], idle_timeout=0.3) as (_, port),
    ):
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as silent:
                start = anyio.current_time()
                assert await read_all(silent) == b""  # never sent a request head
                assert anyio.current_time() - start >= 0.25
            status, _, _, tunnel = await connect_via(port, f"localhost:{up.port}")
            async with tunnel:
                assert status == 200
                await tunnel.send(b"x")
                assert await tunnel.receive() == b"x"
                start = anyio.current_time()
                assert await read_all(tunnel) == b""  # no bytes either way: cut
                assert anyio.current_time() - start >= 0.25


async def test_the_proxy_stops_with_its_task_and_closes_the_socket():
    proxy = EgressProxy(["pypi.org"], token=None)
    sock, port = listening_socket()
    async with anyio.create_task_group() as group:
        group.start_soon(proxy.serve, sock)
        await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    assert sock.fileno() == -1
    with pytest.raises(OSError):
        await anyio.connect_tcp("127.0.0.1", port)


async def h11_exchange(stream, conn, request_events):
    """Send ``request_events`` with the h11 client ``conn``; the response and its body."""
    for event in request_events:
        await stream.send(conn.send(event))
    response, body = None, b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                conn.receive_data(await stream.receive())
            except anyio.EndOfStream:
                conn.receive_data(b"")
            continue
        if isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return response, body
        else:
            raise AssertionError(event)


async def test_one_client_connection_carries_several_forwarded_requests_reframed():
    async def answer(ex: Exchange) -> None:
        await ex.read_body()
        if ex.seen.target == "/until-close":  # a body that ends when the upstream closes
            await ex.raw(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nread to the end")
            await ex.close()
        else:
            await ex.head(201, [("transfer-encoding", "chunked"), ("x-n", "2")])
            await ex.send(b"chunk one, ")
            await ex.send(b"chunk two")
            await ex.end()

    async with running_upstream(answer) as up:
        authority = f"localhost:{up.port}"
        async with proxying([authority]) as (proxy, port):
            with anyio.fail_after(10):
                async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                    conn = h11.Connection(h11.CLIENT)
                    results = []
                    for path in ("/until-close", "/chunked"):
                        head = h11.Request(
                            method="GET",
                            target=f"http://{authority}{path}",
                            headers=[("host", authority)],
                        )
                        results.append(await h11_exchange(stream, conn, [head, h11.EndOfMessage()]))
                        assert (conn.our_state, conn.their_state) == (h11.DONE, h11.DONE)
                        conn.start_next_cycle()  # the proxy kept the client's connection
    (first, first_body), (second, second_body) = results
    assert (first.status_code, first_body) == (200, b"read to the end")
    assert (second.status_code, second_body) == (201, b"chunk one, chunk two")
    assert (b"x-n", b"2") in list(second.headers)
    assert up.connections == 2  # one upstream connection per request
    assert proxy.forwarded == 2


async def test_an_upstream_cut_mid_body_cuts_the_client_and_is_logged():
    async def cut(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head(200, [("content-length", "100")])
        await ex.send(b"only part")
        await ex.close()

    async with running_upstream(cut) as up:
        authority = f"localhost:{up.port}"
        async with proxying([authority]) as (_, port):
            with capture_logs() as logs, anyio.fail_after(10):
                async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                    request = f"GET http://{authority}/x HTTP/1.1\r\nHost: {authority}\r\n\r\n"
                    await stream.send(request.encode())
                    status, head, rest = await read_head(stream)
                    rest += await read_all(stream)
    assert status == 200
    assert b"content-length: 100" in head
    assert rest == b"only part"  # then the connection ended: the client sees a short body
    (cut_event,) = events(logs, "sandbox.egress.cut")
    assert (cut_event["host"], cut_event["port"]) == ("localhost", up.port)


async def test_an_upstream_that_closes_without_answering_gets_502():
    async def hang_up(ex: Exchange) -> None:
        await ex.close()

    async with running_upstream(hang_up) as up:
        authority = f"localhost:{up.port}"
        async with proxying([authority]) as (proxy, port):
            with anyio.fail_after(10):
                async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}") as client:
                    got = await client.get(f"http://{authority}/x")
    assert got.status_code == 502
    assert proxy.forwarded == 0
