"""Script behaviour: order, delay, cut_after, callable replies, exhaustion, models, bad input."""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel
import httpx
import pytest
from jigs_testing import ModelServer, Script, error, reply, text, tool_call

from ._sse import anthropic_body, chat_body, parse_sse, responses_body

pytestmark = pytest.mark.anyio


async def test_replies_are_served_in_order_and_indexed():
    async with ModelServer(["one", text("two")]) as server:
        server.add(text("three"))
        server.script.extend(["four"])
        async with httpx.AsyncClient(base_url=server.url) as c:
            got = [
                (await c.post("/v1/messages", json=anthropic_body())).json()["content"][0]["text"],
                (await c.post("/v1/responses", json=responses_body())).json()["output"][0][
                    "content"
                ][0]["text"],
                (await c.post("/v1/chat/completions", json=chat_body())).json()["choices"][0][
                    "message"
                ]["content"],
                (await c.post("/messages", json=anthropic_body())).json()["content"][0]["text"],
            ]
    assert got == ["one", "two", "three", "four"]
    assert [r.reply_index for r in server.model_requests] == [0, 1, 2, 3]
    assert [r.wire for r in server.model_requests] == [
        "anthropic",
        "responses",
        "chat",
        "anthropic",
    ]
    assert server.script.used == 4
    assert server.script.remaining == 0
    server.assert_script_used_up()
    assert server.failures == []


