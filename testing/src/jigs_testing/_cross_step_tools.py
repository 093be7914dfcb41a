"""The conformance kit's ``tools_of_another_step`` check: one step's agent, through its own shell
tool, attacks the Python tools (``tools=``) another step of the same run serves at the same time.

Two sandboxed steps of the kind run at once in the worker, each with tools of its own. Step A's
turn hangs (:attr:`~jigs_testing.plan.DemoPlan.hang`: its CLI waits for its model, or sleeps)
while its tool server serves ``jigs_kit_secret``, which records every call. Step B's agent then
runs one script (:attr:`~jigs_testing.plan.DemoPlan.run_command`) that:

- looks for A's token (the kit hands the script its two halves, so the script never holds it)
  wherever B can read: ``/proc/<pid>/environ`` and ``cmdline`` of every process B sees, and every
  file changed in the last two hours anywhere in B's filesystem but the host's read-only system
  dirs (the run's state dir B shares with A included), and lists A's private dirs and worktree
  by their paths;
- collects every tool token it can find (``JIGS_TOOLS_TOKEN`` in any environment it can read,
  ``Bearer`` headers in those files) and calls ``jigs_kit_secret`` without a token and with each
  one: on A's port of ``127.0.0.1`` directly, on every port listening in B's own network
  namespace (the relay to B's own tool server, its credential proxy), and through each of those
  as an HTTP proxy to A's port (a step on the host's network, ``network="host"``, tries A's port
  only: its "own" ports are every service of the machine);
- prints one ``JIGS-ATTACK`` line per attempt, which reaches B's next model request (or, for a
  kind that calls no model server, its answer).

What must hold: ``jigs_kit_secret`` never ran and A's tool server saw no call and no refused
request while B ran; no attempt on A's port got an HTTP answer; A's token is in no environment
or argv of B's processes and in no file or ``/proc`` entry B could read; A's dirs show B
nothing. So that a pass means something, B's attempts must be seen working where they may: its
relay refuses it without a token (401) and answers it with the token it found in its own
environment (200), and A's tool server still serves once B's turn is over (A was alive
throughout).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from jigs.processes import value_digest
from jigs.sandbox._private_dirs import MARKER

if TYPE_CHECKING:
    from jigs.descriptors import HarnessDescriptor

    from jigs_testing.conformance import KitContext

__all__ = ["tools_of_another_step"]

_CHECK = "tools_of_another_step"
#: Step A's tool, which step B's agent must never reach.
_SECRET_TOOL = "jigs_kit_secret"
_SCRIPT = "tools-attack.sh"
#: Seconds step A may take to get under way (the kit's other checks wait as long).
_START_BOUND = 60.0
_ATTEMPT = re.compile(
    r"JIGS-ATTACK port=(\d+) via=(\S+) tok=(\S+) code=(\d*) rc=(\d+) body=([^\n\"\\]{0,120})"
)


@contextmanager
def _watched_tool_servers() -> Iterator[list[Any]]:
    """Every step tool server the pipeline starts in the block, each recording whether each HTTP
    request it got carried its token (``seen``: ``True`` for one that did)."""
    from jigs.engine import _tool_server  # the mcp SDK and uvicorn: loaded by a step with tools

    original = _tool_server.ToolServer
    opened: list[Any] = []

    class Watched(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.seen: list[bool] = []
            opened.append(self)

        def _app(self) -> Any:
            inner = super()._app()
            expected = f"Bearer {self.token}".encode()

            async def app(scope: Any, receive: Any, send: Any) -> None:
                if scope["type"] == "http":
                    given = dict(scope.get("headers") or []).get(b"authorization", b"")
                    self.seen.append(hmac.compare_digest(given, expected))
                await inner(scope, receive, send)

            return app

    _tool_server.ToolServer = Watched  # type: ignore[misc]
    try:
        yield opened
    finally:
        _tool_server.ToolServer = original  # type: ignore[misc]


def _script(token: str, port: int, theirs: list[Path]) -> str:
    """Step B's attack (see the module docstring): POSIX sh, one ``JIGS-ATTACK`` line per
    attempt. A's token is given as two halves, joined only while the script runs."""
    q = shlex.quote
    half = len(token) // 2
    body = _json_call(_SECRET_TOOL)
    listings = "\n".join(
        f'say "dir:{n}:$(ls -A {q(str(d))} 2>&1 | tr "\\n" " " | head -c 300)"'
        for n, d in enumerate(theirs)
    )
    try:  # the worker's network namespace: a step that shares it (network="host") is not scanned
        host_net = os.readlink("/proc/self/ns/net")
    except OSError:
        host_net = ""
    return _SCRIPT_TEMPLATE.format(
        head=q(token[:half]),
        tail=q(token[half:]),
        port=port,
        body=q(body),
        listings=listings,
        host_net=q(host_net),
    )


