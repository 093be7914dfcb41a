"""The kit's ``bad_output`` check: a CLI that crashes, prints garbage or prints an oversized line.

The kind is pointed (through :meth:`~jigs.plugin.Harness.resolve_executable`, like ``hung_cli``)
at a small fake CLI the kit writes, one per round; each ignores its arguments and stdin, so it
stands in for a one-process-per-turn CLI and for an app server alike (a kind with a
:meth:`~jigs.plugin.Harness.open_transport` meets the fault while its transport reads the
server's first answer). Every fake first prints its whole environment and a line holding
:data:`SECRET_ENV` to stderr, then:

- ``crash``: leaves a child running, prints half a JSON line (no newline) and exits with code 3:
  :class:`~jigs.errors.AgentCrashedError` with ``returncode`` 3 and a ``stderr_tail`` that holds
  the fake's last line with the secret value redacted;
- ``garbage``: prints lines that are not JSON (the first one holds the secret value), then
  sleeps: :class:`~jigs.errors.AgentOutputError` whose message does not show the value;
- ``oversized``: prints one line of :data:`jigs.processes.MAX_LINE_BYTES` + 1 bytes, then
  sleeps: :class:`~jigs.errors.AgentOutputError`.

After each round: no error text (message, ``stderr_tail``, ``detail``) holds the secret, a
:data:`~jigs_testing.conformance.CANARIES` value or the run's model key; the worktree is
unlocked; no process of the step is left (its group, anything working in the worktree). The
rounds share one worktree, and a real turn on it afterwards must do its work: a failed step can
be retried in place.
"""

from __future__ import annotations

import os
import shlex
import time
import uuid
from typing import TYPE_CHECKING, Any

from jigs.errors import AgentCrashedError, AgentOutputError
from jigs.executables import Resolved
from jigs.policy._lock import worktree_locked
from jigs.policy._secrets import REDACTED
from jigs.processes import MAX_LINE_BYTES, group_alive, live_groups
from jigs.sandbox._proctree import processes_under

from jigs_testing._environ import patched_environ

if TYPE_CHECKING:
    from pathlib import Path

    from jigs_testing.conformance import KitContext

__all__ = ["EXIT_CODE", "SECRET_ENV", "bad_output"]

#: The variable the kit passes to the fake CLIs (``agents_env``) with a value unique to the run;
#: its name marks it secret, so it must be redacted from everything an error carries.
SECRET_ENV = "JIGS_CONFORMANCE_SECRET_TOKEN"
#: The exit code of the crashing fake.
EXIT_CODE = 3
#: Seconds a round may take at most (the step is given ``idle_timeout`` = ``HANG_IDLE``).
ROUND_BOUND = 15.0


def _prelude(name: str) -> str:
    # stderr: the environment, then the fake's own line (kept in the 4 kB tail, whatever the env)
    return (
        "#!/bin/sh\n"
        f"# jigs conformance kit: a fake CLI whose output is bad ({name})\n"
        "env >&2\n"
        f'echo "jigs-kit fake CLI ({name}): ${SECRET_ENV}" >&2\n'
    )


def fake_cli(name: str, line_cap: int) -> str:
    """The text of the fake CLI of round ``name`` (``crash``, ``garbage`` or ``oversized``)."""
    if name == "crash":
        body = (
            # a child that outlives the crash (the step's stop must take it along)
            "sleep 30 </dev/null >/dev/null 2>&1 &\n"
            'printf \'%s\' \'{"type":"assistant","message":{"content":[{"type":"te\'\n'
            f"exit {EXIT_CODE}\n"
        )
    elif name == "garbage":
        body = (
            f'echo "Traceback (most recent call last): token=${SECRET_ENV}"\n'
            "printf '\\033[31merror:\\033[0m \\377\\376 not json at all\\n'\n"
            "exec sleep 30\n"
        )
    elif name == "oversized":
        body = f"head -c {line_cap + 1} /dev/zero | tr '\\0' x\necho\nexec sleep 30\n"
    else:
        raise ValueError(f"unknown bad_output round {name!r}")
    return _prelude(name) + body


ROUNDS = ("crash", "garbage", "oversized")


async def bad_output(ctx: KitContext) -> None:
    """The ``bad_output`` check (see the module docstring)."""
    secret = f"kit-secret-{uuid.uuid4().hex}"
    tree = ctx.worktree("bad-output")
    with patched_environ({SECRET_ENV: secret}):
        for name in ROUNDS:
            await _round(ctx, tree, name, secret)
    done = await ctx.turn(tree, ctx.write_prompt("after-bad-output.txt", "after"))
    ctx.server.script.skip_remaining()
    ctx.assert_wrote(
        tree, "after-bad-output.txt", "after", done.text, "the step retried after bad output"
    )


