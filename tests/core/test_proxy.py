"""The per-step credential proxy: the key is swapped in, streams pass through unbuffered, the
token is checked, the port closes with the step, and no secret reaches a log."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import h11
import httpx
import pytest
from h11_upstream import Exchange, echo, start_upstream
from hypothesis import given
from hypothesis import strategies as st
from jigs.errors import CredentialProxyError, JigsError
from jigs.proxy._credential import CredentialProxy, ProxiedRequest
from jigs_testing import ModelServer, text, tool_call
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-REALKEY-0123456789abcdefghijklmnopqrstuvwxyz"
ANTHROPIC_BODY = {
    "model": "fake-model",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


def _sse_events(raw: str) -> list[dict[str, Any]]:
    events = []
    for block in raw.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


# -- the wire formats pass through intact --------------------------------------------------


async def test_streamed_anthropic_reply_passes_through_with_the_real_key_only():
    records: list[ProxiedRequest] = []
    script = [text("Hello through the proxy."), tool_call("Bash", {"command": "ls"})]
    async with (
        ModelServer(script) as server,
        CredentialProxy(server.anthropic_base_url, KEY, on_request=records.append) as proxy,
        httpx.AsyncClient(base_url=proxy.base_url) as client,
    ):
        placeholder = {"x-api-key": proxy.placeholder_key}
        first = await client.post("/v1/messages", json=ANTHROPIC_BODY, headers=placeholder)
        auth = {"authorization": f"Bearer {proxy.placeholder_key}"}
        second = await client.post("/v1/messages?beta=true", json=ANTHROPIC_BODY, headers=auth)

    assert first.status_code == 200, first.text
    assert first.headers["content-type"].startswith("text/event-stream")
    events = _sse_events(first.text)
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    said = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert said == "Hello through the proxy."
    tool = [e for e in _sse_events(second.text) if e["type"] == "content_block_start"]
    assert tool[0]["content_block"]["name"] == "Bash"

    requests = server.model_requests
    assert [r.target for r in requests] == ["/v1/messages", "/v1/messages?beta=true"]
    for request in requests:
        assert request.has_header("x-api-key")
        assert not request.has_header("authorization"), "the client's bearer must be stripped"
    assert [r.path for r in records] == ["/v1/messages", "/v1/messages"]
    assert records[0].usage is not None
    assert records[0].usage.input_tokens
    assert records[0].usage.output_tokens
    assert records[0].model == "fake-model"
    assert records[0].outcome == "ok"
    assert records[0].response_bytes == len(first.content)
    assert records[0].request_bytes == requests[0].body_size > 0
    assert proxy.requests == records


async def test_streamed_responses_reply_passes_through_with_usage():
    async with (
        ModelServer([text("Responses text."), tool_call("shell", {"cmd": ["ls"]})]) as server,
        CredentialProxy(server.openai_base_url, KEY, scheme="bearer") as proxy,
        httpx.AsyncClient(base_url=proxy.base_url) as client,
    ):
        headers = {"authorization": f"Bearer {proxy.placeholder_key}"}
        body = {"model": "fake-model", "input": "hi", "stream": True}
        first = await client.post("/responses", json=body, headers=headers)
        second = await client.post("/responses", json=body, headers=headers)
        chat = await client.post(
            "/chat/completions",
            json={
                "model": "fake-model",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}],
            },
            headers=headers,
        )
    assert first.status_code == 200, first.text
    events = _sse_events(first.text)
    said = "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta")
    assert said == "Responses text."
    assert events[-1]["type"] == "response.completed"
    calls = [
        e["item"]
        for e in _sse_events(second.text)
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    assert calls[0]["name"] == "shell"
    assert chat.status_code == 500  # the script ran out: the upstream's own error passes through
    assert [r.path for r in server.requests] == [
        "/v1/responses",
        "/v1/responses",
        "/v1/chat/completions",
    ]
    assert all(r.has_header("authorization") for r in server.requests)
    usage = proxy.requests[0].usage
    completed = events[-1]["response"]["usage"]
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (
        completed["input_tokens"],
        completed["output_tokens"],
    )
    assert [r.status for r in proxy.requests] == [200, 200, 500]


async def test_chat_usage_chunk_is_reported():
    body = {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}],
    }
    async with (
        ModelServer([text("chat")]) as server,
        CredentialProxy(server.openai_base_url, KEY, scheme="bearer") as proxy,
        httpx.AsyncClient(base_url=proxy.base_url) as client,
    ):
        response = await client.post("/chat/completions", json=body)
    assert response.status_code == 200
    last = [e for e in _sse_events(response.text) if e.get("usage")][-1]["usage"]
    usage = proxy.requests[0].usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (
        last["prompt_tokens"],
        last["completion_tokens"],
    )


@pytest.mark.parametrize(
    ("scheme", "header", "value"),
    [("x-api-key", "x-api-key", KEY), ("bearer", "authorization", f"Bearer {KEY}")],
    ids=["x-api-key", "bearer"],
)
async def test_upstream_sees_the_real_key_and_never_the_placeholder(scheme, header, value):
    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group)
        async with (
            CredentialProxy(upstream.url + "/base", KEY, scheme=scheme) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):
            fake = proxy.placeholder_key
            response = await client.post(
                "/v1/messages?x=1",
                content=b'{"hello": "world"}',
                headers={
                    "x-api-key": fake,
                    "authorization": f"Bearer {fake}",
                    "api-key": fake,
                    "proxy-authorization": f"Basic {fake}",
                    "x-custom": "kept",
                    "connection": "keep-alive, x-hop",
                    "x-hop": "dropped",
                },
            )
        group.cancel_scope.cancel()
    assert response.status_code == 200
    assert response.content == b'{"hello": "world"}'
    [seen] = upstream.seen
    assert seen.target == "/base/v1/messages?x=1"
    assert seen.values(header) == [value]
    auth_headers = {"x-api-key", "authorization", "api-key", "proxy-authorization"}
    assert [name for name, _ in seen.headers if name in auth_headers] == [header]
    assert all(fake not in v for _, v in seen.headers), "the placeholder reached the upstream"
    assert seen.values("x-custom") == ["kept"]
    assert seen.values("x-hop") == [], "headers named in Connection are hop-by-hop"
    assert seen.values("host") == [f"127.0.0.1:{upstream.port}"]


# -- token, close, allowlist ---------------------------------------------------------------


async def test_wrong_or_missing_token_is_401_and_never_forwarded():
    async with ModelServer([text("never")]) as server, CredentialProxy(server.url, KEY) as proxy:
        good = proxy.base_url
        root = f"http://127.0.0.1:{proxy.port}"
        token = good.rsplit("/", 1)[1]
        other = "y" if token.endswith("x") else "x"  # a token that differs in its last character
        async with httpx.AsyncClient() as client:
            wrong = [
                f"{root}/{token[:-1]}{other}/v1/messages",
                f"{root}/{token}x/v1/messages",
                f"{root}/{token[:-1]}/v1/messages",
                f"{root}/v1/messages",
                f"{root}/",
            ]
            statuses = [(await client.post(url, json=ANTHROPIC_BODY)).status_code for url in wrong]
            absolute = await client.send(
                client.build_request("GET", f"{root}/x", headers={"host": "example.com"})
            )
    assert statuses == [401] * len(wrong)
    assert absolute.status_code == 401
    assert server.requests == []
    assert proxy.refused == len(wrong) + 1
    assert proxy.requests == []


async def test_a_previous_steps_token_is_refused_by_the_next_proxy():
    async with ModelServer([text("ok")]) as server:
        async with CredentialProxy(server.url, KEY) as old:
            old_url = old.base_url
        async with CredentialProxy(server.url, KEY) as new, httpx.AsyncClient() as client:
            stale = old_url.replace(f":{old.port}/", f":{new.port}/") + "/v1/messages"
            refused = await client.post(stale, json=ANTHROPIC_BODY)
            served = await client.post(new.base_url + "/v1/messages", json=ANTHROPIC_BODY)
    assert refused.status_code == 401
    assert served.status_code == 200
    assert len(server.requests) == 1


async def _read_response(client: h11.Connection, stream: anyio.abc.ByteStream) -> int | None:
    """The status of the next whole response, or ``None`` if the server closed first."""
    status = None
    while True:
        try:
            event = client.next_event()
        except h11.RemoteProtocolError:  # closed before a whole response
            return None
        if event is h11.NEED_DATA:
            try:
                with anyio.fail_after(5):
                    client.receive_data(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                client.receive_data(b"")
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.EndOfMessage):
            return status
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def test_after_close_the_port_is_refused_and_open_connections_are_cut():
    async with ModelServer([text("one")]) as server:
        proxy = CredentialProxy(server.url, KEY)
        client = h11.Connection(h11.CLIENT)
        async with proxy:
            port = proxy.port
            token = proxy.base_url.rsplit("/", 1)[1]
            target = f"/{token}/v1/models"
            request = h11.Request(method="GET", target=target, headers=[("host", "x")])
            stream = await anyio.connect_tcp("127.0.0.1", port)
            await stream.send(client.send(request) + client.send(h11.EndOfMessage()))
            assert await _read_response(client, stream) == 200
            client.start_next_cycle()
        assert proxy.closed
        with pytest.raises(OSError):
            await anyio.connect_tcp("127.0.0.1", port)
        # the kept-alive connection was cut with the step: a second request gets no answer
        with contextlib.suppress(anyio.BrokenResourceError, OSError):
            await stream.send(client.send(request) + client.send(h11.EndOfMessage()))
        assert await _read_response(client, stream) is None
        await stream.aclose()
        with pytest.raises(CredentialProxyError, match="already started"):
            await proxy.serve()


async def test_runs_inside_an_existing_task_group_and_aclose_closes_the_port():
    async with ModelServer([text("in a group")]) as server, anyio.create_task_group() as group:
        proxy = CredentialProxy(server.url, KEY)
        with pytest.raises(CredentialProxyError, match="has not started"):
            _ = proxy.base_url
        await group.start(proxy.serve)
        async with httpx.AsyncClient() as client:
            response = await client.post(proxy.base_url + "/v1/messages", json=ANTHROPIC_BODY)
        port = proxy.port
        await proxy.aclose()
        await proxy.aclose()  # idempotent
        with pytest.raises(OSError):
            await anyio.connect_tcp("127.0.0.1", port)
    assert response.status_code == 200
    assert "in a group" in response.text


async def test_cancelling_the_step_group_stops_the_proxy():
    async with ModelServer() as server:
        proxy = CredentialProxy(server.url, KEY)
        async with anyio.create_task_group() as group:
            await group.start(proxy.serve)
            port = proxy.port
            group.cancel_scope.cancel()
        assert proxy.closed
        with pytest.raises(OSError):
            await anyio.connect_tcp("127.0.0.1", port)
        with anyio.fail_after(2):
            await proxy.aclose()


async def test_only_the_model_calls_go_through_and_dot_segments_are_refused():
    async with (
        ModelServer([text("allowed")]) as server,
        CredentialProxy(server.openai_base_url, KEY, model_calls=["POST /responses"]) as proxy,
        httpx.AsyncClient() as client,
    ):
        base = proxy.base_url
        body = {"model": "m", "input": "hi"}
        ok = await client.post(f"{base}/responses", json=body)
        other = await client.get(f"{base}/models")
        sneaky = await client.post(f"{base}/responsesX", json=body)
        below = await client.post(f"{base}/responses/input_items", json=body)
        wrong_method = await client.get(f"{base}/responses")
        raw = httpx.URL(f"{base}/responses/%2e%2e/models")
        dotted = await client.get(raw)
    assert ok.status_code == 200
    refused = (other, sneaky, below, wrong_method)
    assert [r.status_code for r in refused] == [403] * 4
    assert dotted.status_code == 400
    assert "model-only policy" in other.json()["error"]["message"]
    assert "GET /models" in other.json()["error"]["message"]
    assert [r.path for r in server.requests] == ["/v1/responses"]
    assert proxy.refused == 5


# -- streaming, keep-alive, concurrency ----------------------------------------------------


async def test_first_event_reaches_the_client_before_a_slow_upstream_finishes():
    async def slow(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head()
        await ex.send(b'event: message_start\ndata: {"type":"message_start"}\n\n')
        await anyio.sleep(1.0)
        await ex.send(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        await ex.end()

    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, slow)
        async with (
            CredentialProxy(upstream.url, KEY) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):
            started = time.perf_counter()
            arrivals: list[tuple[float, bytes]] = []
            async with client.stream("POST", "/v1/messages", json=ANTHROPIC_BODY) as response:
                async for chunk in response.aiter_raw():
                    arrivals.append((time.perf_counter() - started, chunk))
        group.cancel_scope.cancel()
    assert b"message_start" in arrivals[0][1]
    assert b"message_stop" not in arrivals[0][1]
    assert arrivals[0][0] < 0.5, f"first event after {arrivals[0][0]:.3f}s: buffered"
    assert arrivals[-1][0] >= 1.0
    assert b"".join(c for _, c in arrivals).endswith(b'{"type":"message_stop"}\n\n')
    record = proxy.requests[0]
    assert record.first_byte_seconds is not None
    assert record.first_byte_seconds < 0.5


async def test_a_burst_of_events_arrives_complete_and_in_order():
    async def burst(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head()
        for i in range(3000):
            await ex.send(b'data: {"n": %d}\n\n' % i)
            if i % 500 == 0:
                await anyio.sleep(0.01)
        await ex.end()

    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, burst)
        async with (
            CredentialProxy(upstream.url, KEY) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):
            response = await client.post("/v1/messages", json=ANTHROPIC_BODY)
        group.cancel_scope.cancel()
    assert [e["n"] for e in _sse_events(response.text)] == list(range(3000))
    assert proxy.requests[0].response_bytes == len(response.content)


async def test_request_body_streams_to_the_upstream():
    first_seen = anyio.Event()

    async def observe(ex: Exchange) -> None:
        chunk = await ex.body_chunk()
        assert chunk == b"first-part;"
        first_seen.set()  # the client only sends the rest after this
        await ex.read_body()
        await ex.head(200, [("content-type", "text/plain")])
        await ex.send(ex.seen.body)
        await ex.end()

    async def body() -> AsyncIterator[bytes]:
        yield b"first-part;"
        await first_seen.wait()
        yield b"second-part"

    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, observe)
        async with (
            CredentialProxy(upstream.url, KEY) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):
            with anyio.fail_after(5):  # a buffering proxy deadlocks here
                response = await client.post("/upload", content=body())
        group.cancel_scope.cancel()
    assert response.text == "first-part;second-part"
    assert upstream.seen[0].values("transfer-encoding") == ["chunked"]
    assert proxy.requests[0].request_bytes == len("first-part;second-part")


async def test_keep_alive_and_concurrent_requests():
    async def delayed(ex: Exchange) -> None:
        body = await ex.read_body()
        await anyio.sleep(0.2)
        await ex.head(200, [("content-type", "application/json")])
        await ex.send(body)
        await ex.end()

    results: dict[int, bytes] = {}
    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, delayed)
        async with (
            CredentialProxy(upstream.url, KEY) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):

            async def one(i: int) -> None:
                response = await client.post("/v1/messages", content=f'{{"n": {i}}}'.encode())
                assert response.status_code == 200
                results[i] = response.content

            started = time.perf_counter()
            async with anyio.create_task_group() as clients:
                for i in range(8):
                    clients.start_soon(one, i)
            elapsed = time.perf_counter() - started
            # sequentially on the kept-alive connections: no new upstream connections needed
            connections = upstream.connections
            for i in range(8, 10):
                await one(i)
            assert upstream.connections == connections
        group.cancel_scope.cancel()
    assert elapsed < 0.8, f"8 requests of 0.2 s took {elapsed:.2f}s: not concurrent"
    assert results == {i: f'{{"n": {i}}}'.encode() for i in range(10)}
    assert len(proxy.requests) == 10


async def test_many_requests_on_one_client_connection():
    async with (
        ModelServer([text("a"), text("b"), text("c")]) as server,
        CredentialProxy(server.url, KEY) as proxy,
    ):
        token = proxy.base_url.rsplit("/", 1)[1]
        payload = json.dumps({**ANTHROPIC_BODY, "stream": False}).encode()
        headers = [
            ("host", "x"),
            ("content-type", "application/json"),
            ("content-length", str(len(payload))),
        ]
        client = h11.Connection(h11.CLIENT)
        answers = []
        async with await anyio.connect_tcp("127.0.0.1", proxy.port) as stream:
            for _ in range(3):
                request = h11.Request(
                    method="POST", target=f"/{token}/v1/messages", headers=headers
                )
                data = client.send(request) + client.send(h11.Data(data=payload))
                await stream.send(data + client.send(h11.EndOfMessage()))
                body = b""
                while True:
                    event = client.next_event()
                    if event is h11.NEED_DATA:
                        with anyio.fail_after(5):
                            client.receive_data(await stream.receive())
                    elif isinstance(event, h11.Response):
                        assert event.status_code == 200
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                answers.append(json.loads(body)["content"][0]["text"])
                client.start_next_cycle()
    assert answers == ["a", "b", "c"]
    assert len(proxy.requests) == 3


# -- upstream failures, hooks, environment -------------------------------------------------


async def test_unreachable_upstream_is_502_and_a_cut_stream_is_cut():
    async def cut(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head()
        await ex.send(b'data: {"type":"message_start"}\n\n')
        await ex.close()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    dead_port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
    await listener.aclose()
    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, cut)
        async with (
            CredentialProxy(f"http://127.0.0.1:{dead_port}", KEY) as dead,
            CredentialProxy(upstream.url, KEY) as proxy,
            httpx.AsyncClient() as client,
        ):
            unreachable = await client.post(dead.base_url + "/v1/messages", json=ANTHROPIC_BODY)
            with pytest.raises(httpx.RemoteProtocolError):
                await client.post(proxy.base_url + "/v1/messages", json=ANTHROPIC_BODY)
        group.cancel_scope.cancel()
    assert unreachable.status_code == 502
    assert "unreachable" in unreachable.json()["error"]["message"]
    assert [r.outcome for r in dead.requests] == ["upstream_unreachable"]
    assert [r.outcome for r in proxy.requests] == ["upstream_cut"]


async def test_a_client_that_leaves_mid_stream_costs_only_its_request():
    async def slow(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head()
        await ex.send(b'data: {"type":"message_start"}\n\n')
        with contextlib.suppress(anyio.BrokenResourceError, OSError):
            for _ in range(50):
                await anyio.sleep(0.02)
                await ex.send(b'data: {"type":"ping"}\n\n')
            await ex.end()

    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, slow)
        async with CredentialProxy(upstream.url, KEY) as proxy:
            token = proxy.base_url.rsplit("/", 1)[1]
            head = f"POST /{token}/v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{{}}"
            async with await anyio.connect_tcp("127.0.0.1", proxy.port) as raw:
                await raw.send(head.encode())
                received = b""
                with anyio.fail_after(5):
                    while b"message_start" not in received:
                        received += await raw.receive()
            # left after the first event
            with anyio.fail_after(5):
                while not proxy.requests:
                    await anyio.sleep(0.02)
            upstream.handler = echo
            async with httpx.AsyncClient(base_url=proxy.base_url) as client:
                after = await client.post("/v1/other", content=b"still serving")
        group.cancel_scope.cancel()
    assert proxy.requests[0].outcome == "client_gone"
    assert proxy.requests[0].status == 200
    assert after.content == b"still serving"


async def test_an_upstream_that_never_answers_is_504():
    async def silent(ex: Exchange) -> None:
        await ex.read_body()
        await anyio.sleep(5)

    async with anyio.create_task_group() as group:
        upstream = await start_upstream(group, silent)
        async with (
            CredentialProxy(upstream.url, KEY, read_timeout=0.2) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):
            with anyio.fail_after(5):
                response = await client.post("/v1/messages", json=ANTHROPIC_BODY)
        group.cancel_scope.cancel()
    assert response.status_code == 504
    assert "timed out" in response.json()["error"]["message"]
    assert [(r.status, r.outcome) for r in proxy.requests] == [(504, "upstream_timeout")]


async def test_a_failing_hook_does_not_break_the_proxy():
    def hook(record: ProxiedRequest) -> None:
        raise RuntimeError("hook bug")

    # a request is recorded once its response has ended, which the client may see first: the
    # logs are read once the proxy has closed
    with capture_logs() as logs:
        async with (
            ModelServer([text("a"), text("b")]) as server,
            CredentialProxy(server.url, KEY, on_request=hook) as proxy,
            httpx.AsyncClient(base_url=proxy.base_url) as client,
        ):
            first = await client.post("/v1/messages", json=ANTHROPIC_BODY)
            second = await client.post("/v1/messages", json=ANTHROPIC_BODY)
    assert (first.status_code, second.status_code) == (200, 200)
    assert [e["event"] for e in logs].count("jigs.proxy.hook_failed") == 2


def _host_proxy(monkeypatch: pytest.MonkeyPatch, **variables: str) -> None:
    """The worker's environment names exactly these proxy variables (every other one, in
    either case, is cleared)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