def _json_call(tool: str) -> str:
    """The MCP request that calls ``tool`` (a stateless tool server needs no ``initialize``)."""
    return (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{{}}}}}}'
    )


_SCRIPT_TEMPLATE = """\
say() {{ echo "JIGS-ATTACK $*"; }}
list=/tmp/jigs-kit-attack-files
out=/tmp/jigs-kit-attack-body
pat=/tmp/jigs-kit-attack-pattern
started=$(date +%s%N)
# every file changed lately, but the host's read-only system dirs (each step sees the same)
find / \\( -path /proc -o -path /sys -o -path /dev -o -path /usr -o -path /etc \\) -prune -o \\
  -type f -mmin -120 -size -8M -print0 2>/dev/null > "$list"
say "searched:$(tr -cd '\\000' < "$list" | wc -c)"
# joined by a builtin into a file made after the search: no process's argv holds the token
printf %s%s {head} {tail} > "$pat"
say "proc-leak:$(grep -lasF -f "$pat" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null \\
  | tr '\\n' ' ')"
say "file-leak:$(xargs -0 grep -lsaF -f "$pat" < "$list" 2>/dev/null | tr '\\n' ' ')"
{listings}
toks=$( {{ cat /proc/[0-9]*/environ 2>/dev/null | tr '\\000' '\\n' \\
  | sed -n 's/^JIGS_TOOLS_TOKEN=//p'; xargs -0 grep -ohsaE 'Bearer [0-9a-f]{{48}}' < "$list" \\
  2>/dev/null | sed 's/^Bearer //'; }} | sort -u | head -n 4)
say "tokens:$(for t in $toks; do echo x; done | wc -l)"
hex=$(awk 'NR > 1 && $4 == "0A" {{ split($2, a, ":"); print a[2] }}' /proc/net/tcp \\
  /proc/net/tcp6 2>/dev/null | sort -u)
listening=""
for h in $hex; do listening="$listening $(printf %d "0x$h")"; done
# on the host's network these are every service of the machine (other workers' model servers
# among them): only A's port is tried then
if [ "$(readlink /proc/self/ns/net 2>/dev/null)" = {host_net} ]; then listening=""; fi
say "listening:$listening"
call() {{
  if [ "$2" = direct ]; then proxy=""; else proxy="http://127.0.0.1:$2"; fi
  rm -f "$out"
  code=$(curl -s -m 5 -x "$proxy" -o "$out" -w '%{{http_code}}' -X POST \\
    "http://127.0.0.1:$1/mcp" -H 'content-type: application/json' \\
    -H 'accept: application/json, text/event-stream' -H "authorization: Bearer $4" \\
    -d {body} 2>/dev/null)
  rc=$?
  say "port=$1 via=$2 tok=$3 code=$code rc=$rc body=$(head -c 120 "$out" 2>/dev/null \\
    | tr -d '\\n"\\\\')"
}}
for p in {port} $listening; do
  call "$p" direct none ""
  i=0; for t in $toks; do i=$((i + 1)); call "$p" direct "$i" "$t"; done
done
for v in $listening; do
  call {port} "$v" none ""
  i=0; for t in $toks; do i=$((i + 1)); call {port} "$v" "$i" "$t"; done
done
say "took:$(( ($(date +%s%N) - started) / 1000000 )) ms"
say end
"""


