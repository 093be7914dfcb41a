"""The credential proxy's policy, unit by unit: which requests are model calls, the budget gate,
and the masking of the key and the step token in what is relayed back (streamed bodies whose
chunks cut a secret in two included).

The requests are sent as raw bytes (the target exactly as written: no client normalises a dot
segment or an encoding away) to a proxy in front of a recording upstream
(``tests/fixtures/h11_upstream.py``), which proves what reached it.
"""

from __future__ import annotations

import json

import anyio
import pytest
from h11_upstream import Exchange, running_upstream
from hypothesis import given, settings
from hypothesis import strategies as st
from jigs.errors import CredentialProxyError
from jigs.plugin import ModelRoute
from jigs.policy._redact import StreamRedactor, redact_bytes
from jigs.proxy._accounting import ModelLedger
from jigs.proxy._credential import CredentialProxy, parse_model_calls
from jigs.proxy._endpoint import DEFAULT_MODEL_CALLS, model_calls_of
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-POLICY-KEY-0123456789abcdefghijklmnop"
MESSAGES = ["POST /v1/messages"]


@pytest.fixture(autouse=True)
def _no_host_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


async def _raw(proxy: CredentialProxy, method: str, path: str, body: bytes = b"{}") -> bytes:
    """One request, its target written as given; the whole answer (the connection closes)."""
    token = proxy.base_url.rsplit("/", 1)[1]
    head = (
        f"{method} /{token}{path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("latin-1")
    answer = b""
    with anyio.fail_after(10):
        async with await anyio.connect_tcp("127.0.0.1", proxy.port) as stream:
            await stream.send(head + body)
            try:
                while True:
                    answer += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    return answer


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _body(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


# -- which requests are model calls ----------------------------------------------------------


async def test_a_refused_head_is_answered_whole_without_an_internal_error() -> None:
    """A HEAD answer is its head only (RFC 9110 9.3.2): the refusal's body is left out by the
    HTTP layer, not cut off half-sent with the proxy reporting an error of its own."""
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY, model_calls=MESSAGES) as proxy,
    ):
        with capture_logs() as logs:
            answer = await _raw(proxy, "HEAD", "/v1/models", b"")
    assert _status(answer) == 403
    assert answer.endswith(b"\r\n\r\n"), answer[-200:]
    assert [e["event"] for e in logs if e["log_level"] == "error"] == []
    assert upstream.seen == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/messages", 200),
        ("POST", "/v1/messages?beta=true", 200),  # the query plays no part
        ("POST", "/v1/messages?", 200),
        ("POST", "/v1/messages/", 403),  # trailing slash: another path
        ("POST", "//v1/messages", 403),
        ("POST", "/v1//messages", 403),
        ("POST", "/V1/messages", 403),
        ("POST", "/v1/messages/count_tokens", 403),  # below a model path is not one
        ("POST", "/v1/messages/batches", 403),
        ("POST", "/v1/messagesX", 403),
        ("POST", "/v1/messages;x=1", 403),
        ("POST", "/v1/m%65ssages", 403),  # an encoded letter is not decoded into a match
        ("post", "/v1/messages", 403),  # methods are case-sensitive
        ("GET", "/v1/messages", 403),
        ("HEAD", "/v1/messages", 403),
        ("OPTIONS", "/v1/messages", 403),
        ("PUT", "/v1/messages", 403),
        ("DELETE", "/v1/messages", 403),
        ("GET", "/v1/files", 403),
        ("DELETE", "/v1/files/file-1", 403),
        ("POST", "/v1/organizations/api_keys", 403),
        ("GET", "/admin", 403),
        ("GET", "", 403),
        ("POST", "/v1/files/../messages", 400),  # dot segments are refused before matching
        ("POST", "/v1/messages/..", 400),
        ("POST", "/v1/files/%2e%2e/messages", 400),
        ("POST", "/v1%2fmessages", 400),
    ],
)
async def test_only_a_declared_method_and_exact_path_reach_the_upstream(
    method: str, path: str, status: int
) -> None:
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url + "/base", KEY, model_calls=MESSAGES) as proxy,
    ):
        with capture_logs() as logs:
            answer = await _raw(proxy, method, path)
    assert _status(answer) == status, answer[:300]
    if status == 200:
        assert [(s.method, s.target) for s in upstream.seen] == [(method, "/base" + path)]
        return
    assert upstream.seen == [], "a refused request reached the upstream"
    assert proxy.refused == 1
    (event,) = [e for e in logs if e["event"] == "jigs.proxy.refused"]
    if status == 403 and method != "HEAD":  # a HEAD answer has no body
        message = json.loads(_body(answer))["error"]["message"]
        assert "model-only policy" in message
        assert f"{method} {path.partition('?')[0]}" in message
    if status == 403:
        assert event["reason"] == "not_a_model_call"
        assert event["path"] == path.partition("?")[0]
        assert event["method"] == method