async def _round(ctx: KitContext, tree: Path, name: str, secret: str) -> None:
    """One round: the kind pointed at the fake CLI ``name``; its step fails with the round's
    error in time, that error carries no secret, and the step leaves nothing behind."""
    from jigs_testing.conformance import CANARIES, _quick

    what = f"{ctx.kind}: bad_output round {name!r}"
    expected: type[Exception] = AgentCrashedError if name == "crash" else AgentOutputError
    fake = ctx.tmp_path / f"fake-{name}-cli"
    fake.write_text(fake_cli(name, MAX_LINE_BYTES))
    os.chmod(fake, 0o755)
    before = len(ctx.launches)
    started = time.monotonic()
    resolved = Resolved(fake, f"conformance: a {name} CLI")
    error = await _failing_turn(
        ctx, tree, resolved, descriptor=_quick(ctx), expected=expected, what=what, secret=secret
    )
    took = time.monotonic() - started
    launched = [launch for launch in ctx.launches[before:] if launch.argv[:1] == (str(fake),)]
    assert launched, (
        f"{what}: the kind did not launch the executable resolve_executable returned "
        f"({shlex.quote(str(fake))}); launch Resolved.path"
    )
    texts = {
        "message": str(error),
        "stderr_tail": str(getattr(error, "stderr_tail", "") or ""),
        "detail": str(getattr(error, "detail", "") or ""),
    }
    values = {SECRET_ENV: secret, **CANARIES}
    if ctx.key is not None:
        values[ctx.key_env] = ctx.key
    for field, text in texts.items():
        for variable, value in values.items():
            assert value not in text, (
                f"{what}: the {expected.__name__}'s {field} holds the value of ${variable}; "
                f"redact secret values from what an error carries"
            )
    if name == "crash":
        _assert_crash_seen(error, texts["stderr_tail"], name, what)
    assert took < ROUND_BOUND, f"{what}: the step took {took:.1f}s to fail"
    _assert_nothing_left(ctx, tree, before, what)


async def _failing_turn(
    ctx: KitContext,
    tree: Path,
    resolved: Resolved,
    *,
    descriptor: Any,
    expected: type[Exception],
    what: str,
    secret: str,
) -> Any:
    """A turn with the kind's ``resolve_executable`` returning ``resolved``: the ``expected`` error
    it raised (any other outcome fails the round)."""
    harness = ctx.harness
    harness.resolve_executable = lambda env: resolved
    try:
        await ctx.turn(
            tree,
            "Say hello.",
            harness=descriptor,
            agents_env=(*ctx.plan.agents_env, SECRET_ENV),
        )
    except expected as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: the step raised {type(exc).__name__} instead of {expected.__name__}: "
            f"{_shown(str(exc), secret)}"
        ) from None
    finally:
        del harness.resolve_executable
        ctx.server.script.skip_remaining()
    raise AssertionError(f"{what}: the step succeeded; it must raise {expected.__name__}")


def _assert_crash_seen(error: Any, tail: str, name: str, what: str) -> None:
    """The crash's exit code, and the CLI's last stderr line (its secret redacted), reach the
    :class:`~jigs.errors.AgentCrashedError`."""
    assert error.returncode == EXIT_CODE, (
        f"{what}: AgentCrashedError.returncode is {error.returncode!r}, the CLI exited with "
        f"{EXIT_CODE}"
    )
    own = f"jigs-kit fake CLI ({name}): "
    assert own in tail, (
        f"{what}: AgentCrashedError.stderr_tail lacks the CLI's last stderr line: {tail[-300:]!r}"
    )
    assert f"{own}{REDACTED}" in tail, (
        f"{what}: ${SECRET_ENV} (given with agents_env) never reached the CLI's environment, "
        f"so its redaction is untested: {tail[-300:]!r}"
    )


def _assert_nothing_left(ctx: KitContext, tree: Path, before: int, what: str) -> None:
    """The failed step left the worktree unlocked and no process: no group, none launched since
    ``before``, none working in the worktree."""
    assert not worktree_locked(tree), f"{what}: the failed step left the worktree locked"
    assert not live_groups(), f"{what}: the failed step left processes: {live_groups()}"
    for launch in ctx.launches[before:]:
        assert not group_alive(launch.pgid), f"{what}: {launch.argv[0]} outlived the failed step"
    left = processes_under(tree)
    assert not left, f"{what}: the failed step left processes in the worktree: {left}"


def _shown(text: str, secret: str) -> str:
    return text.replace(secret, "<the secret>")[:500]