@dataclass
class _StepA:
    """Step A while it runs: its tool server (watched), the private dirs it made, its end."""

    tree: Path
    called: list[str] = field(default_factory=list)
    server: Any = None
    private: list[Path] = field(default_factory=list)
    ended: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None


def _private_dirs() -> set[Path]:
    """This process's private step dirs in the temp dir (their marker names its pid)."""
    found: set[Path] = set()
    mine = f"{os.getpid()} "
    for path in Path(tempfile.gettempdir()).glob("jigs-*"):
        with contextlib.suppress(OSError):
            if (path / MARKER).read_text().startswith(mine):
                found.add(path)
    return found


@asynccontextmanager
async def _step_a(
    ctx: KitContext, descriptor: HarnessDescriptor, servers: list[Any]
) -> AsyncIterator[_StepA]:
    """Step A, its turn hanging with its tools served, from once it is under way (its model
    called; a kind that calls no model server: its first event) to the block's end, when it is
    cancelled."""
    server = ctx.server
    a = _StepA(ctx.worktree("tools-a"))

    def jigs_kit_secret() -> str:
        """Step A's secret: only step A's agent may call it."""
        a.called.append("called")
        return "the secret"

    queued = server.script.remaining
    prompt = ctx.plan.hang(server)
    calls_model = server.script.remaining > queued
    before, dirs = len(server.model_requests), _private_dirs()
    seen: list[object] = []

    async def run() -> None:
        try:
            await ctx.turn(
                a.tree, prompt, harness=descriptor, tools=[jigs_kit_secret], on_event=seen.append
            )
        except Exception as exc:  # judged by the check
            a.error = exc
        finally:
            a.ended.set()

    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(run)
        # a failure is raised once A has stopped, unwrapped: the kit names the failed check
        try:
            with anyio.fail_after(_START_BOUND + ctx.plan.start_seconds):
                while not (len(server.model_requests) > before if calls_model else seen):
                    assert not a.ended.is_set(), f"{ctx.kind}: step A ended at once: {a.error!r}"
                    await anyio.sleep(0.02)
            a.server = next(s for s in servers if _SECRET_TOOL in s.tools)
            a.private = sorted(_private_dirs() - dirs)
            yield a
        except Exception as exc:
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def tools_of_another_step(ctx: KitContext) -> None:
    """The ``tools_of_another_step`` check (see the module docstring) on a host that can sandbox
    a step; needs the plan's ``run_command``."""
    ctx.require_shell(_CHECK)
    descriptor = ctx.descriptor
    if descriptor.sandbox != "on":
        descriptor = descriptor.replace(sandbox="on")

    def jigs_kit_own() -> str:
        """Step B's own tool."""
        return "B's own"

    tree = ctx.worktree("tools-b")
    with _watched_tool_servers() as servers:
        async with _step_a(ctx, descriptor, servers) as a:
            theirs = [*a.private, a.tree]
            (tree / _SCRIPT).write_text(_script(a.server.token, a.server.port, theirs))
            before, window = len(ctx.server.model_requests), len(a.server.seen)
            prompt = ctx.shell_prompt(f"sh {_SCRIPT}", _CHECK)
            turn = await ctx.turn(tree, prompt, harness=descriptor, tools=[jigs_kit_own])
            ctx.server.script.skip_remaining()
            assert not a.ended.is_set(), f"{ctx.kind}: step A ended during B's turn: {a.error!r}"
            with anyio.fail_after(5):  # A's tool server still serves: it did throughout
                await (await anyio.connect_tcp("127.0.0.1", a.server.port)).aclose()
            said = "\n".join([*(r.text() for r in ctx.server.model_requests[before:]), turn.text])
            mine = next(s for s in servers if "jigs_kit_own" in s.tools)
            _judge_a(ctx.kind, a, a.server.seen[window:])
            _judge_launches(ctx, a, tree)
            _judge_said(ctx.kind, said, a, theirs, mine.port)


