"""HTTP behaviour: keep-alive, one chunk per event, concurrency, disconnects, odd requests,
the threaded runner, trio, and the pytest fixture."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
import time

import anyio
import httpx
import pytest
from jigs_testing import ModelServer, reply, text

from ._sse import anthropic_body, parse_sse

pytestmark = pytest.mark.anyio


async def _read_response(stream, buffer: bytes) -> tuple[bytes, bytes, bytes]:
    """One response from a raw stream: (head, body, leftover). Handles content-length and
    chunked bodies; the chunked body is returned as its raw chunk framing."""
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive()
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    lowered = head.lower()
    if b"content-length:" in lowered:
        length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(buffer) < length:
            buffer += await stream.receive()
        return head, buffer[:length], buffer[length:]
    while b"\r\n0\r\n\r\n" not in buffer:
        buffer += await stream.receive()
    body, rest = buffer.split(b"\r\n0\r\n\r\n", 1)
    return head, body + b"\r\n0\r\n\r\n", rest


def _chunks(raw: bytes) -> list[bytes]:
    """Decode chunked framing into the list of chunks."""
    chunks = []
    while True:
        size_line, raw = raw.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return chunks
        chunks.append(raw[:size])
        assert raw[size : size + 2] == b"\r\n"
        raw = raw[size + 2 :]


def _post(path: str, body: dict, extra: bytes = b"") -> bytes:
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n".encode()
        + extra
        + b"\r\n"
        + data
    )


async def test_keep_alive_and_one_chunk_per_event():
    async with ModelServer([text("first reply " * 5), "second"]) as server:
        with anyio.fail_after(5):
            async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
                await stream.send(_post("/v1/messages", anthropic_body(stream=True)))
                head, body, rest = await _read_response(stream, b"")
                assert head.startswith(b"HTTP/1.1 200 ")
                assert b"transfer-encoding: chunked" in head.lower()
                chunks = _chunks(body)
                events = parse_sse(b"".join(chunks).decode())
                assert len(chunks) == len(events), "every SSE event is its own write"
                assert all(chunk.endswith(b"\n\n") for chunk in chunks)
                await stream.send(_post("/v1/messages", anthropic_body()))
                head, body, _ = await _read_response(stream, rest)
                assert head.startswith(b"HTTP/1.1 200 ")
                assert json.loads(body)["content"][0]["text"] == "second"


async def test_many_concurrent_streams():
    count = 40
    script = [reply(lambda req, i=i: f"reply {i} to {req.text()}") for i in range(count)]
    async with ModelServer(script) as server:
        results: dict[int, str] = {}
        limits = httpx.Limits(max_connections=count)
        async with httpx.AsyncClient(base_url=server.url, limits=limits) as c:

            async def one(n: int) -> None:
                body = anthropic_body(messages=[{"role": "user", "content": f"q{n}"}], stream=True)
                response = await c.post("/v1/messages", json=body)
                deltas = [
                    e.json()["delta"]["text"]
                    for e in parse_sse(response.text)
                    if e.name == "content_block_delta"
                ]
                results[n] = "".join(deltas)

            with anyio.fail_after(20):
                async with anyio.create_task_group() as group:
                    for n in range(count):
                        group.start_soon(one, n)
    assert len(results) == count
    for n, answer in results.items():
        assert answer.endswith(f" to q{n}")
    used = sorted(r.reply_index for r in server.requests)
    assert used == list(range(count))
    assert server.failures == []


async def test_client_disconnect_mid_stream_is_harmless(caplog):
    caplog.set_level(logging.INFO, logger="jigs_testing.model_server")
    big = "x" * 4_000_000  # far more than the socket buffers hold
    async with ModelServer([text(big), "still alive"]) as server:
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
                await stream.send(_post("/v1/messages", anthropic_body(stream=True)))
                await stream.receive()
            async with httpx.AsyncClient(base_url=server.url) as c:
                after = await c.post("/v1/messages", json=anthropic_body())
                for _ in range(100):
                    if "client gone" in caplog.text:
                        break
                    await anyio.sleep(0.02)
    assert after.json()["content"][0]["text"] == "still alive"
    assert "client gone" in caplog.text
    assert server.failures == []


def _slow_read(port: int, request: bytes) -> bytes:
    """A client with a tiny receive window that sends, dawdles, then reads until EOF."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(20)
        sock.connect(("127.0.0.1", port))
        sock.sendall(request)
        time.sleep(0.5)  # the server fills every buffer and cuts meanwhile
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
        return bytes(received)


