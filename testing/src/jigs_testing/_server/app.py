"""The request handler: routes one HTTP request, records it, and answers from the script.

Failure modes, all answered in the API's own error shape and never by crashing: malformed
JSON or a non-object body -> 400; wrong method -> 405; unknown path -> 404; a server that never
had a script -> 400 (no client retries it) saying how to give one; script exhausted or a reply
function that raised -> 500 (both also kept in ``failures``). ``CONNECT`` and
absolute-URI proxy requests for other hosts -> 403, logged as outside connection attempts.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import anyio

from .http import HttpConnection, HttpRequest
from .logline import logger, safe_query, strip_userinfo
from .models_list import model_list, model_object
from .openai_errors import openai_error_payload
from .record import RecordedRequest, WireFormat, count_messages, requested_model
from .render import RenderContext, WireRenderer
from .replies import DynamicReply, ErrorSpec, Reply, ScriptEntry, text
from .respond import send_json, send_rendered
from .routing import Route, classify
from .state import DEFAULT_MODEL, ServerState
from .usage import estimate_tokens
from .wire_anthropic import AnthropicRenderer
from .wire_chat import ChatRenderer
from .wire_responses import ResponsesRenderer

__all__ = ["Application"]

RENDERERS: dict[str, WireRenderer] = {
    "anthropic": AnthropicRenderer(),
    "responses": ResponsesRenderer(),
    "chat": ChatRenderer(),
    "count_tokens": AnthropicRenderer(),
}

_PROXY_REFUSAL = (
    b"jigs_testing.ModelServer refuses to proxy: outside connections are not allowed in tests\n"
)


def _generic_error(status: int, message: str, code: str) -> dict[str, Any]:
    """An error body both Anthropic and OpenAI clients can read."""
    payload = openai_error_payload(status, message, code=code)
    payload["error"]["type"] = {404: "not_found_error", 405: "invalid_request_error"}.get(
        status, payload["error"]["type"]
    )
    return {"type": "error", **payload}


@dataclass(frozen=True, slots=True)
class _Exchange:
    """One request being answered: the request, its connection, and its split target."""

    request: HttpRequest
    conn: HttpConnection
    path: str
    query: str


def _parse_body(raw: bytes) -> tuple[Any, str | None]:
    if not raw.strip():
        return None, "the request has no body"
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, f"malformed JSON body: {exc}"


def _split_absolute(target: str) -> tuple[str, str] | None:
    """``(authority, origin-form target)`` for ``http://host:port/path``, else ``None``."""
    scheme, sep, rest = target.partition("://")
    if not sep or not scheme.isalpha():
        return None
    authority, slash, path = rest.partition("/")
    return strip_userinfo(authority).lower(), f"/{path}" if slash else "/"


