"""The step's proxy starts without holding the step up, and a start that fails never hangs the CLI.

``prepare_model_endpoint`` binds the socket and checks the arguments in the caller; the step
then begins serving it on the process's proxy loop (a thread kept between steps), while the step
goes on. These tests attack the window that opens: a request sent before the proxy serves, a
proxy that never serves, a step closed before it serves, a proxy closed before it served; and
the shared loop: a proxy that fails does not take it down, two steps' proxies are served side
by side and stop one by one.
"""

from __future__ import annotations

import socket
import threading
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from h11_upstream import Exchange, echo, running_upstream
from jigs.errors import CredentialProxyError
from jigs.plugin import ModelRoute
from jigs.proxy import _endpoint
from jigs.proxy._credential import CredentialProxy, loopback_socket
from structlog.testing import capture_logs

pytestmark = pytest.mark.anyio

KEY_ENV = "JIGS_TEST_PROXY_START_KEY"
KEY = "sk-proxy-start-0123456789abcdef"


class _Log:
    """A step logger stand-in that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    error = warning = info


def _route(upstream: str) -> ModelRoute:
    # the call these tests make: a GET without a body, the simplest one to answer
    return ModelRoute(
        upstream=upstream, key_env=KEY_ENV, scheme="bearer", model_calls=("GET /v1/models",)
    )


def _open(upstream: str, stack: AsyncExitStack, log: _Log) -> Any:
    """The step's endpoint, its proxy begun at once (as a step's launch begins it)."""
    endpoint, begin, _stop, _ = _endpoint.prepare_model_endpoint(
        _route(upstream), kind="test", stack=stack, log=log
    )
    begin()
    return endpoint


def _proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jigs-proxy"]


def _port(endpoint: Any) -> int:
    return int(endpoint.base_url.split(":")[2].split("/")[0])


def _refused(endpoint: Any) -> bool:
    try:
        socket.create_connection(("127.0.0.1", _port(endpoint)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


async def _answered(endpoint: Any, upstream: Any) -> None:
    async with httpx.AsyncClient() as client:
        reply = await client.get(f"{endpoint.base_url}/v1/models", timeout=5)
    assert reply.status_code == 200
    assert upstream.seen[-1].values("authorization") == [f"Bearer {KEY}"]


async def test_a_request_sent_before_the_proxy_serves_waits_and_is_answered(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    original = _endpoint._StepProxy._serve
    serving = threading.Event()

    async def late(self: Any) -> None:
        await anyio.sleep(0.3)  # the step has long returned the endpoint
        serving.set()
        await original(self)

    monkeypatch.setattr(_endpoint._StepProxy, "_serve", late)
    async with running_upstream() as upstream, AsyncExitStack() as stack:
        endpoint = _open(upstream.url, stack, _Log())
        assert not serving.is_set(), "the endpoint came back only once the proxy served"
        async with httpx.AsyncClient() as client:
            reply = await client.get(f"{endpoint.base_url}/v1/models", timeout=5)
        assert serving.is_set()
        assert reply.status_code == 200
        assert upstream.seen[-1].target == "/v1/models"
        assert upstream.seen[-1].values("authorization") == [f"Bearer {KEY}"]
    assert _refused(endpoint), "closing the stack stops the proxy"


async def test_a_proxy_thread_that_cannot_serve_refuses_the_cli_at_once(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)

    async def broken(self: Any) -> None:
        raise OSError("no event loop for you")

    monkeypatch.setattr(_endpoint._StepProxy, "_serve", broken)
    log = _Log()
    async with running_upstream() as upstream, AsyncExitStack() as stack:
        endpoint = _open(upstream.url, stack, log)
        with anyio.fail_after(5):  # refused, not left waiting in a backlog nobody accepts
            while True:
                try:
                    async with httpx.AsyncClient() as client:
                        await client.get(f"{endpoint.base_url}/v1/models", timeout=5)
                except httpx.ConnectError:
                    break
                await anyio.sleep(0.01)
        with anyio.fail_after(5):
            while ("jigs.proxy.failed", {"error": "OSError"}) not in log.events:
                await anyio.sleep(0.01)
    assert KEY not in repr(log.events)
    # the failure took down only that proxy: the loop serves the next step's
    monkeypatch.undo()
    monkeypatch.setenv(KEY_ENV, KEY)
    async with running_upstream() as upstream, AsyncExitStack() as stack:
        await _answered(_open(upstream.url, stack, _Log()), upstream)


async def test_a_step_closed_before_its_proxy_serves_stops_it_and_frees_the_port(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    original = _endpoint._StepProxy._serve

    async def late(self: Any) -> None:
        await anyio.sleep(0.2)
        await original(self)

    monkeypatch.setattr(_endpoint._StepProxy, "_serve", late)
    async with running_upstream() as upstream:
        async with AsyncExitStack() as stack:
            endpoint = _open(upstream.url, stack, _Log())
        # the stack closed while the proxy was still starting: it waited, then stopped it
        assert _refused(endpoint)


async def test_a_proxy_that_never_began_closes_its_socket_with_the_step(monkeypatch):
    # prepared for a CLI that was never launched (the step failed in between): nothing serves,
    # and the port is given back when the step closes
    monkeypatch.setenv(KEY_ENV, KEY)
    before = _proxy_threads()
    async with AsyncExitStack() as stack:
        endpoint, begin, _stop, _ = _endpoint.prepare_model_endpoint(
            _route("http://127.0.0.1:9"), kind="test", stack=stack, log=_Log()
        )
        assert _proxy_threads() == before
    port = int(endpoint.base_url.split(":")[2].split("/")[0])
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    begin()  # too late: a stopped proxy never begins
    assert _proxy_threads() == before


async def test_a_proxy_stopped_before_its_stack_closes_refuses_at_once_and_stops_once(
    monkeypatch,
):
    # a close that knows the CLI is gone stops the proxy early (while the CLI's processes die),
    # alongside another stop, and the stack's own stop later finds it stopped
    monkeypatch.setenv(KEY_ENV, KEY)
    with capture_logs() as logs:
        async with running_upstream() as upstream, AsyncExitStack() as stack:
            endpoint, begin, stop, _ = _endpoint.prepare_model_endpoint(
                _route(upstream.url), kind="test", stack=stack, log=_Log()
            )
            begin()
            await _answered(endpoint, upstream)
            async with anyio.create_task_group() as group:
                group.start_soon(stop)
                group.start_soon(stop)
            assert _refused(endpoint), "the early stop returned before the proxy stopped serving"
            await stop()
        assert _refused(endpoint)
    stopped = [e for e in logs if e["event"] == "jigs.proxy.stopped"]
    assert len(stopped) == 1, logs
    assert stopped[0]["requests"] == 1  # the one request, then no more serving


async def test_a_proxy_that_never_began_stops_twice_at_once(monkeypatch):
    # a kind that says its CLI is done before anything began the proxy: the early stop and the
    # stack's both return at once (the second used to wait for a start that never came)
    monkeypatch.setenv(KEY_ENV, KEY)
    with anyio.fail_after(5):
        async with AsyncExitStack() as stack:
            endpoint, begin, stop, _ = _endpoint.prepare_model_endpoint(
                _route("http://127.0.0.1:9"), kind="test", stack=stack, log=_Log()
            )
            await stop()
            assert _refused(endpoint)
            await stop()
    begin()  # too late: a stopped proxy never begins
    assert _refused(endpoint)


async def test_a_bad_upstream_fails_the_step_before_any_thread_or_port():
    before = _proxy_threads()
    with capture_logs():
        async with AsyncExitStack() as stack:
            with pytest.raises(CredentialProxyError) as raised:
                _endpoint.prepare_model_endpoint(
                    _route("ftp://upstream.example"),
                    kind="test",
                    stack=stack,
                    log=_Log(),
                    host_env={KEY_ENV: KEY},
                )
    assert "ftp://upstream.example" in str(raised.value)
    assert KEY not in str(raised.value)
    assert _proxy_threads() == before


async def test_a_proxy_closed_before_it_served_refuses_connections_and_will_not_serve():
    sock = loopback_socket()
    port = sock.getsockname()[1]
    proxy = CredentialProxy("http://127.0.0.1:9", KEY, sock=sock)
    assert proxy.base_url.startswith(f"http://127.0.0.1:{port}/")
    await proxy.aclose()
    assert proxy.closed
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    with pytest.raises(CredentialProxyError, match="closed before it served"):
        await proxy.serve()


async def test_the_steps_first_launch_begins_its_proxy_once(tmp_path):
    from contextlib import AsyncExitStack

    from jigs.engine._logging import logger
    from jigs.engine._pipeline import _StepContext
    from jigs.engine._types import RunMetadata

    began: list[int] = []
    async with AsyncExitStack() as stack:
        ctx = _StepContext(
            begin_proxy=lambda: began.append(len(began)),
            run=RunMetadata(workflow_run_id="proxy-begin"),
            env={"PATH": "/usr/bin:/bin"},
            state_dir=tmp_path,
            kind="test",
            stack=stack,
            log=logger,
        )
        assert began == []  # nothing serves before the CLI is launched
        first = await ctx.launch(["true"], cwd=tmp_path)
        assert began == [0]
        await first.wait()
        await (await ctx.launch(["true"], cwd=tmp_path)).wait()
        assert began == [0]  # once per step


async def test_two_steps_proxies_share_the_loop_and_stop_one_by_one(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    async with running_upstream() as upstream, AsyncExitStack() as first:
        one = _open(upstream.url, first, _Log())
        async with AsyncExitStack() as second:
            two = _open(upstream.url, second, _Log())
            assert _port(one) != _port(two)
            await _answered(one, upstream)
            await _answered(two, upstream)
            assert len(_proxy_threads()) == 1  # one loop serves both
        assert _refused(two)
        await _answered(one, upstream)  # the other step's proxy still serves
    assert _refused(one)


def test_a_forked_worker_serves_its_steps_proxies_on_a_loop_of_its_own(tmp_path):
    """The proxy loop is a thread of the process that started it: a child forked after a step
    (a forking worker pool) starts its own for its first proxy, and both answer."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import os, sys
        import anyio, httpx
        from contextlib import AsyncExitStack
        sys.path.insert(0, {str(Path(__file__).parents[1] / "fixtures")!r})
        from h11_upstream import running_upstream
        from jigs.proxy import _endpoint
        from jigs.engine._logging import logger
        from jigs.plugin import ModelRoute

        os.environ["{KEY_ENV}"] = "{KEY}"

        async def one_request():
            async with running_upstream() as upstream, AsyncExitStack() as stack:
                route = ModelRoute(
                    upstream=upstream.url,
                    key_env="{KEY_ENV}",
                    scheme="bearer",
                    model_calls=("GET /v1/models",),
                )
                endpoint, begin, _stop, _ = _endpoint.prepare_model_endpoint(
                    route, kind="test", stack=stack, log=logger
                )
                begin()
                async with httpx.AsyncClient() as client:
                    reply = await client.get(endpoint.base_url + "/v1/models", timeout=5)
                assert reply.status_code == 200, reply.status_code

        anyio.run(one_request)
        pid = os.fork()
        if pid == 0:
            try:
                anyio.run(one_request)
            except BaseException:
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        anyio.run(one_request)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


