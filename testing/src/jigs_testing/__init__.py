"""Test helpers for jigs: a scripted loopback model server that real agent CLIs can talk to.

``ModelServer`` speaks the Anthropic Messages, OpenAI Responses and Chat Completions APIs
(streamed or not) on 127.0.0.1, answers each model request with the next reply of a script
(:func:`text`, :func:`tool_call`, :func:`tool_calls`, :func:`error`, :func:`reply`), logs every
request without header values, and refuses outside connections when used as ``HTTPS_PROXY``.

:class:`DemoPlan` (:mod:`jigs_testing.plan`) is how a harness kind takes part in ``jigs demo`` and
the conformance kit (:mod:`jigs_testing.conformance`): a kind that defines
``demo_plan(server) -> DemoPlan | None`` satisfies :class:`SupportsDemo`. A kind declares the
config files its CLI reads by itself with ``config_files() -> Sequence[ConfigFile]``
(:mod:`jigs_testing.config_files`), which the kit plants hostile versions of.

"""

from __future__ import annotations

from ._server.record import RecordedRequest, WireFormat
from ._server.replies import (
    DynamicReply,
    ErrorSpec,
    Reply,
    ToolCall,
    error,
    reply,
    text,
    tool_call,
    tool_calls,
)
from ._server.script import Script
from ._server.script_file import ScriptError, load_script
from ._server.server import ModelServer
from .config_files import ConfigFile, Planted
from .plan import DemoPlan, SupportsDemo

__all__ = [
    "ConfigFile",
    "DemoPlan",
    "DynamicReply",
    "ErrorSpec",
    "ModelServer",
    "Planted",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "SupportsDemo",
    "ToolCall",
    "WireFormat",
    "error",
    "load_script",
    "reply",
    "text",
    "tool_call",
    "tool_calls",
]

_WHERE = {
    "DynamicReply": "replies",
    "ErrorSpec": "replies",
    "Reply": "replies",
    "ToolCall": "replies",
    "error": "replies",
    "reply": "replies",
    "text": "replies",
    "tool_call": "replies",
    "tool_calls": "replies",
    "RecordedRequest": "record",
    "WireFormat": "record",
    "Script": "script",
    "ScriptError": "script_file",
    "load_script": "script_file",
    "ModelServer": "server",
    "DemoPlan": "..plan",
    "SupportsDemo": "..plan",
}
