"""The credential proxy's heads: which requests go upstream (the step token, the traversal check,
the model-only allowlist, the budget gate) and how their heads are rewritten both ways (the
client's auth replaced by the real key; the key and the token masked in what comes back).

:class:`Routes` holds one proxy's rules and secrets; :meth:`Routes.check` decides a request, as
a :class:`Pass` (where it goes) or a :class:`Refusal` (the status and reason the proxy answers).
Every argument is checked when a :class:`Routes` is built; the errors
(:class:`~jigs.errors.CredentialProxyError`) show neither the key nor the upstream's
credentials.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias
from urllib.parse import urlsplit

from jigs.errors import CredentialProxyError
from jigs.policy._hosts import INVALID_HOST, host_bytes, valid_host
from jigs.policy._redact import redact_bytes

if TYPE_CHECKING:
    import h11
    import httpcore

__all__ = [
    "AuthScheme",
    "Pass",
    "Refusal",
    "Routes",
    "error_body",
    "header",
    "parse_model_calls",
]

AuthScheme: TypeAlias = Literal["x-api-key", "bearer"]
"""How the real key is sent upstream: ``x-api-key: KEY`` (Anthropic) or
``authorization: Bearer KEY`` (OpenAI and most others)."""

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_CLIENT_AUTH = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}
)
_DROPPED_REQUEST = HOP_BY_HOP | _CLIENT_AUTH | {"host", "accept-encoding"}
_METHOD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def error_body(kind: str, message: str) -> bytes:
    """An error both Anthropic and OpenAI clients can read and show."""
    error = {"type": kind, "message": f"jigs credential proxy: {message}", "code": kind}
    return json.dumps({"type": "error", "error": error}).encode()


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lower case), decoded; None if absent."""
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _upstream_problem(upstream: str) -> tuple[str, str | None]:
    """What can be shown of ``upstream`` (scheme and host) and what is wrong with it, if
    anything."""
    try:
        parts = urlsplit(upstream)
    except ValueError:  # a malformed IPv6 literal, say
        return "(not shown)", "it is not a valid URL"
    shown = "(not shown)"
    if parts.scheme and parts.hostname:  # never the credentials, path or query
        shown = f"{parts.scheme}://{parts.hostname}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return shown, "it must be an http:// or https:// URL with a host"
    if parts.username is not None or parts.password is not None:
        return shown, "it must not carry credentials (give the key as `key`)"
    if parts.query or parts.fragment:
        return shown, "it must not have a query or fragment"
    if not valid_host(parts.hostname):
        return shown, f"it has {INVALID_HOST}"
    try:
        parts.port  # noqa: B018 - urllib checks the port when it is read
    except ValueError:
        return shown, "its port must be a number from 0 to 65535"
    return shown, None


def check_upstream(upstream: str) -> str:
    """``upstream`` without a trailing ``/``, or :class:`CredentialProxyError` saying what is
    wrong with it, showing only the URL's scheme and host (it may hold credentials)."""
    if not isinstance(upstream, str):
        raise CredentialProxyError(f"upstream must be a URL string, not {type(upstream).__name__}")
    shown, problem = _upstream_problem(upstream)
    if problem:
        raise CredentialProxyError(
            f"the credential proxy's upstream {shown} is not usable: {problem}, e.g. "
            "https://api.anthropic.com or https://api.openai.com/v1",
            upstream=shown,
        )
    return upstream.rstrip("/")


def _host_header(netloc: str) -> bytes:
    """The ``Host`` header for an upstream's ``netloc`` (credentials already refused): the host
    as :func:`host_bytes` encodes it, then the port as written (encoded apart: a port is no
    label of the host name)."""
    if netloc.startswith("["):  # an IPv6 literal: the port follows the bracket
        host, _, port = netloc.partition("]")
        return host_bytes(host + "]") + port.encode("ascii")
    host, colon, port = netloc.partition(":")
    return host_bytes(host) + (colon + port).encode("ascii")


def _check_key(key: str, upstream: str) -> bytes:
    if not isinstance(key, str) or not key.strip():
        raise CredentialProxyError(
            f"the credential proxy for {upstream} got an empty key: pass the real API key "
            "(read from the worker's environment)",
            upstream=upstream,
        )
    if not key.isprintable() or key != key.strip():
        raise CredentialProxyError(
            f"the credential proxy for {upstream} got a key with whitespace or control "
            "characters: strip the value read from the environment or file",
            upstream=upstream,
        )
    try:
        return key.encode("ascii")
    except UnicodeEncodeError:
        raise CredentialProxyError(
            f"the credential proxy for {upstream} got a non-ASCII key: API keys are ASCII; "
            "check where the value comes from",
            upstream=upstream,
        ) from None


