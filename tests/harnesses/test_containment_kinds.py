"""Every shipped kind's agent, attacking its machine from its own shell with its real CLI, is
contained by a sandboxed step (the kit's ``containment`` check)."""

import pytest
from jigs_testing.conformance import check_harness

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["claude", "codex", "pi", "opencode"])
async def test_kind_is_contained_by_the_sandbox(kind, require_cli, tmp_path):
    require_cli(kind)
    report = await check_harness(kind, tmp_path=tmp_path, only=["containment"])
    assert report.passed == ["containment"], report.skipped


@pytest.mark.parametrize("kind", ["claude", "codex", "pi", "opencode"])
async def test_what_an_agent_writes_in_its_home_reaches_no_later_step(kind, require_cli, tmp_path):
    require_cli(kind)
    report = await check_harness(kind, tmp_path=tmp_path, only=["home_per_step"])
    assert report.passed == ["home_per_step"], report.skipped


async def test_a_stolen_proxy_token_of_another_step_is_of_no_use(
    require_cli, tmp_path, run_meta, monkeypatch
):
    # the victim's step is open (its proxy serving, its URL with its token known to the attacker,
    # as if read from a leaked file); the attacker's agent, in a step of its own, sends a model
    # request there with its shell: its network namespace has no route to the victim's proxy, so
    # nothing reaches the model server and the victim's key is not spent
    import subprocess as sp
    from shlex import quote

    from jigs import RunMetadata
    from jigs.steps import create_agent_runner, run_agent
    from jigs_harness_claude import ClaudeHarness
    from jigs_testing import ModelServer
    from proxied_kinds import proxied

    require_cli("claude")
    monkeypatch.setenv("JIGS_TEST_VICTIM_KEY", "sk-victim")
    trees = []
    for name in ("attacker", "victim"):
        tree = tmp_path / name
        tree.mkdir()
        sp.run(["git", "init", "-q", str(tree)], check=True)
        trees.append(tree)
    async with ModelServer() as server:
        plan = ClaudeHarness().demo_plan(server)
        for name, value in plan.host_env.items():
            monkeypatch.setenv(name, value)
        victim = proxied("claude", "JIGS_TEST_VICTIM_KEY", "victim")(server)
        victim_run = RunMetadata(workflow_run_id=f"{run_meta.workflow_run_id}-victim")
        async with create_agent_runner(
            victim, cwd=trees[1], run=victim_run, agents_env=list(plan.agents_env)
        ) as opened:
            endpoint = opened._step.ctx.model_endpoint
            assert endpoint is not None
            url = f"{endpoint.base_url}/v1/messages"
            body = '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
            command = (
                f"curl -s -m 5 -o /dev/null -H 'x-api-key: stolen' "
                f"-H 'content-type: application/json' -d {quote(body)} {quote(url)}; "
                f"echo exit=$? > stolen.out"
            )
            before = len(server.requests)
            await run_agent(
                harness=plan.descriptor,
                cwd=trees[0],
                prompt=plan.run_command(server, command),
                run=run_meta,
                agents_env=list(plan.agents_env),
            )
            said = (trees[0] / "stolen.out").read_text()
            # the attacker's own CLI made its model calls; none of them is curl's
            stolen = [r for r in server.requests[before:] if "curl" in (r.user_agent or "")]
    assert said.strip() == "exit=7", said  # curl: "Failed to connect": no route, no listener
    assert not stolen
