"""The decoder alone: app-server notifications into jigs.events (no CLI)."""

from __future__ import annotations

from jigs.events import (
    ModelCallStarted,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs_harness_codex._turn import CodexDecoder

T, U = "thread-1", "turn-1"


def _n(method: str, **params: object) -> dict:
    return {"method": method, "params": {"threadId": T, "turnId": U, **params}}


def _usage(tokens: int) -> dict:
    last = {"inputTokens": tokens, "outputTokens": 1, "cachedInputTokens": 0, "totalTokens": 9}
    return _n("thread/tokenUsage/updated", tokenUsage={"last": last, "total": last})


def _done(status: str = "completed", error: object = None) -> dict:
    turn = {"id": U, "status": status, "error": error}
    return {"method": "turn/completed", "params": {"threadId": T, "turn": turn}}


def _events(messages: list[dict]) -> list[object]:
    decoder = CodexDecoder(T, U)
    return [event for message in messages for event in decoder.decode(message)]


def test_a_tool_loop_is_two_model_requests_with_cumulative_usage():
    command = {"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/w"}
    message = {"type": "agentMessage", "id": "m1", "text": "done"}
    events = _events(
        [
            {"method": "turn/started", "params": {"threadId": T, "turn": {"id": U}}},
            _n("item/started", item={"type": "userMessage", "id": "u"}),
            _n("item/started", item=command),
            _n("item/completed", item={**command, "exitCode": 0, "aggregatedOutput": "a"}),
            _usage(10),
            _n("item/started", item={**message, "text": ""}),
            _n("item/agentMessage/delta", itemId="m1", delta="do"),
            _n("item/completed", item=message),
            _usage(25),
            _n("turn/diff/updated", diff=""),
            _done(),
        ]
    )
    kinds = [type(e) for e in events]
    assert kinds.count(ModelCallStarted) == 2  # the final response is not over-counted
    assert kinds[:2] == [SessionStarted, ModelCallStarted]
    assert kinds.index(ModelCallStarted, 2) > kinds.index(UsageUpdated)
    (started,) = [e for e in events if isinstance(e, ToolCallStarted)]
    assert (started.name, started.arguments) == ("exec_command", {"command": "ls", "cwd": "/w"})
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.is_error is False
    assert [e.usage.input_tokens for e in events if isinstance(e, UsageUpdated)] == [10, 35]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "done"
    assert events[-1] == TurnCompleted(
        text="done", stop_reason="completed", metadata={"thread_id": T, "turn_id": U}
    )


def test_other_turns_and_threads_are_ignored():
    other = {"method": "turn/completed", "params": {"threadId": T, "turn": {"id": "old"}}}
    late = {"method": "item/agentMessage/delta", "params": {"threadId": T, "turnId": "old"}}
    assert _events([other, late]) == []
    assert _events([{"method": "warning", "params": {"threadId": "t2", "message": "x"}}]) == []


def test_failures_map_onto_jigs_categories():
    def failed(status: str, error: object) -> TurnFailed:
        (event,) = _events([_done(status, error)])
        assert isinstance(event, TurnFailed)
        return event

    assert failed("interrupted", None).reason == "aborted"
    http = {"message": "m", "codexErrorInfo": {"responseStreamDisconnected": {}}}
    assert (failed("failed", http).reason, failed("failed", http).retryable) == ("api_error", True)
    busy = {"message": "m", "codexErrorInfo": "serverOverloaded"}
    assert failed("failed", busy).retryable
    denied = {"message": "m", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 403}}}
    assert (failed("failed", denied).reason, failed("failed", denied).retryable) == (
        "not_logged_in",
        False,
    )
    # a shape this version does not know is "other", never a crash of the decoder
    odd = failed("failed", {"message": "m", "codexErrorInfo": ["new", "shape"]})
    assert (odd.reason, odd.retryable) == ("other", False)
    assert failed("failed", "not an object").message.startswith("no reason given")


def test_reasoning_warnings_and_retries_are_events_of_their_own():
    from jigs.events import Notice, ReasoningDelta

    events = _events(
        [
            _n("item/reasoning/summaryTextDelta", itemId="r1", delta="thinking"),
            _n("warning", message="model metadata not found"),
            _n("error", error={"message": "stream dropped"}, willRetry=True),
            _n("error", error={"message": "gave up"}, willRetry=False),
            _done("failed", {"message": ""}),
        ]
    )
    assert events[:2] == [ModelCallStarted(), ReasoningDelta(text="thinking")]
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert notices == ["model metadata not found", "Codex retries after: stream dropped"]
    assert isinstance(events[-1], TurnFailed)
    assert events[-1].message.startswith("gave up")  # the last error names the failure


def test_an_unreachable_endpoint_error_never_carries_the_proxy_step_token():
    """Codex quotes the URL it called; through the credential proxy that URL holds the step
    token (http://127.0.0.1:<port>/<token>/responses), which must not travel on in an error."""
    from jigs.events import Notice

    token = "MG2U4P6_DR5WgmgVo3YXPj0i1CE0CCAG"
    said = (
        "unexpected status 502 Bad Gateway: jigs credential proxy: the upstream "
        "http://127.0.0.1:9/v1 is unreachable (ConnectError), url: "
        f"http://127.0.0.1:38859/{token}/responses"
    )
    error = {"message": said, "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 502}}}
    events = _events([_n("error", error={"message": said}, willRetry=True), _done("failed", error)])
    notice, failed = events
    assert isinstance(notice, Notice)
    assert isinstance(failed, TurnFailed)
    for text in (notice.message, failed.message):
        assert token not in text
        assert "http://127.0.0.1:38859/<step token>/responses" in text
        assert "http://127.0.0.1:9/v1" in text  # the upstream the user named stays
