"""`parallax.set_cpu_threads`: it sizes XLA:CPU's thread pool before JAX starts, refuses
once JAX has started, validates its argument, and `parallax bench --cpu-threads` uses it.
`parallax.set_cpu_devices` likewise, and the benchmark's batch split over devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax._bench import main as bench_main
from parallax._bench_runner import ParallaxRunner
from parallax.bench import benchmark

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


# -- set_cpu_devices, and the benchmark split over devices -----------------------------------
_DEVICE_COUNT = textwrap.dedent(
    """
    import jax, parallax
    parallax.set_cpu_devices(3)
    parallax.set_cpu_devices(3)  # what JAX already has once it has started: nothing to do
    print(len(jax.devices("cpu")), jax.numpy.ones(3).sum())
    """
)


def test_set_cpu_devices_makes_the_devices_before_jax_starts():
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "XLA_FLAGS")}
    out = subprocess.run(
        [sys.executable, "-c", _DEVICE_COUNT], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    assert out == ["3", "3.0"]


def test_set_cpu_devices_refuses_once_jax_has_started():
    jnp.ones(1).block_until_ready()
    have = len(jax.devices("cpu"))
    parallax.set_cpu_devices(have)  # nothing to do
    with pytest.raises(RuntimeError, match=rf"too late.*with {have} CPU device\(s\)"):
        parallax.set_cpu_devices(have + 1)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (0, ValueError, "devices must be an int >= 1, got 0"),
        (2.0, TypeError, r"got 2\.0 \(float\)"),
        (True, TypeError, "got True"),
    ],
)
def test_bad_device_counts_are_refused_by_name(value, error, match):
    with pytest.raises(error, match=match):
        parallax.set_cpu_devices(value)


def test_a_rollout_split_over_devices_equals_one_device_bit_for_bit():
    """The runner of `benchmark(devices=2)`: each device steps its half of the batch with
    its half of the same action draws, so the final state is the one device's."""
    assert len(jax.devices()) >= 2  # conftest gives this process four CPU devices
    kwargs = {"autoreset": True, "max_episode_steps": 3, "seed": 5, "env_kwargs": {}}
    one = ParallaxRunner("GridWorld-v0", 8, 7, **kwargs)
    two = ParallaxRunner("GridWorld-v0", 8, 7, devices=2, **kwargs)
    ended = {}
    for runner in (one, two):
        runner.prepare()  # (one warm-up call)
        ended[runner.devices] = [runner.run()[1] for _ in range(2)]
    assert ended[1] == ended[2] and sum(ended[1]) > 0  # episodes of 3 steps end
    a, b = jax.tree.leaves(one.state), jax.tree.leaves(two.state)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        x = jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        y = jax.random.key_data(y) if jnp.issubdtype(y.dtype, jax.dtypes.prng_key) else y
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert len(two.state.step_count.sharding.device_set) == 2  # really split


def test_benchmark_checks_the_devices():
    with pytest.raises(ValueError, match="num_envs=6 must be divisible by devices=4"):
        benchmark("GridWorld-v0", 6, steps=2, repeats=1, progress=False, devices=4)
    have = len(jax.devices())
    with pytest.raises(ValueError, match=rf"devices={have + 1} but JAX has {have} cpu device"):
        benchmark("GridWorld-v0", have + 1, steps=2, repeats=1, progress=False, devices=have + 1)
    with pytest.raises(ValueError, match="devices must be a positive int, got 0"):
        benchmark("GridWorld-v0", 4, steps=2, repeats=1, progress=False, devices=0)


def test_bench_splits_over_the_cpu_devices_it_has(capsys):
    argv = ["GridWorld-v0", "--num-envs", "4", "--steps", "2", "--repeats", "1", "--no-progress"]
    have = len(jax.devices("cpu"))
    assert bench_main([*argv, "--cpu-devices", "2", "--json"]) == (0 if have == 2 else 2)
    if have != 2:  # this process has its devices already: the CLI says so
        assert "set_cpu_devices(2) comes too late" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_main([*argv, "--cpu-devices", "3"])
    assert "--num-envs 4 is not divisible by --cpu-devices 3" in capsys.readouterr().err


def test_docstring_examples_run():
    import doctest

    from parallax import _cpu

    result = doctest.testmod(_cpu, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0, result
