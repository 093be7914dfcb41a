"""The refusing proxy: CONNECT and absolute-URI requests are answered 403 and logged."""

from __future__ import annotations

import logging

import anyio
import httpx
import pytest
from jigs_testing import ModelServer

from ._sse import anthropic_body

pytestmark = pytest.mark.anyio


async def _raw_exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    received = b""
    with anyio.fail_after(5):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(data)
            try:
                while True:
                    received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    return received


async def test_connect_is_refused_and_logged(caplog):
    caplog.set_level(logging.INFO, logger="jigs_testing.model_server")
    async with ModelServer() as server:
        request = b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\n"
        answer = await _raw_exchange(server.port, request)
    status_line = answer.split(b"\r\n", 1)[0]
    assert status_line == b"HTTP/1.1 403 Forbidden"
    assert b"connection: close" in answer.lower()
    assert server.connect_attempts == ["api.anthropic.com:443"]
    assert server.requests == [], "proxy attempts are not API requests"
    assert "refused CONNECT api.anthropic.com:443" in caplog.text
    with pytest.raises(AssertionError, match=r"CONNECT api\.anthropic\.com:443"):
        server.assert_no_outside_connections()


async def test_https_client_through_the_proxy_is_refused():
    async with ModelServer() as server, httpx.AsyncClient(proxy=server.proxy_url) as client:
        with pytest.raises(httpx.ProxyError):
            await client.get("https://telemetry.example.com/v1/events")
    assert server.connect_attempts == ["telemetry.example.com:443"]


async def test_absolute_uri_requests_for_other_hosts_are_refused():
    async with ModelServer(["kept"]) as server:
        request = b"GET http://user:pw@example.com/path?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
        answer = await _raw_exchange(server.port, request)
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert server.proxy_requests == ["GET http://example.com/path?q=1"]
    assert server.connect_attempts == []
    assert server.script.used == 0
    with pytest.raises(AssertionError, match=r"example\.com"):
        server.assert_no_outside_connections()


async def test_absolute_uri_for_the_server_itself_is_served():
    async with (
        ModelServer(["through the proxy"]) as server,
        httpx.AsyncClient(proxy=server.proxy_url) as client,
    ):
        response = await client.post(f"{server.url}/v1/messages", json=anthropic_body())
    assert response.status_code == 200
    assert response.json()["content"][0]["text"] == "through the proxy"
    server.assert_no_outside_connections()