async def test_a_cut_delivers_exactly_its_events_to_a_slow_client():
    cut = 40_000  # events, about 8 MB: more than the kernel and transport buffers hold
    async with ModelServer([text("z" * 1_000_000, cut_after=cut)]) as server:
        request = _post("/v1/responses", {"model": "m", "input": "hi", "stream": True})
        received = await anyio.to_thread.run_sync(_slow_read, server.port, request)
    assert received.count(b"data: ") == cut
    assert b"response.completed" not in received
    assert not received.endswith(b"\r\n0\r\n\r\n"), "no terminating chunk after a cut"


async def test_shutdown_with_a_request_in_flight_does_not_hang():
    outcomes: list[str] = []

    async def waiting(url: str) -> None:
        async with httpx.AsyncClient(base_url=url) as c:
            try:
                await c.post("/v1/messages", json=anthropic_body())
            except httpx.RemoteProtocolError:
                outcomes.append("disconnected")

    with anyio.fail_after(5):
        async with (
            anyio.create_task_group() as group,
            ModelServer([text("never sent", delay=30)]) as server,
        ):
            group.start_soon(waiting, server.url)
            while not server.requests:
                await anyio.sleep(0.01)
    assert outcomes == ["disconnected"]


async def test_expect_100_continue():
    async with ModelServer(["continued"]) as server:
        with anyio.fail_after(5):
            async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
                data = json.dumps(anthropic_body()).encode()
                await stream.send(
                    b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                    + f"Content-Length: {len(data)}\r\n\r\n".encode()
                )
                interim = await stream.receive()
                assert interim.startswith(b"HTTP/1.1 100 ")
                await stream.send(data)
                _, body, _ = await _read_response(stream, interim.split(b"\r\n\r\n", 1)[1])
    assert json.loads(body)["content"][0]["text"] == "continued"


async def test_malformed_http_gets_400_and_the_server_survives():
    async with ModelServer(["ok"]) as server:
        with anyio.fail_after(5):
            async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
                await stream.send(b"THIS IS NOT HTTP\r\n\r\n")
                answer = await stream.receive()
        async with httpx.AsyncClient(base_url=server.url) as c:
            response = await c.post("/v1/messages", json=anthropic_body())
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert response.status_code == 200


async def test_head_requests_get_no_body():
    async with ModelServer() as server, httpx.AsyncClient(base_url=server.url) as c:
        head = await c.head("/v1/messages")
        after = await c.get("/v1/models")
    assert head.status_code == 405
    assert head.content == b""
    assert after.status_code == 200
    assert server.failures == []


async def test_gzip_request_body():
    async with ModelServer(["unzipped"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        data = gzip.compress(json.dumps(anthropic_body(model="zipped")).encode())
        response = await c.post(
            "/v1/messages",
            content=data,
            headers={"content-encoding": "gzip", "content-type": "application/json"},
        )
        unsupported = await c.post(
            "/v1/messages", content=b"xx", headers={"content-encoding": "br"}
        )
    assert response.json()["content"][0]["text"] == "unzipped"
    assert server.requests[0].model == "zipped"
    assert unsupported.status_code == 415


def test_run_in_thread_serves_synchronous_clients():
    with ModelServer.run_in_thread(["from a thread"]) as server:
        assert threading.current_thread() is threading.main_thread()
        server.add("added from the caller's thread")
        with httpx.Client(base_url=server.url) as c:
            first = c.post("/v1/messages", json=anthropic_body())
            second = c.post("/v1/chat/completions", json={"model": "m", "messages": []})
        url = server.url
    assert first.json()["content"][0]["text"] == "from a thread"
    assert second.json()["choices"][0]["message"]["content"] == "added from the caller's thread"
    with pytest.raises(httpx.ConnectError), httpx.Client() as c:
        c.get(f"{url}/v1/models")


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_works_on_trio(anyio_backend):
    pytest.importorskip("trio")
    async with (
        ModelServer([text("on trio", cut_after=2), "then whole"]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await c.post("/v1/messages", json=anthropic_body(stream=True))
        response = await c.post("/v1/messages", json=anthropic_body(stream=True))
    assert [e.name for e in parse_sse(response.text)][-1] == "message_stop"


async def test_model_server_fixture(model_server):
    model_server.add(text("from the fixture"))
    async with httpx.AsyncClient(base_url=model_server.openai_base_url) as c:
        response = await c.post("/responses", json={"model": "m", "input": "hi"})
    assert response.json()["output"][0]["content"][0]["text"] == "from the fixture"
    assert model_server.anthropic_base_url == model_server.url
    assert model_server.openai_base_url == f"{model_server.url}/v1"
    assert model_server.url.startswith("http://127.0.0.1:")


def test_addresses_need_a_running_server():
    server = ModelServer()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
