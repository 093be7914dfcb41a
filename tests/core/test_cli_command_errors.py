"""A CLI command jigs runs for set-up (a ``--version`` probe, ``jigs install``'s npm) that fails
raises ``CliCommandError``: a ``JigsError`` and a ``RuntimeError``, naming the command and its
exit code, with the environment's secrets redacted, and retryable only for an install."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import pytest
from jigs.errors import CliCommandError, JigsError

pytestmark = pytest.mark.anyio

SECRET = "sk-live-0123456789abcdefABCDEF"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


async def test_a_failing_version_probe_is_a_cli_command_error_without_the_secret(tmp_path):
    from jigs.executables import cli_version

    cli = _script(tmp_path / "cli", 'echo "token $API_TOKEN rejected" >&2\nexit 7\n')
    env = {"PATH": os.environ["PATH"], "API_TOKEN": SECRET}
    with pytest.raises(CliCommandError) as caught:
        await cli_version(cli, env)
    error = caught.value
    assert isinstance(error, JigsError)
    assert isinstance(error, RuntimeError)
    assert error.returncode == 7
    assert error.command == f"{cli} --version"
    assert error.retryable is False
    assert "exited with 7" in str(error)
    assert SECRET not in str(error)
    assert SECRET not in repr(pickle.loads(pickle.dumps(error)).args)


async def test_a_failing_pi_install_is_retryable_and_redacted(tmp_path, monkeypatch):
    import jigs_harness_pi._executable as pi_executable

    npm = _script(
        tmp_path / "npm", 'echo "401 for //registry/:_authToken=$NPM_TOKEN" >&2\nexit 3\n'
    )
    monkeypatch.setattr(pi_executable, "npm_argv", lambda: [str(npm)])
    monkeypatch.setenv("JIGS_DATA_DIR", str(tmp_path / "data"))
    env = {"PATH": os.environ["PATH"], "NPM_TOKEN": SECRET}
    with pytest.raises(CliCommandError) as caught:
        await pi_executable.install_pi(env)
    error = caught.value
    assert error.kind == "pi"
    assert error.returncode == 3
    assert error.retryable is True
    assert "exit code 3" in str(error)
    assert "_authToken=" in str(error)  # the output is shown ...
    assert SECRET not in str(error)  # ... with the token redacted
