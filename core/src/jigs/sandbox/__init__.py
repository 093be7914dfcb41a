"""The per-step sandbox: what a step's agent may see of the machine and reach on the network.

Unless its descriptor opts out (``sandbox="off"``), every process a step launches runs in a
bubblewrap sandbox of its own (:func:`sandbox_problem` says whether the host allows it): the system
read-only, the worktree and the step's private dirs read-write, an empty ``HOME``, no
capabilities, and a network namespace in which only what jigs serves for the step (its
credential proxy, relays to its declared loopback MCP servers) can be reached.
"""

from jigs.sandbox._probe import bwrap_executable, sandbox_isolation, sandbox_problem
from jigs.sandbox._view import MASKED, NetworkMode, SandboxView

__all__ = [
    "MASKED",
    "NetworkMode",
    "SandboxView",
    "bwrap_executable",
    "sandbox_isolation",
    "sandbox_problem",
]
