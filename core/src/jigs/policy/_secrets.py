"""One set of rules for names and secrets, and the step's registry of known secret values.

**Rules** (every field of every kind uses them: ``api_key_env``, MCP ``env``/``headers``/
``bearer_token_env``, ``agents.env``, endpoint URLs):

- :func:`looks_like_secret` runs *first*, before any name check, so a value shaped like a name
  (``ghp_...``, ``AKIA...``, ``lower_case_password``) is refused as a value, never accepted;
- :func:`check_env_name` accepts variable names only and never echoes what it refuses;
- :func:`check_url` refuses credentials in a URL's userinfo or query (``?token=``, ``?key=``...).

Every refusal raises :class:`SecretRuleError` (a ``ValueError``, so pydantic validators can let
it through) whose message names the field but never the value.

**Known secrets**: :class:`KnownSecrets` holds secret values in memory only (never logged, never
in ``repr``). The core fills the current registry when it builds an agent's environment
(:func:`jigs.env.build_env` calls :func:`remember_env`); :func:`redact_known` replaces every known
value in a text, whatever the variable was called. :func:`secret_scope` opens a step's registry;
values remembered outside any scope go to the process-wide one. Redaction consults every open
scope and the process-wide registry, so a log event or error built in another task is covered.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import parse_qsl, unquote, urlsplit

from jigs.policy._hosts import INVALID_HOST, valid_host

__all__ = [
    "REDACTED",
    "SECRET_NAME",
    "KnownSecrets",
    "SecretRuleError",
    "check_env_name",
    "check_url",
    "current_secrets",
    "looks_like_secret",
    "proxy_passwords",
    "redact",
    "redact_known",
    "remember",
    "remember_env",
    "secret_scope",
    "shown",
]

#: What a redacted value is replaced by.
REDACTED = "[redacted]"
#: Environment names whose values are treated as secrets whatever they look like.
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|PASS$|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIG",
    re.IGNORECASE,
)
#: Shortest value the registry holds (shorter ones would redact ordinary words).
MIN_SECRET_LENGTH = 6

_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_ANY_CASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Lower-case names that are conventional variable names, not values.
_LOWER_CASE_NAMES = frozenset({"http_proxy", "https_proxy", "no_proxy", "all_proxy", "ftp_proxy"})
_PREFIXES = re.compile(
    r"^(?:bearer\s+|basic\s+|token\s+)"
    r"|^(?:sk|pk|rk)[-_]"
    r"|^(?:ghp|gho|ghs|ghu|ghr)_|^github_pat_|^glpat-|^xox[abposre]-|^xapp-|^hf_[A-Za-z0-9]{8}"
    r"|^npm_[A-Za-z0-9]{16}|^pypi-|^AGE-SECRET|^shpat_|^dop_v1_|^SG\.|^EAA[A-Za-z0-9]{16}"
    r"|^eyJ[A-Za-z0-9_-]{6,}|^(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{12,}|^AIza[0-9A-Za-z_-]{20,}"
    r"|-----BEGIN",
    re.IGNORECASE,
)
#: Words that make a lower-case identifier read as a value someone pasted (a password).
_VALUE_WORDS = re.compile(r"pass|secret|token|key|cred|auth|pwd|priv", re.IGNORECASE)
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9+/_=.~-]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_WORDISH = re.compile(r"^[A-Za-z0-9_.-]+$")
_SHOWABLE = re.compile(r"^[A-Za-z0-9_.-]+$")
_HEX = re.compile(r"^[0-9a-fA-F]{32,}$")
#: Query parameter names that carry credentials.
_CREDENTIAL_PARAM = re.compile(
    r"token|key|secret|passw|pwd|auth|sig|credential|session|code|jwt|bearer", re.IGNORECASE
)


class SecretRuleError(ValueError):
    """A field holds (or may hold) a secret value, or is not a variable name. The message
    names the field, never the value."""


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_like_secret(value: str, *, words: bool = True) -> bool:
    """True when ``value`` has the shape of a credential rather than a name or an address.

    Known token prefixes (``sk-``, ``ghp_``, ``AKIA``, ``xox?-``, JWTs, ``Bearer ...``, PEM),
    long hex strings, long token-character runs mixing character classes or with high entropy,
    and (with ``words``, where a variable name is expected) words that are not upper-case names
    and contain ``password``, ``token``, ``key``... (``lower_case_password``).
    """
    if not isinstance(value, str) or not value:
        return False
    stripped = value.strip()
    if _PREFIXES.search(stripped):
        return True
    if _HEX.fullmatch(stripped):
        return True
    if (
        words
        and _WORDISH.fullmatch(stripped)
        and stripped not in _LOWER_CASE_NAMES
        and not _NAME.fullmatch(stripped)
        and _VALUE_WORDS.search(stripped)
    ):
        # lower_case_password, myToken123: a name is upper case; this is a value
        return True
    if len(stripped) >= 20 and _TOKEN_CHARS.fullmatch(stripped) and not _UUID.fullmatch(stripped):
        if stripped.startswith("/"):
            return False  # a path
        classes = sum(
            bool(re.search(p, stripped)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[+/=.~-]")
        )
        if (
            len(stripped) >= 24
            and "_" not in stripped
            and "/" not in stripped
            and classes >= 2
            and re.search(r"[0-9]", stripped)
        ):
            return True
        if classes >= 3 and _entropy(stripped) >= 3.5:
            return True
    return False


def shown(value: object, limit: int = 40) -> str:
    """``value`` as it may appear in a message: quoted when it is a short word of name
    characters and not secret-shaped, otherwise a placeholder."""
    if (
        isinstance(value, str)
        and _SHOWABLE.fullmatch(value)
        and len(value) <= limit
        and not looks_like_secret(value)
    ):
        return repr(value)
    return "<not shown>"


def check_env_name(value: object, where: str) -> str:
    """``value`` when it is an environment variable name, else :class:`SecretRuleError`. The
    secret-shape test runs first (so ``ghp_...``, ``AKIA...`` or ``lower_case_password`` are
    refused as values although they match the name pattern); a refused value is never echoed
    unless it is a short, harmless word."""
    if not isinstance(value, str):
        raise SecretRuleError(f"{where} is not an environment variable name (not a string)")
    if looks_like_secret(value):
        raise SecretRuleError(
            f"{where} looks like a secret value; name the step-side environment variable that "
            f"holds it instead (the value is not shown)"
        )
    if _ANY_CASE_NAME.fullmatch(value):
        return value
    raise SecretRuleError(
        f"{where} is not an environment variable name (LIKE_THIS), got {shown(value)}; name the "
        f"step-side variable that holds the value"
    )


def check_url(value: str, where: str) -> str:
    """``value`` when it is an ``http(s)`` URL without credentials; otherwise
    :class:`SecretRuleError`. Userinfo (``user:pass@``) and query parameters named like
    credentials (``token``, ``key``, ``api_key``, ``sig``...) or holding a secret-shaped value
    are refused; the URL is never echoed."""
    if not isinstance(value, str):
        raise SecretRuleError(f"{where} must be a URL string")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise SecretRuleError(f"{where} is not a valid URL (not shown)") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(c.isspace() for c in value)
    ):
        raise SecretRuleError(f"{where} must be an http(s):// URL with a host (not shown)")
    if not valid_host(parts.hostname):
        raise SecretRuleError(f"{where} has {INVALID_HOST} (the URL is not shown)")
    if parts.netloc.endswith(":"):
        # urlsplit takes "host:" as no port at all; a CLI would then use its default port,
        # which is not what was written
        raise SecretRuleError(
            f"{where} has a ':' with no port after it; write the port (e.g. "
            f"http://127.0.0.1:8080/v1) or drop the ':' (the URL is not shown)"
        )
    if "@" in parts.netloc:
        raise SecretRuleError(
            f"{where} must not embed credentials (user:password@); name the variable that holds "
            f"the key instead (the URL is not shown)"
        )
    for name, param in parse_qsl(parts.query, keep_blank_values=True):
        if _CREDENTIAL_PARAM.search(name) or looks_like_secret(unquote(param), words=False):
            raise SecretRuleError(
                f"{where} must not carry credentials in its query; name the variable that holds "
                f"the key instead (the URL is not shown)"
            )
    if looks_like_secret(unquote(parts.fragment), words=False) or any(
        looks_like_secret(seg, words=False) for seg in unquote(parts.path).split("/")
    ):
        raise SecretRuleError(
            f"{where} contains a secret-shaped value; name the variable that holds the key "
            f"instead (the URL is not shown)"
        )
    return value


def proxy_passwords(value: str) -> list[str]:
    """The credentials in a proxy URL's userinfo (``http://user:pass@proxy``): the password, the
    ``user:pass`` pair and their percent-decoded forms; [] when there are none."""
    try:
        parts = urlsplit(value if "://" in value else f"http://{value}")
    except ValueError:
        return []
    if "@" not in parts.netloc:
        return []
    userinfo = parts.netloc.rsplit("@", 1)[0]
    found = {userinfo, unquote(userinfo)}
    if ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        found |= {password, unquote(password)}
    return [v for v in found if v]


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every value of ``secrets`` replaced by :data:`REDACTED`, longest first."""
    return _replace(text, _longest_first(secrets))


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted((v for v in set(secrets) if len(v) >= 4), key=len, reverse=True))


