"""How a harness kind takes part in ``jigs demo`` and the conformance kit.

A kind returns a :class:`DemoPlan` from ``Harness.demo_plan(server)``: a descriptor pointed at the
local :class:`~jigs_testing.ModelServer`, the dummy variables it needs in the host environment, and
two scripted turns. :meth:`DemoPlan.write_file` queues the replies that make the agent create a
file with the CLI's *own* file-writing tool and returns the prompt; :meth:`DemoPlan.recall`
queues a reply computed from the resumed request (how many messages it carried) and returns the
prompt. :meth:`DemoPlan.run_command` queues the replies that make the agent run a shell command
with the CLI's *own* shell tool (the conformance kit's isolation checks: the command's output
reaches the model in the next request) and returns the prompt; ``None`` when the kind has no
shell tool, which the kit reports as a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jigs.descriptors import HarnessDescriptor

if TYPE_CHECKING:
    from jigs_testing._server.server import ModelServer

__all__ = [
    "DemoPlan",
    "scripted_command",
    "scripted_hang",
    "scripted_recall",
    "scripted_write",
]


def scripted_write(
    tool: str, arguments: Callable[[str, str], Mapping[str, Any]]
) -> Callable[[ModelServer, str, str], str]:
    """A ``write_file`` for kinds whose model calls a tool: the scripted model calls ``tool``
    with ``arguments(path, content)``, then answers with text once the tool has run."""

    def write(server: ModelServer, path: str, content: str) -> str:
        from jigs_testing import text, tool_call

        server.add(tool_call(tool, dict(arguments(path, content))), text(f"I wrote {path}."))
        return f"Create the file {path} containing {content!r}."

    return write


def scripted_command(
    tool: str, arguments: Callable[[str], Mapping[str, Any]]
) -> Callable[[ModelServer, str], str]:
    """A ``run_command`` for kinds whose model calls a shell tool: the scripted model calls
    ``tool`` with ``arguments(command)``, then answers with text once the tool has returned."""

    def run(server: ModelServer, command: str) -> str:
        from jigs_testing import text, tool_call

        server.add(tool_call(tool, dict(arguments(command))), text("The command has run."))
        return "Run the command you are given with your shell tool."

    return run


def scripted_recall(server: ModelServer) -> str:
    """The second turn: the model reports how many messages the resumed request carried."""
    from jigs_testing import reply, text

    server.add(
        reply(
            lambda req: text(
                f"I remember: this request carried {req.message_count} "
                f"messages, including the file I wrote."
            )
        )
    )
    return "What did you do in the previous turn?"


def scripted_hang(server: ModelServer) -> str:
    """A turn whose model endpoint hangs: the reply starts only after ten minutes."""
    from jigs_testing import text

    server.add(text("too late", delay=600))
    return "Say hello."


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """A kind's part in the demo: see the module docstring."""

    descriptor: HarnessDescriptor
    write_file: Callable[[ModelServer, str, str], str]
    recall: Callable[[ModelServer], str] = scripted_recall
    #: A prompt whose model request hangs (the conformance kit's idle_timeout check).
    hang: Callable[[ModelServer], str] = scripted_hang
    host_env: Mapping[str, str] = field(default_factory=dict)
    agents_env: tuple[str, ...] = ()
    #: ``run_command(server, command) -> prompt``: the agent runs ``command`` with its own shell
    #: tool (see :func:`scripted_command`); None when the kind's CLI has no shell tool.
    run_command: Callable[[ModelServer, str], str] | None = None