@pytest.mark.parametrize(
    ("path", "wire"),
    [
        ("/v1/messages?beta=true", "anthropic"),
        ("/messages", "anthropic"),
        ("/proxy/anthropic/v1/messages/", "anthropic"),
        ("/responses", "responses"),
        ("/openai/v1/responses", "responses"),
        ("/chat/completions", "chat"),
        ("/v1/messages/count_tokens", "count_tokens"),
    ],
)
async def test_paths_match_on_their_suffix(path, wire):
    async with ModelServer(["x"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        response = await c.post(path, json={"model": "m", "messages": [], "input": []})
    assert response.status_code == 200
    assert server.requests[0].wire == wire


async def test_delay_holds_the_reply_back():
    async with (
        ModelServer([text("slow", delay=0.4), "fast"]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        started = time.monotonic()
        await c.post("/v1/messages", json=anthropic_body(stream=True))
        slow = time.monotonic() - started
        started = time.monotonic()
        await c.post("/v1/messages", json=anthropic_body(stream=True))
        fast = time.monotonic() - started
    assert slow >= 0.4
    assert fast < 0.3


async def _read_raw(c: httpx.AsyncClient, path: str, body: dict, into: bytearray) -> None:
    """Stream a response into ``into`` (so the bytes survive the error a cut raises)."""
    async with c.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_raw():
            into += chunk


@pytest.mark.parametrize(
    ("path", "body", "terminal"),
    [
        ("/v1/messages", anthropic_body(), "message_stop"),
        ("/v1/responses", responses_body(), "response.completed"),
        ("/v1/chat/completions", chat_body(), "[DONE]"),
    ],
)
async def test_cut_after_truncates_the_stream(path, body, terminal):
    async with (
        ModelServer([text("cut short " * 20, cut_after=4), "next"]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        received = bytearray()
        with pytest.raises(httpx.RemoteProtocolError):
            await _read_raw(c, path, {**body, "stream": True}, received)
        after = await c.post(path, json=body)
    events = parse_sse(received.decode())
    assert len(events) == 4
    assert terminal not in {e.name for e in events} | {e.data for e in events}
    assert after.status_code == 200, "the server keeps serving after a cut"


async def test_cut_after_larger_than_the_stream_still_drops_the_terminal_event():
    async with (
        ModelServer([text("hi", cut_after=1000)]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        received = bytearray()
        with pytest.raises(httpx.RemoteProtocolError):
            await _read_raw(c, "/v1/messages", anthropic_body(stream=True), received)
    names = [e.name for e in parse_sse(received.decode())]
    assert names[-1] == "message_delta"
    assert "message_stop" not in names


async def test_cut_after_on_a_plain_json_reply_sends_half_the_body():
    async with (
        ModelServer([text("x" * 200, cut_after=0)]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await c.post("/v1/messages", json=anthropic_body())


async def test_callable_reply_sees_the_request():
    seen = []

    def answer(req):
        seen.append(req)
        return text(f"{req.message_count} messages")

    async def answer_async(req):
        await anyio.lowlevel.checkpoint()
        return f"async {req.message_count}"

    script = [reply(answer), answer, answer_async, reply(lambda req: req.model or "?", delay=0.1)]
    async with ModelServer(script) as server, httpx.AsyncClient(base_url=server.url) as c:
        three = [{"role": "user", "content": "a"}] * 3
        first = await c.post("/v1/messages", json=anthropic_body(messages=three))
        second = await c.post("/v1/responses", json=responses_body(input=[{}, {}]))
        third = await c.post("/v1/responses", json=responses_body(input="just text"))
        fourth = await c.post("/v1/chat/completions", json=chat_body())
    assert first.json()["content"][0]["text"] == "3 messages"
    assert second.json()["output"][0]["content"][0]["text"] == "2 messages"
    assert third.json()["output"][0]["content"][0]["text"] == "async 1"
    assert fourth.json()["choices"][0]["message"]["content"] == "chat-test"
    assert [r.index for r in seen] == [0, 1]
    assert seen[0].reply_index == 0


async def test_callable_reply_that_raises_gives_a_500_and_a_failure():
    def broken(req):
        raise ValueError("bad script logic")

    async with (
        ModelServer([broken, lambda req: 42]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        first = await c.post("/v1/messages", json=anthropic_body(stream=True))
        second = await c.post("/v1/chat/completions", json=chat_body())
    assert first.status_code == 500
    assert "ValueError: bad script logic" in first.json()["error"]["message"]
    assert second.status_code == 500
    assert "returned int" in second.json()["error"]["message"]
    assert len(server.failures) == 2


@pytest.mark.parametrize(
    ("path", "body", "message_of"),
    [
        ("/v1/messages?beta=true", anthropic_body(stream=True), lambda b: b["error"]["message"]),
        ("/v1/responses", responses_body(stream=True), lambda b: b["error"]["message"]),
        ("/v1/chat/completions", chat_body(), lambda b: b["error"]["message"]),
    ],
)
async def test_script_exhaustion_is_a_clear_api_error(path, body, message_of):
    async with ModelServer(["only one"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        await c.post(path, json=body)
        with anyio.fail_after(5):
            response = await c.post(path, json=body)
    assert response.status_code == 500
    assert message_of(response.json()) == (
        f"jigs_testing.ModelServer: the script has no reply left for request #1 (POST {path})"
    )
    assert server.requests[1].reply_index is None
    assert server.failures == [message_of(response.json())]
    with pytest.raises(AssertionError, match="no reply left"):
        server.assert_script_used_up()


@pytest.mark.parametrize(
    ("path", "body", "message_of"),
    [
        ("/v1/messages", anthropic_body(stream=True), lambda b: b["error"]["message"]),
        ("/v1/responses", responses_body(stream=True), lambda b: b["error"]["message"]),
        ("/v1/chat/completions", chat_body(), lambda b: b["error"]["message"]),
    ],
)
async def test_a_server_without_a_script_says_so_with_a_400(path, body, message_of):
    """Not a 500 (which CLIs retry) that reads like an exhausted script: a 400 saying the
    server has no script and how to give it one; the model list still answers."""
    async with ModelServer() as server, httpx.AsyncClient(base_url=server.url) as c:
        with anyio.fail_after(5):
            response = await c.post(path, json=body)
            listing = await c.get("/v1/models")
    assert response.status_code == 400
    message = message_of(response.json())
    assert message.startswith("jigs_testing.ModelServer has no script: no reply left for request")
    assert "jigs model-server --script FILE" in message
    assert "ModelServer(script=[...])" in message
    assert listing.status_code == 200
    assert server.failures == [message]
    with pytest.raises(AssertionError, match="has no script"):
        server.assert_script_used_up()


async def test_unused_replies_are_reported():
    async with ModelServer(["a", "b"]) as server:
        pass
    with pytest.raises(AssertionError, match="2 scripted replies were never requested"):
        server.assert_script_used_up()


async def test_models_endpoint():
    script = [text("x", model="scripted-model")]
    async with (
        ModelServer(script, models=["m1", "m2"]) as server,
        httpx.AsyncClient(base_url=server.openai_base_url) as c,
    ):
        listing = await c.get("/models")
        one = await c.get("/models/m2")
        missing = await c.get("/models/nope")
    assert listing.status_code == 200
    body = listing.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["m1", "m2", "scripted-model"]
    assert all(m["object"] == "model" for m in body["data"])
    assert one.json()["id"] == "m2"
    assert missing.status_code == 404
    assert server.script.used == 0


async def test_models_default_and_reply_model_override():
    async with (
        ModelServer([text("x", model="override")]) as server,
        httpx.AsyncClient(base_url=server.url) as c,
    ):
        listing = await c.get("/v1/models")
        answer = await c.post("/v1/messages", json=anthropic_body())
    assert [m["id"] for m in listing.json()["data"]] == ["override"]
    assert answer.json()["model"] == "override"
    async with ModelServer() as server, httpx.AsyncClient(base_url=server.url) as c:
        listing = await c.get("/v1/models")
    assert [m["id"] for m in listing.json()["data"]] == ["fake-model"]


async def test_unknown_path_and_wrong_method():
    async with ModelServer(["kept"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        unknown = await c.post("/v1/embeddings", json={})
        wrong = await c.get("/v1/messages")
        wrong_models = await c.post("/v1/models", json={})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found_error"
    assert "/v1/embeddings" in unknown.json()["error"]["message"]
    assert wrong.status_code == 405
    assert wrong_models.status_code == 405
    assert [r.wire for r in server.requests] == ["other", "anthropic", "models"]
    assert server.script.used == 0


@pytest.mark.parametrize(
    ("path", "anthropic_shape"),
    [("/v1/messages", True), ("/v1/responses", False), ("/v1/chat/completions", False)],
)
@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b""])
async def test_bad_json_is_a_400_in_the_api_shape(path, anthropic_shape, content):
    async with ModelServer(["kept"]) as server, httpx.AsyncClient(base_url=server.url) as c:
        response = await c.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    body = response.json()
    if anthropic_shape:
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("jigs_testing.ModelServer: ")
    assert server.script.used == 0
    assert server.requests[0].problem


def test_constructors_validate_their_arguments():
    with pytest.raises(ValueError, match="delay"):
        text("x", delay=-1)
    with pytest.raises(ValueError, match="cut_after"):
        text("x", cut_after=-1)
    with pytest.raises(ValueError, match="not valid JSON"):
        tool_call("t", "{oops")
    with pytest.raises(ValueError, match="JSON object"):
        tool_call("t", "[1]")
    with pytest.raises(ValueError, match="status"):
        error(200)
    with pytest.raises(TypeError):
        Script([object()])
    assert tool_call("t", '{"b": 1,  "a": 2}').tool_calls[0].arguments == '{"b": 1,  "a": 2}'