def _judge_a(kind: str, a: _StepA, seen: list[bool]) -> None:
    """Nothing of B's reached A's tool server: no call ran, no request came without its token
    while B's turn ran (A's own CLI, waiting for its model, sends none)."""
    assert not a.called, f"{kind}: another step's agent called step A's tool {_SECRET_TOOL}"
    assert a.server.calls == 0, (
        f"{kind}: step A's tool server ran {a.server.calls} tool calls while A's agent ran none"
    )
    refused = seen.count(False)
    assert not refused, (
        f"{kind}: step A's tool server got {refused} requests without its token while another "
        f"step's agent ran: that agent reached A's port"
    )


def _judge_launches(ctx: KitContext, a: _StepA, tree: Path) -> None:
    """A's token is in no environment and no argv of what B's step launched (while A's own
    agent has it in its environment, where its CLI reads it)."""
    kind, token = ctx.kind, a.server.token
    digest = value_digest(token)
    assert any(digest in launch.value_digests for launch in ctx.launches if launch.cwd == a.tree), (
        f"{kind}: step A's agent was launched without its tool token in its environment"
    )
    launched = [launch for launch in ctx.launches if launch.cwd == tree]
    assert launched, f"{kind}: step B launched nothing (cwd {tree})"
    for launch in launched:
        assert digest not in launch.value_digests, (
            f"{kind}: step A's tool token is in the environment of step B's {launch.argv[0]}"
        )
        assert not any(token in arg for arg in launch.argv), (
            f"{kind}: step A's tool token is on the command line of step B's {launch.argv[0]}"
        )


def _lines(said: str, name: str) -> list[str]:
    return [m.strip() for m in re.findall(rf"JIGS-ATTACK {re.escape(name)}:([^\n]*)", said)]


def _judge_said(kind: str, said: str, a: _StepA, theirs: list[Path], own: int) -> None:
    """What B's script printed: it ran to its end, found A's token nowhere, saw none of A's
    dirs, and got no HTTP answer from A's port; its own relay answered it (401 without a token,
    200 with the one it found), so the attempts were real."""
    said = said.replace("\\n", "\n")  # a CLI that sends the output JSON-encoded
    assert "JIGS-ATTACK end" in said, (
        f"{kind}: the attack script did not run to its end (the command's output reaches the "
        f"model with the next request): {said[-1500:]!r}"
    )
    for name in ("proc-leak", "file-leak"):
        leaked = [line for line in _lines(said, name) if line]
        assert not leaked, f"{kind}: another step's agent found step A's tool token in {leaked}"
    for n, theirs_dir in enumerate(theirs):
        shown = _lines(said, f"dir:{n}")
        entries = os.listdir(theirs_dir) if theirs_dir.is_dir() else []
        assert shown, f"{kind}: the script listed none of A's dirs: {said[-1500:]!r}"
        seen = [e for e in entries if any(e in line.split() for line in shown)]
        assert not seen, f"{kind}: another step's agent listed A's {theirs_dir}: {seen}"
    found = _lines(said, "tokens")
    assert max((int(n or 0) for n in found), default=0) >= 1, (
        f"{kind}: the script found no tool token, not even its own step's: {found}"
    )
    attempts = _ATTEMPT.findall(said)
    at_a = [t for t in attempts if int(t[0]) == a.server.port]
    assert at_a, f"{kind}: the script made no attempt on A's port: {said[-1500:]!r}"
    answered = [t for t in at_a if t[1] == "direct" and t[3] not in ("", "000")]
    assert not answered, f"{kind}: another step's agent got an answer from A's port: {answered}"
    mine = [(t[2], t[3]) for t in attempts if int(t[0]) == own and t[1] == "direct"]
    assert ("none", "401") in mine, (
        f"{kind}: the relay to step B's own tool server did not refuse a request without its "
        f"token (401), so the attempts did not run as they should: {mine}"
    )
    assert any(code == "200" for tok, code in mine if tok != "none"), (
        f"{kind}: the token step B's agent found in its own environment did not open its own "
        f"tool server, so its search could not have found A's either: {mine}"
    )