async def _through_proxy(upstream: str = "http://api.example.invalid/v1") -> httpx.Response:
    """One ``GET /models`` through a credential proxy for ``upstream``."""
    async with (
        CredentialProxy(upstream, KEY, scheme="bearer") as proxy,
        httpx.AsyncClient(trust_env=False) as client,
    ):
        return await client.get(proxy.base_url + "/models")


async def test_upstream_side_honours_the_hosts_proxy_settings(monkeypatch):
    async with ModelServer() as refusing:
        _host_proxy(monkeypatch, HTTP_PROXY=refusing.proxy_url)
        response = await _through_proxy()
    assert response.status_code == 403  # the host's proxy answered, not a DNS failure
    assert refusing.proxy_requests == ["GET http://api.example.invalid/v1/models"]


async def test_upstream_side_goes_direct_to_a_host_no_proxy_names(monkeypatch):
    async with ModelServer([text("direct")]) as server, ModelServer() as refusing:
        _host_proxy(monkeypatch, HTTP_PROXY=refusing.proxy_url, NO_PROXY="localhost,127.0.0.1")
        async with (
            CredentialProxy(server.anthropic_base_url, KEY) as proxy,
            httpx.AsyncClient(trust_env=False) as client,
        ):
            response = await client.post(proxy.base_url + "/v1/messages", json=ANTHROPIC_BODY)
    assert response.status_code == 200
    assert refusing.proxy_requests == []