def _auth_header(scheme: AuthScheme, key: bytes, upstream: str) -> tuple[bytes, bytes]:
    if scheme == "x-api-key":
        return (b"x-api-key", key)
    if scheme == "bearer":
        return (b"authorization", b"Bearer " + key)
    raise CredentialProxyError(
        f"unknown auth scheme {scheme!r} for the credential proxy of {upstream}: "
        "use 'x-api-key' (Anthropic) or 'bearer' (OpenAI and compatible)",
        upstream=upstream,
    )


def unsafe_path(path: str) -> bool:
    """Dot segments (``..``, also as ``..;params``) or encoded slashes/dots could step out of the
    upstream's base path; a fragment (``#``) has no business in a request."""
    lowered = path.lower()
    if "%2e" in lowered or "%2f" in lowered or "%5c" in lowered or "\\" in path or "#" in path:
        return True
    return any(segment.split(";", 1)[0] in (".", "..") for segment in path.split("/"))


def _call_problem(method: str, path: str) -> str | None:
    if not method or not set(method) <= _METHOD_CHARS:
        return "it must start with an upper-case HTTP method"
    if not path.startswith("/") or " " in path or "?" in path:
        return "its path must start with '/' and have no query"
    if unsafe_path(path) or "//" in path or (path != "/" and path.endswith("/")):
        return "its path must be exact: no dot segment, encoded separator, or '//'/'/' end"
    return None


def parse_model_calls(calls: Sequence[str], where: str) -> frozenset[tuple[str, str]]:
    """``["POST /v1/messages", ...]`` as ``{("POST", "/v1/messages"), ...}``, or
    :class:`CredentialProxyError` naming ``where`` and the entry's problem.

    An entry is an upper-case method, one space and an exact path (relative to the upstream's
    base path): no query, no trailing slash, no dot segment or encoded separator. A request
    matches when its method and its path (the query left aside) are equal to an entry's.
    """
    if isinstance(calls, str) or not isinstance(calls, Sequence):
        raise CredentialProxyError(
            f"{where} must be a list of 'METHOD /path' entries, e.g. ['POST /v1/messages']"
        )
    parsed: set[tuple[str, str]] = set()
    for entry in calls:
        method, _, path = entry.partition(" ") if isinstance(entry, str) else ("", "", "")
        problem = _call_problem(method, path)
        if problem:
            shown = repr(entry)[:80] if isinstance(entry, str) else type(entry).__name__
            raise CredentialProxyError(
                f"{where} has the entry {shown}: {problem}; write e.g. 'POST /v1/messages'"
            )
        parsed.add((method, path))
    return frozenset(parsed)


class Pass(NamedTuple):
    """A request that goes upstream: ``target`` with the upstream's base path and the query;
    ``path`` after the token, without the query."""

    target: str
    path: str


class Refusal(NamedTuple):
    """A request answered by the proxy itself: ``status``, the ``reason`` logged, the client's
    ``path`` after the token (never the query) and, when the gate refused, ``why``."""

    status: int
    reason: str
    path: str
    why: str | None = None


_KINDS = {401: "authentication_error", 403: "permission_error"}


