"""The suite's xdist groups keep their tests on one worker.

`make test` runs pytest on two xdist workers with `--dist loadgroup`. Files whose tests
share an expensive module fixture (a compiled LOB rollout, a battery run, two spawned
processes) carry an `xdist_group` mark so the fixture is built once, not once per worker.
With pytest 9.2 and pytest-xdist 3.8 the marks stopped working without any error
(pytest-dev/pytest-xdist#1386); these tests fail if that happens again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.xdist_group("suite_groups")


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(
        textwrap.dedent(
            """
            import pytest

            pytestmark = pytest.mark.xdist_group("together")

            @pytest.mark.parametrize("i", range(8))
            def test_member(i):
                pass
            """
        )
    )
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v"]
    run = subprocess.run(
        [*command, "-p", "no:cacheprovider", "test_grouped.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    workers = re.findall(r"\[(gw\d+)\].*PASSED", run.stdout)
    assert len(workers) == 8, run.stdout
    assert len(set(workers)) == 1, f"the group was split over {sorted(set(workers))}"


def test_this_test_carries_its_group_under_loadgroup(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("only an xdist worker of `--dist loadgroup` (as in `make test`) groups tests")
    assert request.node.nodeid.endswith("@suite_groups"), request.node.nodeid


def test_make_test_and_make_test_slow_split_the_suite_and_ci_runs_both():
    """`make test` deselects the `slow` tests and `make test-slow` selects exactly them, with
    the same pytest command; `.ci/run` runs both, so every test runs in CI."""
    root = os.path.join(os.path.dirname(__file__), os.pardir)
    with open(os.path.join(root, "Makefile")) as f:
        makefile = f.read()
    targets = dict(re.findall(r"^([\w-]+):[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.MULTILINE))
    assert '$(PYTEST) -m "not slow"' in targets["pytest"]
    assert "$(PYTEST) -m slow ||" in targets["test-slow"]
    with open(os.path.join(root, ".ci", "run")) as f:
        steps = [line.strip() for line in f if line.startswith("make ")]
    assert steps[:2] == ["make test", "make test-slow"], steps