async def test_a_refused_path_is_never_the_query_or_the_token() -> None:
    async with (
        running_upstream() as upstream,
        CredentialProxy(upstream.url, KEY, model_calls=MESSAGES) as proxy,
    ):
        token = proxy.base_url.rsplit("/", 1)[1]
        with capture_logs() as logs:
            answer = await _raw(proxy, "GET", f"/v1/files?key={KEY}&again={token}")
    assert _status(answer) == 403
    assert KEY.encode() not in answer
    assert token.encode() not in answer
    rendered = json.dumps(logs, default=str)
    assert KEY not in rendered
    assert token not in rendered


@pytest.mark.parametrize(
    "entries",
    [
        "POST /v1/messages",  # a string, not a list
        ["post /v1/messages"],
        ["POST v1/messages"],
        ["POST /v1/messages?beta=true"],
        ["POST /v1/messages/"],
        ["POST /v1/../messages"],
        ["POST /v1/%2e%2e/messages"],
        ["POST //v1/messages"],
        ["/v1/messages"],
        ["POST  /v1/messages"],
        [7],
    ],
)
def test_loose_model_call_entries_are_refused(entries: object) -> None:
    with pytest.raises(CredentialProxyError, match=r"model_calls|METHOD /path"):
        CredentialProxy("https://api.anthropic.com", KEY, model_calls=entries)  # type: ignore[arg-type]


def test_exact_entries_parse_and_routes_default_by_scheme() -> None:
    assert parse_model_calls(["POST /v1/messages", "GET /models"], "here") == {
        ("POST", "/v1/messages"),
        ("GET", "/models"),
    }
    anthropic = ModelRoute(upstream="https://a.example", key_env="K", scheme="x-api-key")
    openai = ModelRoute(upstream="https://o.example/v1", key_env="K", scheme="bearer")
    declared = ModelRoute(upstream="https://o.example", key_env="K", model_calls=("POST /x",))
    assert model_calls_of(anthropic) == ("POST /v1/messages",)
    assert model_calls_of(openai) == ("POST /responses", "POST /chat/completions")
    assert model_calls_of(declared) == ("POST /x",)
    for calls in DEFAULT_MODEL_CALLS.values():  # every default is a valid, exact list
        parse_model_calls(calls, "default")


# -- the budget gate -------------------------------------------------------------------------


async def _usage_reply(ex: Exchange) -> None:
    await ex.read_body()
    body = json.dumps({"type": "message", "usage": {"input_tokens": 600, "output_tokens": 400}})
    await ex.head(200, [("content-type", "application/json")])
    await ex.send(body.encode())
    await ex.end()


async def test_once_the_turns_budget_is_spent_the_proxy_refuses_the_next_call() -> None:
    ledger = ModelLedger()
    ledger.start_turn(budget_usd=0.5)
    ledger.price(cost_usd=0.001, tokens=1000)  # the CLI's rate: $1 per million tokens... x1000
    async with (
        running_upstream(_usage_reply) as upstream,
        CredentialProxy(
            upstream.url, KEY, model_calls=MESSAGES, admit=ledger.admit, on_request=ledger.add
        ) as proxy,
    ):
        first = await _raw(proxy, "POST", "/v1/messages")  # 1000 tokens: $0.001
        assert _status(first) == 200
        assert ledger.count().calls == 1
        assert not ledger.over_budget
        ledger.price(cost_usd=1.0, tokens=1000)  # a dearer model: 1000 tokens are $1 now
        refused = await _raw(proxy, "POST", "/v1/messages")
        assert _status(refused) == 403
        assert "max_budget_usd of $0.5" in json.loads(_body(refused))["error"]["message"]
        assert ledger.over_budget
        assert len(upstream.seen) == 1, "the refused call reached the upstream"
        ledger.start_turn(budget_usd=None)  # a new turn without a budget: calls go again
        assert _status(await _raw(proxy, "POST", "/v1/messages")) == 200
    count = ledger.count()
    assert (count.calls, count.input_tokens, count.output_tokens) == (1, 600, 400)
    assert len(upstream.seen) == 2