class Routes:
    """One proxy's request rules and secrets (see :class:`~jigs.proxy.CredentialProxy` for the
    arguments). The step token and the placeholder key are made here."""

    def __init__(
        self,
        upstream: str,
        key: str,
        scheme: AuthScheme,
        model_calls: Sequence[str] | None,
        admit: Callable[[], str | None] | None,
    ) -> None:
        self.upstream = check_upstream(upstream)
        parts = urlsplit(self.upstream)
        #: (scheme, host, port) of the upstream, as httpcore takes them: the target is then
        #: sent exactly as built (a URL string would be re-parsed, and ``;params`` or an empty
        #: ``?`` dropped)
        self.origin = (parts.scheme.encode("ascii"), host_bytes(parts.hostname or ""), parts.port)
        self._base_path = parts.path.rstrip("/")
        self.host = _host_header(parts.netloc)
        """The ``Host`` header the upstream gets."""
        key_bytes = _check_key(key, self.upstream)
        self._auth = _auth_header(scheme, key_bytes, self.upstream)
        where = f"model_calls of the proxy for {self.upstream}"
        self._calls = None if model_calls is None else parse_model_calls(model_calls, where)
        self._admit = admit
        self.token = base64.urlsafe_b64encode(os.urandom(24)).rstrip(b"=").decode("ascii")
        self._token_bytes = self.token.encode("ascii")
        #: masked by value in everything relayed back to the client
        self.secrets = (key_bytes, self._token_bytes)
        self.placeholder_key = f"jigs-placeholder-{os.urandom(8).hex()}"

    def check(self, request: h11.Request, *, closed: bool) -> Pass | Refusal:
        """Where ``request`` goes, or why the proxy answers it itself (in this order: a closed
        proxy, a wrong token, an unsafe path, not a model call, not admitted)."""
        raw_path, has_query, query = request.target.decode("latin-1").partition("?")
        if raw_path.startswith("/"):
            token, slash, rest = raw_path[1:].partition("/")
            path = slash + rest
        else:  # absolute-form or authority-form: never ours
            token, path = "", ""
        if closed:
            return Refusal(401, "closed", path)
        if not hmac.compare_digest(token.encode("latin-1"), self._token_bytes):
            return Refusal(401, "wrong_token", path)
        if unsafe_path(path):
            return Refusal(400, "unsafe_path", "")
        method = request.method.decode("ascii", "replace")
        if self._calls is not None and (method, path) not in self._calls:
            return Refusal(403, "not_a_model_call", path)
        why = self._admit() if self._admit is not None else None
        if why is not None:
            return Refusal(403, "not_admitted", path, why)
        return Pass(self._base_path + path + ("?" + query if has_query else ""), path)

    def refusal_body(self, refusal: Refusal, method: str) -> bytes:
        """The error a refused request gets, the secrets masked."""
        shown = refusal.path[:200]
        messages = {
            "wrong_token": "this address does not belong to a running step",
            "closed": "the step this proxy belonged to has ended",
            "not_a_model_call": f"{method} {shown} is refused by jigs' model-only policy: the "
            "step's proxy forwards model calls only, and nothing was sent upstream",
            "not_admitted": f"{method} {shown} is refused: {refusal.why}",
            "unsafe_path": "the path has dot segments or encoded separators",
        }
        kind = _KINDS.get(refusal.status, "invalid_request_error")
        return redact_bytes(error_body(kind, messages[refusal.reason]), self.secrets)

    def upstream_headers(self, request: h11.Request) -> tuple[list[tuple[bytes, bytes]], bool]:
        """The headers ``request`` goes upstream with (hop-by-hop and the client's auth dropped,
        the real key set, an uncompressed body asked for) and whether it has a body."""
        method = request.method.decode("ascii", "replace")
        connection_tokens = {
            token.strip().lower()
            for name, value in request.headers
            if name == b"connection"
            for token in value.decode("latin-1").split(",")
        }
        headers = [
            (name, value)
            for name, value in request.headers
            if name.decode("latin-1") not in _DROPPED_REQUEST
            and name.decode("latin-1") not in connection_tokens
        ]
        # a compressed body could not be checked for the key on its way back
        headers += [self._auth, (b"host", self.host), (b"accept-encoding", b"identity")]
        has_body = any(
            (name == b"content-length" and value.strip() != b"0") or name == b"transfer-encoding"
            for name, value in request.headers
        )
        has_length = any(name == b"content-length" for name, _ in request.headers)
        if has_body and not has_length:
            # the client's own framing is hop-by-hop (dropped above): a body of unknown length
            # goes upstream chunked
            headers.append((b"transfer-encoding", b"chunked"))
        elif not has_length and method in ("POST", "PUT", "PATCH"):
            headers.append((b"content-length", b"0"))  # RFC 9110 8.6: some front ends want it
        return headers, has_body

    def response_head(
        self, response: httpcore.Response
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The headers and reason phrase to send the client for ``response``: hop-by-hop headers
        dropped, the key and token masked in every value; ``None`` for a compressed body (the
        key could hide in it)."""
        encoding = header(response.headers, b"content-encoding")
        if encoding is not None and encoding.strip().lower() not in ("", "identity"):
            return None
        # RFC 9112 6.3: with a transfer-encoding, a content-length means nothing (and the relay
        # frames the body itself); both are dropped from what the client gets
        dropped = HOP_BY_HOP
        if any(name.lower() == b"transfer-encoding" for name, _ in response.headers):
            dropped = HOP_BY_HOP | {"content-length"}
        headers = [
            (name, redact_bytes(value, self.secrets))
            for name, value in response.headers
            if name.decode("latin-1").lower() not in dropped
        ]
        reason = response.extensions.get("reason_phrase", b"")
        return headers, redact_bytes(reason, self.secrets) if isinstance(reason, bytes) else b""
