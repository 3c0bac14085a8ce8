"""`parallax.set_cpu_threads`: it sizes XLA:CPU's thread pool before JAX starts, refuses
once JAX has started, validates its argument, and `parallax bench --cpu-threads` uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import pytest

import parallax
from parallax._bench import main as bench_main

_POOL_SIZE = textwrap.dedent(
    """
    import os, sys
    import jax, parallax
    parallax.set_cpu_threads(int(sys.argv[1]))
    jax.numpy.ones(3).sum().block_until_ready()  # creates the CPU client
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    print(names.count("tf_XLAEigen"), parallax.cpu_threads())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_the_pool_has_the_asked_number_of_threads():
    # one CPU device, as outside this suite (conftest asks XLA for four)
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "XLA_FLAGS")}
    for threads in (1, 3):
        out = subprocess.run(
            [sys.executable, "-c", _POOL_SIZE, str(threads)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout.split()
        assert out == [str(threads), str(threads)]


def test_it_refuses_once_jax_has_started(monkeypatch):
    jnp.ones(1).block_until_ready()  # the backends exist from here on
    monkeypatch.setenv("PJRT_NPROC", "2")
    assert parallax.cpu_threads() == 2
    parallax.set_cpu_threads(2)  # what the pool already has: nothing to do
    with pytest.raises(RuntimeError, match=r"too late.*PJRT_NPROC=2.*PJRT_NPROC=1"):
        parallax.set_cpu_threads(1)
    monkeypatch.delenv("PJRT_NPROC")
    assert parallax.cpu_threads() is None
    with pytest.raises(RuntimeError, match="one thread per CPU"):
        parallax.set_cpu_threads(1)
    assert "PJRT_NPROC" not in os.environ  # a refused call changes nothing


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (0, ValueError, "threads must be an int >= 1, got 0"),
        (-2, ValueError, "got -2"),
        (1.0, TypeError, r"got 1\.0 \(float\)"),
        ("1", TypeError, r"got '1' \(str\)"),
        (True, TypeError, "got True"),
    ],
)
def test_bad_thread_counts_are_refused_by_name(value, error, match):
    with pytest.raises(error, match=match):
        parallax.set_cpu_threads(value)


def test_bench_reports_the_pool_and_refuses_a_late_resize(capsys, monkeypatch):
    monkeypatch.delenv("PJRT_NPROC", raising=False)
    argv = ["GridWorld-v0", "--num-envs", "2", "--steps", "2", "--repeats", "1"]
    assert bench_main([*argv, "--json", "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["cpu_threads"] is None and result["backend"] == "cpu"
    assert bench_main([*argv, "--cpu-threads", "1", "--no-progress"]) == 2
    assert "parallax bench: error: set_cpu_threads(1) comes too late" in capsys.readouterr().err