def test_the_ledger_counts_anthropic_cached_tokens_as_input_like_jigs_usage() -> None:
    from jigs.proxy._credential import ProxiedRequest
    from jigs.proxy._usage import usage_from_wire

    def record(raw: dict[str, int]) -> ProxiedRequest:
        return ProxiedRequest(
            "POST", "/v1/messages", 200, usage_from_wire(raw), None, 0, 0, 0.0, None, "ok"
        )

    ledger = ModelLedger()
    ledger.start_turn(None)
    ledger.add(record({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 90}))
    details = {"cached_tokens": 40}
    ledger.add(record({"input_tokens": 100, "output_tokens": 5, "input_tokens_details": details}))
    count = ledger.count()
    assert (count.calls, count.input_tokens, count.output_tokens) == (2, 200, 10)
    assert count.cached_input_tokens == 130


# -- masking the key and the token -----------------------------------------------------------

SECRETS = [b"sk-secret-KEY-0123456789", b"tOkEn_abcdefghijklmnopqrstuvwxyz012"]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(SECRETS),
            st.sampled_from([s[:7] for s in SECRETS]),  # a secret's start that is not one
        ),
        max_size=12,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=12),
)
def test_a_streamed_body_is_masked_wherever_the_chunks_cut_it(
    parts: list[bytes], cuts: list[int]
) -> None:
    body = b"".join(parts)
    points = sorted({c for c in cuts if c <= len(body)})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    redactor = StreamRedactor(SECRETS)
    out = b"".join(redactor.feed(chunk) for chunk in chunks) + redactor.flush()
    assert out == redact_bytes(body, SECRETS)
    assert len(out) == len(body)  # a Content-Length stays true
    assert all(secret not in out for secret in SECRETS)


@given(chunk=st.binary(max_size=200).filter(lambda b: not b or b[-1:] not in (b"s", b"t")))
def test_a_chunk_that_ends_like_no_secret_starts_is_sent_whole_at_once(chunk: bytes) -> None:
    redactor = StreamRedactor(SECRETS)
    assert redactor.feed(chunk) == redact_bytes(chunk, SECRETS)
    assert redactor.flush() == b""


async def test_the_key_in_a_streamed_answer_is_masked_even_cut_across_two_events() -> None:
    async def echo_key(ex: Exchange) -> None:
        await ex.read_body()
        await ex.head(200, [("content-type", "text/event-stream"), ("x-echo", f"key={KEY}")])
        await ex.send(b'data: {"error": "bad key ' + KEY[:20].encode())
        await anyio.sleep(0.2)  # the client must already have the first part
        await ex.send(KEY[20:].encode() + b'"}\n\n')
        await ex.send(b"data: " + token_seen[0] + b"\n\n")
        await ex.end()

    token_seen: list[bytes] = []
    async with (
        running_upstream(echo_key) as upstream,
        CredentialProxy(upstream.url, KEY, model_calls=MESSAGES) as proxy,
    ):
        token_seen.append(proxy.base_url.rsplit("/", 1)[1].encode())
        answer = await _raw(proxy, "POST", "/v1/messages")
    assert _status(answer) == 200
    assert KEY.encode() not in answer
    assert KEY[20:].encode() not in answer
    assert token_seen[0] not in answer
    assert answer.count(b"[redacted]") == 3  # the header, the cut body, the token
    assert upstream.seen[0].values("accept-encoding") == ["identity"]


async def test_a_compressed_answer_is_not_relayed() -> None:
    import gzip

    async def packed(ex: Exchange) -> None:
        await ex.read_body()
        data = gzip.compress(KEY.encode())
        headers = [("content-type", "application/json"), ("content-encoding", "gzip")]
        await ex.head(200, [*headers, ("content-length", str(len(data)))])
        await ex.send(data)
        await ex.end()

    async with (
        running_upstream(packed) as upstream,
        CredentialProxy(upstream.url, KEY, model_calls=MESSAGES) as proxy,
    ):
        answer = await _raw(proxy, "POST", "/v1/messages")
    assert _status(answer) == 502
    assert b"compressed" in _body(answer)
    assert [r.outcome for r in proxy.requests] == ["upstream_unreachable"]