async def test_upstream_side_tunnels_an_https_upstream_through_the_hosts_proxy(monkeypatch):
    async with ModelServer() as refusing:  # it answers every CONNECT 403 and logs it
        _host_proxy(monkeypatch, HTTPS_PROXY=refusing.proxy_url)
        response = await _through_proxy("https://api.example.invalid")
    assert response.status_code == 502
    assert refusing.connect_attempts == ["api.example.invalid:443"]
    assert KEY not in response.text


async def test_the_hosts_proxy_credentials_go_as_a_header_and_are_never_echoed(monkeypatch):
    password = "pr0xy-Secret-9f3a7c"

    async def refuse(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head(407, [("content-length", "0")])
        await ex.end()

    async with anyio.create_task_group() as group:
        fake_proxy = await start_upstream(group, refuse)
        _host_proxy(monkeypatch, HTTP_PROXY=f"http://ops:{password}@127.0.0.1:{fake_proxy.port}")
        with capture_logs() as logs:
            response = await _through_proxy()
        group.cancel_scope.cancel()
    assert response.status_code == 407  # the host's proxy answered
    [seen] = fake_proxy.seen
    assert seen.target == "http://api.example.invalid/v1/models"
    headers = dict(seen.headers)
    assert (
        headers["proxy-authorization"]
        == "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()
    )
    assert headers["authorization"] == f"Bearer {KEY}"
    assert password not in response.text
    assert password not in repr(logs)


async def test_an_unusable_proxy_setting_answers_502_without_echoing_it(monkeypatch):
    password = "pr0xy-Secret-9f3a7c"
    _host_proxy(monkeypatch, HTTP_PROXY=f"ftp://ops:{password}@proxy.example.invalid:21")
    with capture_logs() as logs:
        response = await _through_proxy()
    assert response.status_code == 502
    assert "HTTP_PROXY" in response.text
    assert password not in response.text
    assert password not in repr(logs)
    assert [e["event"] for e in logs].count("jigs.proxy.client_failed") == 1


async def test_an_upstream_client_that_cannot_be_built_answers_502_naming_why(
    monkeypatch, tmp_path
):
    # the client is built after the port is bound (it overlaps the CLI's start): a CA file
    # that cannot be read must still give the CLI an answer that says why, and a log event
    missing = tmp_path / "no-such-ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    records: list[ProxiedRequest] = []
    with capture_logs() as logs:
        async with (
            CredentialProxy("https://api.example.invalid", KEY, on_request=records.append) as p,
            httpx.AsyncClient(trust_env=False) as client,
        ):
            response = await client.post(p.base_url + "/v1/messages", json=ANTHROPIC_BODY)
    assert response.status_code == 502
    assert "could not be built" in response.text
    assert "SSL_CERT_FILE" in response.text
    assert KEY not in response.text
    assert [(r.status, r.outcome) for r in records] == [(502, "upstream_unreachable")]
    failed = [e for e in logs if e["event"] == "jigs.proxy.client_failed"]
    assert len(failed) == 1
    assert KEY not in repr(failed)


def test_bad_arguments_are_refused_with_a_fix():
    with pytest.raises(CredentialProxyError, match="http:// or https://"):
        CredentialProxy("ftp://example.com", KEY)
    with pytest.raises(CredentialProxyError, match="credentials"):
        CredentialProxy("https://user:pw@example.com", KEY)
    with pytest.raises(CredentialProxyError, match="empty key"):
        CredentialProxy("https://api.anthropic.com", "  ")
    with pytest.raises(CredentialProxyError, match="whitespace"):
        CredentialProxy("https://api.anthropic.com", KEY + "\n")
    with pytest.raises(CredentialProxyError, match="unknown auth scheme"):
        CredentialProxy("https://api.anthropic.com", KEY, scheme="basic")  # type: ignore[arg-type]
    with pytest.raises(CredentialProxyError, match="model_calls"):
        CredentialProxy("https://api.anthropic.com", KEY, model_calls="POST /v1/messages")
    for host in ("api..example.com", "x" * 64 + ".example.com", ".example.com"):
        with pytest.raises(CredentialProxyError, match="empty or over-long label"):
            CredentialProxy(f"https://{host}/v1", KEY)
    for port in ("99999", "http", "-1"):
        with pytest.raises(CredentialProxyError, match="port must be a number"):
            CredentialProxy(f"https://example.com:{port}/v1", KEY)
    for url in ("https://[::1/v1", "https://[zz]/v1"):  # urllib's own ValueError
        with pytest.raises(CredentialProxyError, match="not a valid URL"):
            CredentialProxy(url, KEY)
    # the message and field show scheme and host only: never the credentials or the path
    secret = "hunter2-Zq81xP"
    with pytest.raises(CredentialProxyError) as raised:
        CredentialProxy(f"https://user:{secret}@api.example.com/v1/{secret}", KEY)
    assert secret not in str(raised.value)
    assert raised.value.upstream == "https://api.example.com"


@pytest.mark.parametrize(
    ("upstream", "host"),
    [
        ("http://" + "a" * 60 + ":8080/v1", b"a" * 60 + b":8080"),  # the port is no label
        ("http://[::1]:5/v1", b"[::1]:5"),
        ("http://127.0.0.1:5/v1", b"127.0.0.1:5"),
        ("https://Bücher.example/v1", b"xn--bcher-kva.example"),
        ("https://api.example.com./v1", b"api.example.com."),
    ],
)
def test_the_host_header_is_the_upstreams_host_and_port(upstream: str, host: bytes) -> None:
    proxy = CredentialProxy(upstream, KEY)
    try:
        assert proxy._routes.host == host
    finally:
        proxy.discard()
    error = CredentialProxyError("x")
    assert isinstance(error, JigsError)
    assert isinstance(error, ValueError)
    assert error.retryable is False


# -- secrets stay out of logs and reprs ----------------------------------------------------


async def test_no_secret_in_logs_or_repr(caplog):
    caplog.set_level(logging.DEBUG, logger="jigs")
    stolen = "sk-ant-api03-STOLEN-TOKEN-SHAPED-abcdefghijklmnop"
    async with ModelServer([text("fine")]) as server:
        with capture_logs() as logs:
            async with (
                CredentialProxy(server.url, KEY) as proxy,
                httpx.AsyncClient() as client,
            ):
                root = f"http://127.0.0.1:{proxy.port}"
                refused = await client.post(
                    f"{root}/{stolen}/v1/messages?key={stolen}", json=ANTHROPIC_BODY
                )
                ok = await client.post(
                    proxy.base_url + f"/v1/messages?key={stolen}",
                    json=ANTHROPIC_BODY,
                    headers={"x-api-key": proxy.placeholder_key},
                )
                token = proxy.base_url.rsplit("/", 1)[1]
                shown = repr(proxy)
            await client.aclose()
    assert (refused.status_code, ok.status_code) == (401, 200)
    names = [e["event"] for e in logs]
    assert "jigs.proxy.refused" in names
    assert "jigs.proxy.request" in names
    assert {"jigs.proxy.started", "jigs.proxy.stopped"} <= set(names)
    dumped = repr(logs) + caplog.text
    for secret in (KEY, stolen, token, proxy.placeholder_key):
        assert secret not in dumped
        assert secret not in shown
    refused_event = next(e for e in logs if e["event"] == "jigs.proxy.refused")
    assert refused_event["reason"] == "wrong_token"
    assert refused_event["path"] == "/v1/messages"


# -- the usage tap on its own ----------------------------------------------------------------


def test_usage_tap_merges_anthropic_events_split_anywhere():
    from jigs.proxy._usage import UsageTap

    body = (
        b'event: message_start\r\ndata: {"type":"message_start","message":{"model":"m1",'
        b'"usage":{"input_tokens":10,"cache_read_input_tokens":4,'
        b'"cache_creation_input_tokens":2,"output_tokens":1}}}\r\n\r\n'
        b'event: content_block_delta\r\ndata: {"type":"content_block_delta","delta":'
        b'{"type":"text_delta","text":"the word \\"usage\\" in text"}}\r\n\r\n'
        b'event: message_delta\r\ndata: {"type":"message_delta","usage":{"output_tokens":42}}'
        b"\r\n\r\n"
    )
    for size in (1, 7, len(body)):
        tap = UsageTap("text/event-stream; charset=utf-8", None)
        for i in range(0, len(body), size):
            tap.feed(body[i : i + size])
        usage = tap.result()
        assert usage is not None
        # Anthropic's input_tokens (10) excludes the cache; jigs' usage counts it in
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (16, 42, 58)
        assert (usage.cached_input_tokens, usage.cache_write_tokens) == (4, 2)
        assert tap.model == "m1"


def test_usage_tap_reads_gzip_json_and_ignores_what_it_cannot_read():
    import gzip

    from jigs.proxy._usage import UsageTap

    plain = json.dumps(
        {
            "usage": {
                "input_tokens": 7,
                "output_tokens": 3,
                "input_tokens_details": {"cached_tokens": 5},
            }
        }
    ).encode()
    tap = UsageTap("application/json", "gzip")
    packed = gzip.compress(plain)
    tap.feed(packed[:5])
    tap.feed(packed[5:])
    usage = tap.result()
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (7, 3, 5)
    for content_type, encoding, data in [
        ("text/plain", None, plain),
        ("application/json", "br", plain),
        ("application/json", "gzip", b"not gzip"),
        ("text/event-stream", None, b'data: {"usage": not json}\n\n'),
        ("text/event-stream", None, b'data: {"usage": null}\n\n'),
    ]:
        tap = UsageTap(content_type, encoding)
        tap.feed(data)
        assert tap.result() is None


def test_httpx_is_not_loaded_until_a_step_needs_it():
    # the proxy's modules load with jigs (imports at module level); the upstream client, an
    # optional heavy part, only when a step's proxy starts
    import subprocess
    import sys

    code = (
        "import sys, jigs, jigs.steps, jigs.harnesses, jigs.engine._pipeline, jigs.proxy._credential\n"
        "print('httpx' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False"]


def test_ca_settings_come_from_the_environment_only_with_trust_env(monkeypatch, tmp_path):
    from jigs.proxy import _upstream

    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(OSError):
        _upstream.ssl_context(True)
    assert _upstream.ssl_context(False).cert_store_stats()["x509_ca"] > 0  # certifi's bundle
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # a directory of none: loaded lazily
    assert _upstream.ssl_context(True).cert_store_stats()["x509_ca"] == 0
    assert _upstream.ssl_context(True) is _upstream.ssl_context(True)  # one per setting


def test_no_proxy_variable_means_no_proxy_and_no_urllib_request(monkeypatch):
    from jigs.proxy import _upstream

    _host_proxy(monkeypatch)
    assert _upstream.environment_proxy("https://api.openai.com/v1") is None
    monkeypatch.setenv("ALL_PROXY", "corp.example:3128")  # no scheme: http
    assert _upstream.environment_proxy("https://api.openai.com/v1") == "http://corp.example:3128"
    monkeypatch.setenv("NO_PROXY", ".openai.com")
    assert _upstream.environment_proxy("https://api.openai.com/v1") is None


@given(
    st.lists(
        st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FFF), max_size=70),
        min_size=1,
        max_size=4,
    )
)
def test_host_bytes_is_the_idna_codec(labels: list[str]) -> None:
    """``host_bytes`` answers as ``str.encode("idna")`` does, for ASCII and non-ASCII hosts:
    the same bytes, or a ``UnicodeError`` both ways."""
    from jigs.policy._hosts import host_bytes

    host = ".".join(labels)
    try:
        expected: bytes | None = host.encode("idna")
    except UnicodeError:
        expected = None
    try:
        got: bytes | None = host_bytes(host)
    except UnicodeError:
        got = None
    assert got == expected


@pytest.mark.parametrize("host", ["api..example.com", "x" * 64 + ".example.com", ".example"])
def test_a_descriptor_base_url_with_a_malformed_host_is_refused_at_once(host: str) -> None:
    """A host the wire cannot carry (an empty or over-long label) is a DescriptorError when the
    descriptor is built, for every kind, not an exception from the codec at step open."""
    from jigs import harnesses
    from jigs.errors import DescriptorError

    url = f"http://{host}/v1"
    builds = [
        lambda: harnesses.claude(base_url=url, api_key_env="K"),
        lambda: harnesses.codex(model="m", base_url=url, api_key_env="K"),
        lambda: harnesses.pi(
            model={
                "type": "openai-compatible",
                "name": "n",
                "base_url": url,
                "model": "m",
                "api_key_env": "K",
            }
        ),
    ]
    for build in builds:
        with pytest.raises(DescriptorError, match="empty or over-long label") as raised:
            build()
        assert host not in str(raised.value)
