"""The rules for names and secrets (every field of every kind) and redaction by value."""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jigs import harnesses
from jigs.engine._logging import logger
from jigs.env import build_env, validate_agents_env
from jigs.errors import JigsError
from jigs.mcp import McpHttpServer, McpStdioServer
from jigs.policy._secrets import (
    KnownSecrets,
    check_url,
    looks_like_secret,
    redact_known,
    remember,
    secret_scope,
)
from jigs.processes import launch
from jigs_harness_pi import OpenAICompatible, OpenRouter
from pydantic import ValidationError

_TAIL = st.text(alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=16)
#: Values a careless descriptor author pastes where a variable name belongs.
SECRETS = st.one_of(
    st.builds(lambda p, t: p + t, st.sampled_from(["sk-", "sk-ant-api03-", "sk_live_"]), _TAIL),
    st.builds(
        lambda p, t: p + t, st.sampled_from(["ghp_", "gho_", "github_pat_", "glpat-"]), _TAIL
    ),
    st.builds(lambda p, t: p + t, st.sampled_from(["xoxb-", "xoxp-", "xapp-"]), _TAIL),
    st.builds(lambda t: "AKIA" + t.upper()[:16].ljust(16, "Q"), _TAIL),
    st.builds(lambda a, b: f"eyJ{a}.eyJ{b}.{a[::-1]}", _TAIL, _TAIL),
    st.builds(lambda t: "Bearer sk-live-" + t, _TAIL),
    st.builds(
        lambda w, t: f"{t.lower()[:6]}_{w}",
        st.sampled_from(["password", "secret", "token", "apikey", "passwd"]),
        _TAIL,
    ),
    st.builds(lambda t: f"p@ss:{t}!", _TAIL),
    st.builds(lambda t: t + "9Zq" + t[::-1], _TAIL),  # long, high entropy
)

_SOURCE = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}
_PROBE = {"tool": "t"}


def _stdio(**fields: Any) -> dict[str, Any]:
    return {"command": "srv", "probe": _PROBE, **fields}


def _http(**fields: Any) -> dict[str, Any]:
    return {"type": "http", "url": "https://mcp.example/x", "probe": _PROBE, **fields}


