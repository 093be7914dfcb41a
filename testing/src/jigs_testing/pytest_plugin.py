"""The jigs-testing pytest plugin: the ``model_server`` fixture (see :mod:`jigs_testing`) and
:func:`conformance_tests`, the conformance kit as one test per check.

Opt-in: installing jigs-testing registers nothing with pytest. Enable it in your ``conftest.py``::

    pytest_plugins = ["jigs_testing.pytest_plugin"]

Then a harness distribution's whole conformance suite is::

    from jigs_testing.pytest_plugin import conformance_tests

    test_mykind = conformance_tests("mykind")

which pytest collects as ``test_mykind[descriptor_json]``, ``test_mykind[stale_resume]``, ... (one
per :data:`jigs_testing.conformance.CHECKS` entry), each passing or failing by name; run one with
``pytest -k "test_mykind and worker_death"``. The tests are plain (synchronous) pytest tests: each
runs its check in an asyncio event loop of its own, so no async plugin or marker is needed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._server.pytest_fixture import model_server

if TYPE_CHECKING:
    from jigs.descriptors import HarnessDescriptor

__all__ = ["conformance_tests", "model_server"]


def conformance_tests(
    kind: str,
    *,
    only: Collection[str] | None = None,
    make_descriptor: Callable[[Any], HarnessDescriptor] | None = None,
) -> Callable[..., Any]:
    """A pytest test function, parametrized over the conformance checks (all of them, or those
    in ``only``), that runs each for ``kind`` with :func:`~jigs_testing.conformance.check_harness`
    in its own ``tmp_path``. Assign it to a module-level name starting with ``test``. A check
    skipped by design (a read-only kind, a kind without a model) passes and prints why (shown
    with ``pytest -rP``); it is also recorded in the test's ``user_properties``."""
    from jigs_testing.conformance import CHECKS

    unknown = sorted(set(only or ()) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown conformance checks {unknown}; the checks are {list(CHECKS)}")
    names = [name for name in CHECKS if only is None or name in set(only)]

    @pytest.mark.parametrize("check", names)
    def test_conformance(check: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        import anyio

        from jigs_testing.conformance import check_harness

        run = functools.partial(
            check_harness, kind, make_descriptor, tmp_path=tmp_path, only=[check]
        )
        report = anyio.run(run, backend="asyncio")
        for name, reason in report.skipped.items():
            request.node.user_properties.append((f"skipped:{name}", reason))
            print(f"{kind}: {name} skipped by design: {reason}")

    test_conformance.__name__ = f"test_{kind}_conformance"
    test_conformance.__qualname__ = test_conformance.__name__
    return test_conformance