class Application:
    """Answers requests from a :class:`ServerState`; one instance per server."""

    def __init__(self, state: ServerState, own_authorities: Collection[str]) -> None:
        self.state = state
        self.own_authorities = {authority.lower() for authority in own_authorities}

    async def handle(self, request: HttpRequest, conn: HttpConnection) -> None:
        """Answer one request on ``conn``. Raises only ``ClientGone`` (and cancellation)."""
        target = request.target
        if request.method == "CONNECT":
            await self._refuse_proxy(conn, connect_target=strip_userinfo(target))
            return
        absolute = _split_absolute(target)
        if absolute is not None:
            authority, target = absolute
            if authority not in self.own_authorities:
                await self._refuse_proxy(conn, proxied=f"{request.method} {request.target}")
                return
        path, _, query = target.partition("?")
        await self._serve(_Exchange(request, conn, path, query), classify(path))

    async def _refuse_proxy(
        self, conn: HttpConnection, *, connect_target: str = "", proxied: str = ""
    ) -> None:
        if connect_target:
            self.state.add_connect(connect_target)
            logger.warning("refused CONNECT %s (outside connection attempt)", connect_target)
        else:
            scheme, _, rest = proxied.partition("://")
            authority, slash, path = rest.partition("/")
            path, mark, query = path.partition("?")
            query = safe_query(query) if mark else ""
            proxied = f"{scheme}://{strip_userinfo(authority)}{slash}{path}{mark}{query}"
            self.state.add_proxied(proxied)
            logger.warning("refused proxy request %s (outside connection attempt)", proxied)
        headers = [("content-type", "text/plain; charset=utf-8")]
        await conn.send_response(403, headers, _PROXY_REFUSAL, close=True)

    def _record(
        self,
        ex: _Exchange,
        wire: WireFormat,
        body: Any,
        *,
        reply_index: int | None = None,
        problem: str | None = None,
    ) -> RecordedRequest:
        return self.state.record(
            method=ex.request.method,
            path=ex.path,
            query=ex.query,
            wire=wire,
            header_names=ex.request.header_names,
            user_agent=ex.request.header("user-agent"),
            body=body,
            model=requested_model(body),
            message_count=count_messages(body),
            stream=isinstance(body, dict) and body.get("stream") is True,
            reply_index=reply_index,
            problem=problem,
            body_size=len(ex.request.body),
        )

    async def _serve(self, ex: _Exchange, route: Route) -> None:
        request = ex.request
        body, problem = _parse_body(request.body) if request.method != "GET" else (None, None)
        if route.wire == "other" or request.method != route.method:
            await self._reject(ex, route, body)
        elif route.wire == "models":
            await self._serve_models(ex, route)
        else:
            renderer = RENDERERS[route.wire]
            if not isinstance(body, dict):
                problem = problem or "the request body must be a JSON object"
                recorded = self._record(ex, route.wire, body, problem=problem)
                payload = renderer.error_payload(400, f"jigs_testing.ModelServer: {problem}")
                await send_json(ex.conn, recorded, 400, payload)
            elif route.wire == "count_tokens":
                recorded = self._record(ex, route.wire, body)
                tokens = estimate_tokens(len(request.body))
                await send_json(ex.conn, recorded, 200, {"input_tokens": tokens})
            else:
                await self._serve_model(ex, route.wire, body, renderer)

    async def _reject(self, ex: _Exchange, route: Route, body: Any) -> None:
        """404 for an unknown path, 405 for a known path with the wrong method."""
        method = ex.request.method
        if route.wire == "other":
            status, code = 404, "unknown_url"
            message = f"jigs_testing.ModelServer: no {method} {ex.path} here"
        else:
            status, code = 405, "method_not_allowed"
            message = f"jigs_testing.ModelServer: {ex.path} does not accept {method}"
        recorded = self._record(ex, route.wire, body, problem=code)
        await send_json(ex.conn, recorded, status, _generic_error(status, message, code))

    async def _serve_models(self, ex: _Exchange, route: Route) -> None:
        recorded = self._record(ex, "models", None)
        ids = self.state.model_ids()
        if route.model_id is None:
            await send_json(ex.conn, recorded, 200, model_list(ids))
        elif route.model_id in ids:
            await send_json(ex.conn, recorded, 200, model_object(route.model_id))
        else:
            message = f"jigs_testing.ModelServer: the model {route.model_id!r} does not exist"
            payload = _generic_error(404, message, "model_not_found")
            await send_json(ex.conn, recorded, 404, payload)

    async def _serve_model(
        self, ex: _Exchange, wire: WireFormat, body: dict[str, Any], renderer: WireRenderer
    ) -> None:
        """Take the next reply from the script and send it in ``wire``'s shapes."""
        taken = self.state.script.take()
        recorded = self._record(ex, wire, body, reply_index=taken[0] if taken else None)
        if taken is None:
            await self._no_reply(ex, recorded, renderer)
            return
        reply = await self._resolve(taken[1], recorded)
        if reply.delay:
            await anyio.sleep(reply.delay)
        ctx = RenderContext(
            model=reply.model or recorded.model or DEFAULT_MODEL,
            input_tokens=estimate_tokens(len(ex.request.body)),
            request=recorded,
        )
        if reply.error is not None:
            rendered = renderer.error(reply.error, ctx, stream=recorded.stream)
        else:
            rendered = renderer.reply(reply, ctx, stream=recorded.stream)
        await send_rendered(ex.conn, recorded, rendered, kind=reply.kind, cut_after=reply.cut_after)

    async def _no_reply(
        self, ex: _Exchange, recorded: RecordedRequest, renderer: WireRenderer
    ) -> None:
        """A model request the script has no reply for: a 500 once a script ran out; a 400 (no
        client retries it) saying how to give one when the server never had a script."""
        where = f"request #{recorded.index} ({ex.request.method} {recorded.target})"
        if len(self.state.script) == 0:
            status = 400
            message = (
                f"jigs_testing.ModelServer has no script: no reply left for {where}. Give it the "
                "replies to serve: jigs model-server --script FILE, or ModelServer(script=[...]) "
                "(the format: docs/model-server.md)"
            )
        else:
            status = 500
            message = f"jigs_testing.ModelServer: the script has no reply left for {where}"
        self.state.add_failure(message)
        await send_json(ex.conn, recorded, status, renderer.error_payload(status, message))

    async def _resolve(self, entry: ScriptEntry, recorded: RecordedRequest) -> Reply:
        if isinstance(entry, Reply):
            return entry
        return await self._call_dynamic(entry, recorded)

    async def _call_dynamic(self, entry: DynamicReply, recorded: RecordedRequest) -> Reply:
        where = f"the reply function for request #{recorded.index}"
        try:
            result: Any = entry.function(recorded)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return self._failed(f"{where} raised {type(exc).__name__}: {exc}")
        if isinstance(result, str):
            result = text(result)
        if not isinstance(result, Reply):
            return self._failed(f"{where} returned {type(result).__name__}, not a Reply or str")
        return dataclasses.replace(result, delay=result.delay + entry.delay)

    def _failed(self, what: str) -> Reply:
        message = f"jigs_testing.ModelServer: {what}"
        self.state.add_failure(message)
        logger.error("%s", message)
        return Reply(error=ErrorSpec(status=500, message=message))