#: Every field that names a credential, of every kind, as a way to build it with ``value``.
FIELDS: dict[str, Callable[[str], object]] = {
    "claude.api_key_env": lambda v: harnesses.claude(api_key_env=v),
    "claude.base_url?token": lambda v: harnesses.claude(
        base_url=f"https://gw.example/v1?token={v}", api_key_env="K"
    ),
    "codex.api_key_env": lambda v: harnesses.codex(model="m", api_key_env=v),
    "codex.base_url userinfo": lambda v: harnesses.codex(
        model="m", base_url=f"https://u:{v}@gw.example/v1", api_key_env="K"
    ),
    "pi.model.api_key_env": lambda v: harnesses.load(
        {"kind": "pi", "model": {"type": "openai-compatible", **_SOURCE, "api_key_env": v}}
    ),
    "pi OpenAICompatible(...)": lambda v: OpenAICompatible(**_SOURCE, api_key_env=v),
    "pi OpenAICompatible(base_url)": lambda v: OpenAICompatible(
        model="m", base_url=f"http://127.0.0.1:9/v1?api_key={v}"
    ),
    "pi OpenRouter(...)": lambda v: OpenRouter(model="m", api_key_env=v),
    "mcp stdio env value": lambda v: harnesses.claude(mcp_servers={"s": _stdio(env={"CHILD": v})}),
    "mcp stdio env key": lambda v: harnesses.codex(mcp_servers={"s": _stdio(env={v: "NAME"})}),
    "McpStdioServer(...)": lambda v: McpStdioServer(command="c", probe=_PROBE, env={"X": v}),
    "mcp http header": lambda v: harnesses.load(
        {
            "kind": "pi",
            "model": {"type": "openai-compatible", **_SOURCE},
            "mcp_servers": {"s": _http(headers={"Authorization": v})},
        }
    ),
    "mcp http bearer_token_env": lambda v: harnesses.claude(
        mcp_servers={"s": _http(bearer_token_env=v)}
    ),
    "McpHttpServer(url?key)": lambda v: McpHttpServer(
        url=f"https://mcp.example/x?key={v}", probe=_PROBE
    ),
    "agents.env": lambda v: validate_agents_env([v], source="jigs.toml [agents]"),
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_secret_in_any_field_is_refused_without_being_echoed(
    field: str, caplog: pytest.LogCaptureFixture
) -> None:
    build = FIELDS[field]

    @settings(
        max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(SECRETS)
    def attempt(value: str) -> None:
        caplog.clear()
        with caplog.at_level(logging.DEBUG), pytest.raises(JigsError) as info:
            build(value)
        for exc in _chain(info.value):
            assert not isinstance(exc, ValidationError), "a raw pydantic error escaped"
            for text in (str(exc), repr(exc), *map(str, exc.args)):
                assert value not in text
        assert value not in caplog.text

    attempt()


@pytest.mark.parametrize(
    "value",
    ["ghp_0123456789abcdef", "AKIAIOSFODNN7EXAMPLE", "lower_case_password", "myApiToken"],
)
def test_the_secret_test_runs_before_the_name_test(value: str) -> None:
    # each of these matches the variable-name pattern, and is still refused as a value
    with pytest.raises(JigsError, match="looks like a secret"):
        harnesses.claude(api_key_env=value)
    with pytest.raises(JigsError, match="looks like a secret"):
        harnesses.codex(model="m", api_key_env=value)


@pytest.mark.parametrize(
    "name",
    ["ANTHROPIC_API_KEY", "JIGS_TEST_ANTHROPIC_KEY", "GH_TOKEN", "AIzaCONFIG", "http_proxy", "K"],
)
def test_ordinary_names_pass_every_field(name: str) -> None:
    assert not looks_like_secret(name)
    assert harnesses.claude(api_key_env=name).api_key_env == name
    assert OpenAICompatible(**_SOURCE, api_key_env=name).api_key_env == name
    server = McpHttpServer(url="https://mcp.example/x", probe=_PROBE, headers={"X-Key": name})
    assert server.env_names() == {name}


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@gw.example/v1",
        "https://gw.example/v1?token=abc",
        "https://gw.example/v1?api_key=abc",
        "https://gw.example/v1?key=abc",
        "https://gw.example/v1?x=1&access_token=abc",
        "https://gw.example/v1?q=sk-live-abcdefghijkl",
    ],
)
def test_urls_with_credentials_are_refused_and_not_kept(url: str) -> None:
    with pytest.raises(ValueError, match="not shown"):
        check_url(url, "base_url")
    with pytest.raises(JigsError) as info:
        harnesses.claude(base_url=url, api_key_env="K")
    assert "abc" not in str(info.value)
    assert "pw@" not in str(info.value)


def test_plain_urls_pass() -> None:
    for url in (
        "http://127.0.0.1:4000/v1",
        "https://openrouter.ai/api/v1?model=x",
        "http://[::1]:8080/v1",
        "http://[::1]/v1",
    ):
        assert check_url(url, "base_url") == url


@pytest.mark.parametrize("url", ["http://127.0.0.1:/v1", "https://gw.example:", "http://[::1]:/"])
def test_a_url_with_an_empty_port_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="no port after it"):
        check_url(url, "base_url")
    with pytest.raises(JigsError, match="base_url has a ':' with no port"):
        harnesses.claude(base_url=url, api_key_env="K")