def _replace(text: str, ordered: tuple[str, ...]) -> str:
    for value in ordered:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class KnownSecrets:
    """Secret values one step handles, in memory only. Thread-safe; ``repr`` shows a count."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        #: Set when its :func:`secret_scope` ends: values then go to the process-wide registry.
        self.closed = False

    def add(self, value: str) -> None:
        """Remember ``value`` (ignored when shorter than :data:`MIN_SECRET_LENGTH`)."""
        if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LENGTH:
            with self._lock:
                before = len(self._values)
                self._values.add(value)
                if value.strip() != value:
                    self._values.add(value.strip())
                grew = len(self._values) != before
            if grew:
                _changed()  # after the change: see _known_longest_first

    def values(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._values)

    def __contains__(self, value: object) -> bool:
        with self._lock:
            return value in self._values

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def __repr__(self) -> str:
        return f"KnownSecrets(<{len(self)} values, not shown>)"


_process = KnownSecrets()
_open_scopes: list[KnownSecrets] = []
_scopes_lock = threading.Lock()


class _Known:
    """``version`` of the registries, bumped after every change of what :func:`_all_known`
    returns (a value added, a scope opened or closed), and ``built``: the version a list was
    built at and that list, what redaction knows longest first (one tuple, so both are
    replaced at once whatever the threads do)."""

    version = 0
    built: tuple[int, tuple[str, ...]] = (-1, ())


_KNOWN = _Known()


def _changed() -> None:
    with _scopes_lock:
        _KNOWN.version += 1


_current: ContextVar[KnownSecrets | None] = ContextVar("jigs_known_secrets", default=None)


def current_secrets() -> KnownSecrets:
    """The registry of the current step (:func:`secret_scope`), or the process-wide one."""
    scope = _current.get()
    # a closed scope is consulted by nobody: a task that still points at one (its step closed
    # from another task) remembers into the process-wide registry instead
    return scope if scope is not None and not scope.closed else _process


@contextmanager
def secret_scope() -> Iterator[KnownSecrets]:
    """Open a step's registry: values remembered inside the block (in this task and the tasks it
    starts) go to it, and redaction everywhere consults it until the block ends. Use it as a
    context manager or push it on the step's exit stack (``stack.enter_context``)."""
    scope = KnownSecrets()
    token = _current.set(scope)
    with _scopes_lock:
        _open_scopes.append(scope)
    _changed()
    try:
        yield scope
    finally:
        scope.closed = True
        try:
            _current.reset(token)
        except ValueError:  # closed from another task (a runner closed elsewhere)
            _current.set(None)
        with _scopes_lock:
            _open_scopes.remove(scope)
        _changed()


