"""Running a step: the policy pipeline a step goes through, the turn engine (launching the CLI,
reading its lines, deadlines, limits), structured output, ``runner.model``, just-in-time MCP probes,
and what a step leaves behind to watch it by (the step log, structlog events, OpenTelemetry spans).

Every module here is private; this ``__init__`` imports none of them, so importing one does not
import its siblings.
"""
