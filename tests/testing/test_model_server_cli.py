"""Script files and the ``jigs model-server`` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import jigs_testing
import pytest
from jigs_testing import ScriptError, load_script
from jigs_testing._server.cli import main

from ._sse import anthropic_body, parse_sse

SRC = Path(jigs_testing.__file__).resolve().parents[1]
CANARY = "sk-secret-canary"


def _write(tmp_path: Path, name: str, content: object) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_load_script_json(tmp_path):
    path = _write(
        tmp_path,
        "s.json",
        [
            "bare text",
            {"text": "hi", "delay": 0.5, "model": "m"},
            {"tool_call": {"name": "Bash", "arguments": {"command": "ls"}}, "text": "Looking."},
            {"tool_calls": [{"name": "a"}, {"name": "echo", "namespace": "mcp__s", "id": "c1"}]},
            {"error": {"status": 529, "message": "x", "in_stream": True}, "delay": 1},
            {"text": "cut", "cut_after": 3},
        ],
    )
    replies = load_script(path)
    assert [r.kind for r in replies] == [
        "text",
        "text",
        "tool_calls",
        "tool_calls",
        "error",
        "text",
    ]
    assert replies[0].text == "bare text"
    assert (replies[1].delay, replies[1].model) == (0.5, "m")
    assert replies[2].text == "Looking."
    assert json.loads(replies[2].tool_calls[0].arguments) == {"command": "ls"}
    assert replies[3].tool_calls[1].flat_name == "mcp__s__echo"
    assert replies[3].tool_calls[1].id == "c1"
    assert replies[4].error.status == 529
    assert replies[4].error.in_stream is True
    assert replies[4].delay == 1.0
    assert replies[5].cut_after == 3


def test_load_script_yaml(tmp_path):
    pytest.importorskip("yaml")
    path = _write(
        tmp_path, "s.yaml", "- hello\n- tool_call: {name: Bash, arguments: {command: ls}}\n"
    )
    replies = load_script(path)
    assert replies[0].text == "hello"
    assert replies[1].tool_calls[0].name == "Bash"


def test_yaml_without_pyyaml_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)
    path = _write(tmp_path, "s.yml", "- hello\n")
    with pytest.raises(ScriptError, match=r"PyYAML.*jigs-core\[yaml\]"):
        load_script(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"text": "x"}, "must be a list"),
        (["ok", {"txt": "typo"}], r"entry #1 .*txt.*Extra inputs"),
        (["ok", "ok", {"text": "x", "error": {"status": 500}}], "entry #2 .*cannot also have"),
        ([{"tool_call": {"arguments": {}}}], r"entry #0 .*tool_call\.name"),
        ([{"error": {"status": 200}}], r"entry #0 .*error\.status"),
        ([{"text": "x", "delay": -1}], r"entry #0 .*delay"),
        ([{}], "entry #0 .*needs text"),
        ([{"tool_call": {"name": "t", "arguments": "{bad"}}], "entry #0 .*not valid JSON"),
        ([5], "entry #0 must be a string or a mapping"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_scripts_name_the_entry(tmp_path, content, message):
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(ScriptError, match=message) as caught:
        load_script(path)
    assert str(path) in str(caught.value)


def test_missing_script_file(tmp_path):
    with pytest.raises(ScriptError, match="cannot read"):
        load_script(tmp_path / "absent.json")


def test_cli_rejects_a_bad_script(tmp_path, capsys):
    path = _write(tmp_path, "bad.json", [{"nope": 1}])
    assert main(["--script", str(path)]) == 2
    assert "entry #0" in capsys.readouterr().err


def test_cli_usage_errors_return_2(capsys):
    assert main(["--port", "not-a-number"]) == 2
    assert main(["--keep", "0"]) == 2
    assert "--keep must be at least 1" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "--script" in capsys.readouterr().out


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "jigs_testing._server.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_a_script_and_stops_cleanly(tmp_path, stop):
    script = _write(tmp_path, "s.json", [{"text": "from the cli"}, {"tool_call": {"name": "Bash"}}])
    process = _start(tmp_path, "--script", str(script), "--model", "cli-model")
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        with httpx.Client(base_url=url, timeout=10) as c:
            first = c.post(
                "/v1/messages?beta=true",
                json=anthropic_body(stream=True),
                headers={"x-api-key": CANARY, "authorization": f"Bearer {CANARY}"},
            )
            second = c.post("/v1/responses", json={"model": "m", "input": "x"})
            models = c.get("/v1/models")
        process.send_signal(stop)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out == "", "the URL is the only line on stdout"
    deltas = [e.json() for e in parse_sse(first.text) if e.name == "content_block_delta"]
    assert "".join(d["delta"]["text"] for d in deltas) == "from the cli"
    assert second.json()["output"][0]["name"] == "Bash"
    assert [m["id"] for m in models.json()["data"]] == ["cli-model"]
    lines = err.splitlines()
    assert any("#0 POST /v1/messages?beta=true anthropic" in line for line in lines), err
    assert any("#1 POST /v1/responses responses" in line for line in lines), err
    assert any("stopping on" in line for line in lines), err
    assert CANARY not in err, "a header value reached stderr"


def test_cli_port_in_use_exits_1(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _start(tmp_path, "--port", str(port))
        out, err = process.communicate(timeout=20)
    assert process.returncode == 1
    assert out == ""
    assert "cannot listen" in err


def test_the_documented_script_format_is_the_one_loaded(tmp_path):
    """docs/model-server.md's example script loads, and its key table names exactly the keys a
    script entry takes (unknown keys are refused)."""
    import re

    from jigs_testing._server.script_file import _Entry, _ErrorEntry, _ToolCallEntry

    page = (SRC.parents[1] / "docs" / "model-server.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert example is not None
    pytest.importorskip("yaml")
    replies = load_script(_write(tmp_path, "script.yaml", example.group(1)))
    assert len(replies) == 3
    keys_section = page.split("## Script files", 1)[1].split("```yaml", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", keys_section, re.M))
    assert documented == set(_Entry.model_fields)
    for model in (_ErrorEntry, _ToolCallEntry):
        for field in model.model_fields:
            assert f'"{field}"' in keys_section, field