def remember(values: Iterable[str]) -> None:
    """Add ``values`` to the current registry."""
    registry = current_secrets()
    for value in values:
        registry.add(value)


def _not_secret(value: str) -> bool:
    # an absolute path that exists (SSH_AUTH_SOCK, CLAUDE_CONFIG_DIR) names a place, not a secret

    return value.startswith("/") and "\n" not in value and os.path.exists(value)


def remember_env(env: Mapping[str, str], declared: Iterable[str] = ()) -> None:
    """Remember the secret values of an agent's environment: every value of a ``declared`` name
    (the model key, MCP credentials, ``agents.env``) except existing paths, every value whose
    name or shape is secret, and the credentials of proxy URLs."""
    wanted = set(declared)
    found: list[str] = []
    for name, value in env.items():
        if name.upper().endswith("_PROXY"):
            found.extend(proxy_passwords(value))
        elif _not_secret(value):
            continue
        elif name in wanted or SECRET_NAME.search(name) or looks_like_secret(value):
            found.append(value)
    remember(found)


def _all_known() -> set[str]:
    values = set(_process.values())
    with _scopes_lock:
        scopes = list(_open_scopes)
    for scope in scopes:
        values |= scope.values()
    return values


def _known_longest_first() -> tuple[str, ...]:
    """Every known value, longest first, as :func:`redact` orders them: rebuilt only when the
    registries changed since the last call. Every change bumps the version after it is made,
    and the version is read before the values are, so a list is never kept under a version
    newer than what it holds (a change made meanwhile only costs one more rebuild)."""
    version = _KNOWN.version
    built_at, ordered = _KNOWN.built
    if built_at != version:
        ordered = _longest_first(_all_known())
        _KNOWN.built = (version, ordered)
    return ordered


def redact_known(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every known secret value (every open scope, the process-wide registry and
    ``extra``) replaced by :data:`REDACTED`."""
    more = set(extra)
    if more:
        return redact(text, _all_known() | more)
    # a step logs ~20 events, each a few strings, while every open step's registry is known:
    # the union, deduplicated and sorted, is built once per change, not once per string
    return _replace(text, _known_longest_first())