def test_build_env_registers_every_secret_value_whatever_its_name() -> None:
    host = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/root",
        "HTTPS_PROXY": "http://bob:hunter2-proxy@proxy.example:3128",
        "DEPLOY_WORDS": "correct-horse-battery",  # declared: a secret, though nothing says so
        "GH_TOKEN": "ghp_aaaaaaaaaaaaaaaaaaaa",
    }
    with secret_scope() as known:
        env = build_env(["DEPLOY_WORDS", "GH_TOKEN"], source=host)
        assert env["DEPLOY_WORDS"] == "correct-horse-battery"
        text = "dump: " + " ".join(f"{k}={v}" for k, v in env.items())
        cleaned = redact_known(text)
        for secret in ("correct-horse-battery", "ghp_aaaaaaaaaaaaaaaaaaaa", "hunter2-proxy"):
            assert secret in known
            assert secret not in cleaned
        assert "/usr/bin:/bin" in cleaned
        assert "proxy.example:3128" in cleaned
        assert "correct-horse" not in repr(known)
    # the step's values are dropped with its scope
    assert "correct-horse-battery" in redact_known("correct-horse-battery")


def test_log_events_never_carry_a_known_secret(caplog: pytest.LogCaptureFixture) -> None:
    with secret_scope(), caplog.at_level(logging.DEBUG, logger="jigs"):
        remember(["s3cret-value-in-memory"])
        logger.bind(run_id="r").info(
            "step.failed s3cret-value-in-memory",
            detail="it said s3cret-value-in-memory",
            nested={"list": ["s3cret-value-in-memory"]},
        )
    assert "s3cret-value-in-memory" not in caplog.text
    assert "[redacted]" in caplog.text


def test_a_value_remembered_in_a_task_that_outlived_its_step_is_still_redacted() -> None:
    """A task started inside a step keeps the step's registry in its context after the step
    closed; what it remembers then goes to the process-wide registry, which is consulted, not
    to the closed one, which is not."""
    with secret_scope():
        outliving = contextvars.copy_context()
    outliving.run(remember, ["late-secret-value-remembered"])
    assert redact_known("said late-secret-value-remembered") == "said [redacted]"


def test_redaction_follows_every_change_of_the_known_values() -> None:
    """What redaction knows is rebuilt only when it changed: a value remembered after a
    redaction (in another thread too), or in a scope opened after it, is masked by the next
    one; a scope's values stop being masked when it closes; the longest value wins."""
    import threading

    assert redact_known("first value-one-abcdefgh") == "first value-one-abcdefgh"
    with secret_scope():
        remember(["value-one-abcdefgh"])
        assert redact_known("first value-one-abcdefgh") == "first [redacted]"
        worker = threading.Thread(target=remember, args=(["value-two-from-a-thread"],))
        worker.start()
        worker.join()  # outside the scope's context: the process-wide registry
        assert redact_known("value-two-from-a-thread") == "[redacted]"
        with secret_scope():
            remember(["value-one-abcdefgh-and-more"])
            assert redact_known("value-one-abcdefgh-and-more!") == "[redacted]!"
        assert redact_known("value-one-abcdefgh-and-more!") == "[redacted]-and-more!"
    assert redact_known("value-one-abcdefgh") == "value-one-abcdefgh"


def test_known_secrets_hold_values_without_showing_them() -> None:
    known = KnownSecrets()
    known.add("short")  # too short to redact ordinary words
    known.add("long-enough-value")
    assert "long-enough-value" in known
    assert "short" not in known
    assert "long-enough" not in repr(known)


@pytest.mark.anyio
async def test_a_stderr_tail_redacts_every_secret_value_even_at_its_cut(tmp_path: Path) -> None:
    host = {"PATH": "/usr/bin:/bin", "PLAIN_NAME": "not-a-secret-shape-but-declared"}
    code = (
        "import os, sys\n"
        "v = os.environ['PLAIN_NAME']\n"
        "sys.stderr.write(v + 'x' * 3990 + '\\n' + 'tail ' + v + '\\n')\n"
        "sys.exit(1)\n"
    )
    with secret_scope():
        env = build_env(["PLAIN_NAME"], source=host)
        proc = await launch([sys.executable, "-c", code], cwd=tmp_path, env=env, owner="t")
        async with proc:
            assert await proc.wait() == 1
            tail = proc.stderr_tail()
    assert "tail [redacted]" in tail
    assert "declared" not in tail  # not even the end of the value cut at the tail's start
