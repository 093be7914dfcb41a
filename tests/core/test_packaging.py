"""Build the wheels and install them into a fresh virtual environment, as a user would."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(args, capture_output=True, text=True, cwd=cwd, check=False)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    assert uv is not None, "the packaging test needs uv (installed by .ci/run)"
    out = tmp_path_factory.mktemp("wheels")
    run(uv, "build", "--wheel", "--package", "jigs-core", "--out-dir", str(out))
    run(uv, "build", "--wheel", "--package", "jigs-harness-echo", "--out-dir", str(out))
    return out


def test_core_alone_installs_imports_and_lists_no_kinds_then_a_harness_appears(wheels, tmp_path):
    uv = shutil.which("uv")
    assert uv is not None
    venv = tmp_path / "venv"
    run(uv, "venv", "-q", "--python", "3.11", str(venv))
    python = venv / "bin" / "python"
    core = next(wheels.glob("jigs_core-*.whl"))
    echo = next(wheels.glob("jigs_harness_echo-*.whl"))
    run(uv, "pip", "install", "-q", "--python", str(python), str(core))
    assert run(str(python), "-c", "import jigs, jigs.steps, jigs.models; print(jigs.__version__)")
    assert json.loads(run(str(venv / "bin" / "jigs"), "harnesses", "--json")) == []
    assert (venv / "lib" / "python3.11" / "site-packages" / "jigs" / "py.typed").exists()

    run(uv, "pip", "install", "-q", "--python", str(python), str(echo))
    rows = json.loads(run(str(venv / "bin" / "jigs"), "harnesses", "--json"))
    assert [(r["kind"], r["distribution"], r["error"]) for r in rows] == [
        ("echo", "jigs-harness-echo", None)
    ]