async def test_a_proxy_whose_failure_report_fails_does_not_take_down_the_loop(monkeypatch):
    """Two proxies begun while a fresh loop starts (so they are queued): one cannot serve and
    its logger raises while reporting that; the other still answers."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setattr(_endpoint, "_LOOP", _endpoint._Loop())

    class _Failing(_Log):
        def error(self, event: str, **fields: Any) -> None:
            super().error(event, **fields)
            raise ValueError("I/O operation on closed file")  # a log sink that fails

    async with running_upstream() as upstream, AsyncExitStack() as stack:
        bad, begin_bad, _, _ = _endpoint.prepare_model_endpoint(
            _route(upstream.url), kind="test", stack=stack, log=_Failing()
        )
        good, begin_good, _, _ = _endpoint.prepare_model_endpoint(
            _route(upstream.url), kind="test", stack=stack, log=_Log()
        )
        begin_bad.__self__.proxy._sockets._sock.close()  # type: ignore[attr-defined]
        begin_bad()
        begin_good()
        await _answered(good, upstream)
        assert _refused(bad)
    assert _refused(good)


# -- the upstream pool kept between steps ----------------------------------------------------

OTHER_KEY = "sk-proxy-start-fedcba9876543210"


async def _get(endpoint: Any) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.get(f"{endpoint.base_url}/v1/models", timeout=5)


async def test_steps_in_sequence_share_one_upstream_connection_each_with_its_own_key(
    monkeypatch,
):
    """The loop keeps the upstream pool between steps (an https upstream pays no handshake per
    step); a connection carries nothing of a step: each request goes up with its own key."""
    async with running_upstream() as upstream:
        for key in (KEY, OTHER_KEY, KEY):
            monkeypatch.setenv(KEY_ENV, key)
            async with AsyncExitStack() as stack:
                endpoint = _open(upstream.url, stack, _Log())
                assert (await _get(endpoint)).status_code == 200
            assert _refused(endpoint), "a closed step's proxy still stops"
        keys = [seen.values("authorization") for seen in upstream.seen]
        assert keys == [[f"Bearer {KEY}"], [f"Bearer {OTHER_KEY}"], [f"Bearer {KEY}"]]
        assert upstream.connections == 1


async def test_a_step_closed_mid_response_cuts_it_and_the_next_step_gets_a_clean_connection(
    monkeypatch,
):
    """The cut exchange's connection is closed, not handed to the next step half-read."""
    monkeypatch.setenv(KEY_ENV, KEY)
    first = [True]

    async def hang_once(ex: Exchange) -> None:
        if not first:
            await echo(ex)
            return
        first.pop()
        await ex.read_body()
        await ex.head(200, [("content-type", "text/event-stream")])
        await ex.send(b"data: first step's secret half\n\n")
        await ex.event()  # until the proxy drops the connection

    async with running_upstream(hang_once) as upstream:
        stack = AsyncExitStack()
        endpoint = _open(upstream.url, stack, _Log())
        url = f"{endpoint.base_url}/v1/models"
        async with httpx.AsyncClient() as client, client.stream("GET", url, timeout=5) as reply:
            chunks = reply.aiter_raw()
            assert b"first step" in await chunks.__anext__()
            with anyio.fail_after(5):
                await stack.aclose()
            with pytest.raises(httpx.HTTPError):  # cut, not left hanging
                async for _ in chunks:
                    pass
        assert _refused(endpoint)
        monkeypatch.setenv(KEY_ENV, OTHER_KEY)
        async with AsyncExitStack() as stack:
            reply = await _get(_open(upstream.url, stack, _Log()))
        assert (reply.status_code, reply.content) == (200, b"")
        assert upstream.seen[-1].values("authorization") == [f"Bearer {OTHER_KEY}"]
        assert upstream.connections == 2


async def test_a_pool_no_step_used_for_its_idle_time_is_closed():
    from jigs.proxy._upstream import UpstreamPools

    async with running_upstream() as upstream, anyio.create_task_group() as group:
        pools = UpstreamPools(group, idle=0.0)
        pool, lease = pools.acquire(upstream.url, trust_env=False)
        again, second = pools.acquire(upstream.url, trust_env=False)
        assert again is pool
        await pool.request("GET", f"{upstream.url}/v1/models")
        assert len(pool.connections) == 1
        pools.release(lease)
        await anyio.wait_all_tasks_blocked()
        assert len(pool.connections) == 1, "closed while a proxy still used it"
        pools.release(second)
        await anyio.wait_all_tasks_blocked()  # the sweep ran
        assert pool.connections == []
        fresh, third = pools.acquire(upstream.url, trust_env=False)
        assert fresh is not pool
        pools.release(third)
        await pools.aclose()
        group.cancel_scope.cancel()
