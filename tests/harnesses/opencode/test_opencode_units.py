"""The opencode kind's own pieces, without its CLI: the decoder, the descriptor's refusals, the
config it writes and the session databases."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
from jigs.errors import AgentSessionError, DescriptorError
from jigs.events import (
    ModelCallStarted,
    SessionStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    UsageUpdated,
)
from jigs_harness_opencode import OpencodeDescriptor, OpencodeHarness
from jigs_harness_opencode._config import config
from jigs_harness_opencode._sessions import DB_NAME, SessionDirs, has_session
from jigs_harness_opencode._stream import OpencodeDecoder

SID = "ses_db5538aceffetPwaUaHtIYFDrI"


def _line(kind: str, **fields: object) -> dict[str, object]:
    return {"type": kind, "timestamp": 1, "sessionID": SID, **fields}


def _finish(reason: str, inp: int, out: int) -> dict[str, object]:
    tokens = {"input": inp, "output": out, "reasoning": 0, "cache": {"read": 2, "write": 0}}
    return _line("step_finish", part={"reason": reason, "tokens": tokens, "cost": 0.5})


def test_a_turn_with_a_tool_call_decodes_to_the_event_stream() -> None:
    tool = {
        "type": "tool",
        "tool": "write",
        "callID": "call_1",
        "state": {"status": "completed", "input": {"filePath": "a"}, "output": "Wrote."},
    }
    lines = [
        _line("step_start", part={}),
        _line("tool_use", part=tool),
        _finish("tool-calls", 10, 3),
        _line("step_start", part={}),
        _line("text", part={"text": "I wrote a."}),
        _finish("stop", 20, 4),
    ]
    decoder = OpencodeDecoder()
    events = [e for line in lines for e in decoder.decode(line)]
    assert [type(e) for e in events] == [
        SessionStarted,
        ModelCallStarted,
        ToolCallStarted,
        ToolCallFinished,
        UsageUpdated,
        ModelCallStarted,
        TextDelta,
        UsageUpdated,
        TurnCompleted,
    ]
    assert events[0] == SessionStarted(session_id=SID)
    usage = events[-2].usage
    # cache reads count as input in jigs' usage; costs add up over the steps
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (34, 7, 4)
    assert usage.cost_usd == 1.0
    assert events[-1].text == "I wrote a."


def test_errors_and_truncation_fail_the_turn() -> None:
    api = {"name": "APIError", "data": {"message": "bad key", "statusCode": 400}}
    failed = OpencodeDecoder().decode(_line("error", error=api))[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.reason == "api_error"
    assert "bad key" in failed.message
    aborted = OpencodeDecoder().decode(_line("error", error={"name": "MessageAbortedError"}))
    assert aborted[-1].reason == "aborted"
    assert OpencodeDecoder().decode(_finish("length", 1, 1))[-1].reason == "length"


def test_a_continued_turn_must_report_its_own_session() -> None:
    with pytest.raises(AgentSessionError):
        OpencodeDecoder(expected="ses_other0000000000000000000").decode(_line("step_start"))


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("permission", "--auto"),
        ("provider", "base_url"),
        ("plugin", "plugins"),
        ("mcp", "mcp_servers"),
        ("small_model", "title"),
    ],
)
def test_policy_keys_are_refused_with_the_reason(key: str, why: str) -> None:
    with pytest.raises(DescriptorError) as info:
        OpencodeDescriptor.from_data({"kind": "opencode", key: {}})
    assert why in str(info.value)
    assert info.value.key == key


def test_the_config_names_one_provider_at_the_proxy_and_turns_off_the_rest() -> None:
    descriptor = OpencodeDescriptor(
        model="m1", base_url="https://gw.example/v1", disabled_tools=("webfetch",)
    )
    data = config(descriptor, "http://127.0.0.1:9/tok", "placeholder", [])
    assert data["enabled_providers"] == ["jigs"]
    assert data["provider"]["jigs"]["options"] == {
        "baseURL": "http://127.0.0.1:9/tok",
        "apiKey": "placeholder",
    }
    assert data["model"] == data["small_model"] == "jigs/m1"
    assert data["permission"] == {"webfetch": "deny"}
    assert data["plugin"] == []
    assert data["mcp"] == {}
    assert json.loads(json.dumps(data)) == data


def _db(directory: Path, session_id: str) -> None:
    with contextlib.closing(sqlite3.connect(directory / DB_NAME)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE session (id TEXT)")
        conn.execute("INSERT INTO session VALUES (?)", (session_id,))
        conn.commit()
        # what opencode leaves: -wal and -shm beside the database
        assert (directory / f"{DB_NAME}-wal").exists()


def test_each_session_gets_its_own_database_and_a_fork_reads_only(tmp_path: Path) -> None:
    dirs = SessionDirs(tmp_path)
    fresh, ids = dirs.for_turn(None, fork=False)
    _db(fresh, SID)
    ids.append(SID)
    dirs.started(fresh, SID)
    dirs.close()
    assert has_session(tmp_path, SID)
    assert sorted(p.name for p in (tmp_path / SID).iterdir()) == [DB_NAME]  # one settled file
    before = (tmp_path / SID / DB_NAME).read_bytes()
    forked, _ = SessionDirs(tmp_path).for_turn(SID, fork=True)
    assert forked != tmp_path / SID
    assert (forked / DB_NAME).read_bytes() == before
    with pytest.raises(AgentSessionError):
        SessionDirs(tmp_path).for_turn("ses_missing0000000000000000", fork=True)
    assert not has_session(tmp_path, "../etc")


def test_resume_ids_shaped_like_tokens_are_the_kinds_own() -> None:
    import re

    from jigs.mcp import looks_like_secret

    assert looks_like_secret(SID)  # why the kind declares the shape (contract 2.1)
    assert re.fullmatch(OpencodeHarness.session_id_pattern or "", SID)
    assert not re.fullmatch(OpencodeHarness.session_id_pattern or "", "sk-" + SID)


@pytest.mark.anyio
async def test_a_worktree_with_opencode_project_config_is_refused(tmp_path: Path) -> None:
    # opencode's v2 config loader reads these whatever OPENCODE_DISABLE_PROJECT_CONFIG says
    from jigs.checks import CheckFailure, CheckOk
    from jigs_harness_opencode._checks import project_config_check, project_files

    repo = tmp_path / "repo"
    tree = repo / "sub"
    (tree / ".opencode" / "plugins").mkdir(parents=True)
    (repo / ".git").mkdir()
    assert isinstance(await project_config_check(tree).run(), CheckOk)  # empty dirs are harmless
    plugin = tree / ".opencode" / "plugins" / "x.ts"
    plugin.write_text("export default {}")
    above = repo / "opencode.jsonc"  # up to the repository's root
    above.write_text("{}")
    (tmp_path / "opencode.json").write_text("{}")  # beyond the root: not read
    assert project_files(tree) == [plugin, above]
    failed = await project_config_check(tree).run()
    assert isinstance(failed, CheckFailure)
    assert str(plugin) in failed.reason
    assert str(above) in failed.reason
