"""The conformance kit as a suite for third-party authors: named checks runnable alone, a pytest
helper with one test per check, read-only kinds, and a kind's ``api_key_env`` (its endpoint part)
reaching its agent without overriding ``env_names()``."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from urllib.parse import quote

import pytest
from jigs.descriptors import ModelEndpointFields
from jigs_harness_echo._harness import EchoDescriptor
from jigs_testing.conformance import check_harness

pytestmark = pytest.mark.anyio


class KeyedEcho(ModelEndpointFields, EchoDescriptor):
    """An echo descriptor that names a model key through the endpoint part, as a third-party
    kind's would; the echo kind declares no model route, so the key is the agent's to use."""


async def test_api_key_env_reaches_the_agent_without_overriding_env_names(
    tmp_path, monkeypatch, run_meta
):
    from jigs.steps import run_agent

    monkeypatch.setenv("THIRD_PARTY_KEY", "sk-third-party")
    descriptor = KeyedEcho(api_key_env="THIRD_PARTY_KEY")
    assert descriptor.model_key_env() == "THIRD_PARTY_KEY"
    assert descriptor.env_names() == {"THIRD_PARTY_KEY"}
    assert KeyedEcho().env_names() == frozenset()
    result = await run_agent(
        harness=descriptor, cwd=tmp_path, prompt="env", run=run_meta, agents_env=()
    )
    assert "THIRD_PARTY_KEY" in result.text.split()
    # a name the descriptor does not reference still does not pass
    monkeypatch.setenv("OTHER_KEY", "sk-other")
    again = await run_agent(
        harness=KeyedEcho(), cwd=tmp_path, prompt="env", run=run_meta, agents_env=()
    )
    assert "THIRD_PARTY_KEY" not in again.text.split()
    assert "OTHER_KEY" not in again.text.split()


async def test_one_check_runs_alone_and_an_unknown_name_is_refused(tmp_path):
    report = await check_harness("echo", tmp_path=tmp_path, only=["no_leftovers", "stale_resume"])
    assert [o.name for o in report.outcomes] == ["stale_resume", "no_leftovers"]  # CHECKS order
    with pytest.raises(ValueError, match=r"unknown conformance checks \['stale'\]"):
        await check_harness("echo", tmp_path=tmp_path, only=["stale"])


async def test_a_failing_check_is_named(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    plan_of = EchoHarness.demo_plan

    def forgetful(self, server):  # the first turn writes nothing
        return dataclasses.replace(plan_of(self, server), write_file=lambda _s, p, c: "hello")

    monkeypatch.setattr(EchoHarness, "demo_plan", forgetful)
    with pytest.raises(AssertionError, match=r"echo: check lock_and_close failed: .*conformance"):
        await check_harness("echo", tmp_path=tmp_path, only=["lock_and_close"])


def _read_only(plan_of, *, shell: bool, writes_anyway: bool = False):
    """The echo kind as a reviewer: its first turn reads (a tool call) and answers the content."""

    def plan(self, server):
        def answer(_server, path, content):
            # a read-only tool call, a second model request (the model reads its result), the answer
            read = quote("cat README.md", safe="")
            words = [f"sh:{read}", "calls:1", f"json:{quote(content, safe='')}"]
            if writes_anyway:
                words.insert(0, f"write:{path}:{quote(content, safe='')}")
            return " ".join(words)

        return dataclasses.replace(
            plan_of(self, server),
            writes=False,
            write_file=answer,
            run_command=plan_of(self, server).run_command if shell else None,
        )

    return plan


async def test_a_read_only_kind_passes_with_the_shell_checks_skipped_by_name(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    monkeypatch.setattr(EchoHarness, "demo_plan", _read_only(EchoHarness.demo_plan, shell=False))
    report = await check_harness("echo", tmp_path=tmp_path)
    # the echo descriptor names no model key: the credential proxy's checks skip too
    proxy = {"model_only", "key_not_relayed"}
    shell = {
        "worker_death",
        "process_view",
        "containment",
        "home_per_step",
        "tools_of_another_step",
        "interrupt",
        "steer",
    }
    # echo has no tool gate: tool_gate checks its refusal, approval_pending skips
    assert set(report.skipped) == {
        *shell,
        "no_model_refusal",
        *proxy,
        "approval_pending",
        "step_tools",
    }
    for name in shell:
        assert "has no shell tool" in report.skipped[name]
    assert "lock_and_close" in report.passed
    assert not list(tmp_path.rglob("conformance.txt"))


async def test_a_read_only_kind_with_a_shell_runs_the_shell_checks(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    monkeypatch.setattr(EchoHarness, "demo_plan", _read_only(EchoHarness.demo_plan, shell=True))
    report = await check_harness(
        "echo", tmp_path=tmp_path, only=["lock_and_close", "process_view", "event_stream"]
    )
    assert report.passed == ["lock_and_close", "process_view", "event_stream"]


async def test_a_kind_declared_read_only_that_writes_fails(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    monkeypatch.setattr(
        EchoHarness,
        "demo_plan",
        _read_only(EchoHarness.demo_plan, shell=False, writes_anyway=True),
    )
    with pytest.raises(AssertionError, match=r"declared read-only \(writes=False\) wrote"):
        await check_harness("echo", tmp_path=tmp_path, only=["lock_and_close"])


async def test_a_writing_kind_without_a_shell_still_fails_the_shell_checks(tmp_path, monkeypatch):
    from jigs_harness_echo._harness import EchoHarness

    plan_of = EchoHarness.demo_plan
    monkeypatch.setattr(
        EchoHarness,
        "demo_plan",
        lambda self, server: dataclasses.replace(plan_of(self, server), run_command=None),
    )
    with pytest.raises(
        AssertionError, match=r"check process_view failed: .*run_command is not set"
    ):
        await check_harness("echo", tmp_path=tmp_path, only=["process_view"])


SUITE = """
from jigs_testing.pytest_plugin import conformance_tests

test_echo = conformance_tests("echo", only=["descriptor_json", "stale_resume", "no_model_refusal"])
"""


def test_the_pytest_helper_makes_one_named_test_per_check(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jigs_testing.pytest_plugin"]\n')
    (tmp_path / "test_kind.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = ran.stdout
    assert ran.returncode == 0, out[-3000:] + ran.stderr[-2000:]
    for name in ("descriptor_json", "stale_resume", "no_model_refusal"):
        assert f"test_kind.py::test_echo[{name}] PASSED" in out, out[-3000:]
    assert "3 passed" in out
