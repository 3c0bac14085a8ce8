"""How many threads XLA's CPU client runs a program on (`set_cpu_threads`, `cpu_threads`).

XLA:CPU executes a compiled program on an intra-op thread pool, sized by default to the
CPUs the process may use. A jitted `lax.scan` rollout of small per-step kernels (an env
batch of a few thousand) gains nothing from a second thread: the loop's work is handed
from one pool thread to the other about every other step, and each hand-off is a
sleep and a wake-up. On a 2-CPU machine that doubles the CPU time of a finance env's
rollout and makes its speed depend on where the scheduler puts the two threads (the
call-to-call spread in `docs/performance.md`). With one thread the hand-offs disappear.

The pool is sized once, when JAX creates its CPU client (the first computation), from
the `PJRT_NPROC` environment variable when it is set. `set_cpu_threads(n)` sets it and
refuses once the client exists, because it would then change nothing.

JAX can also present the CPU as several devices (`set_cpu_devices(k)`, JAX's
`jax_num_cpu_devices`). Each device runs its own program on its own thread, so a vector
env's batch split over `k` devices with `jax.shard_map`, each device stepping its slice
alone, keeps `k` cores busy where one program's small kernels keep about one busy
(`parallax bench ... --cpu-devices k`).

Holds: `set_cpu_threads(n)`, `cpu_threads()`, `set_cpu_devices(k)`.
"""

from __future__ import annotations

import operator
import os

__all__ = ["cpu_threads", "set_cpu_devices", "set_cpu_threads"]

_VARIABLE = "PJRT_NPROC"


def _backends_initialized() -> bool:
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def _positive_count(name: str, value: object) -> int:
    """`value` as an int >= 1, or a TypeError / ValueError naming `name` and the value."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int >= 1, got {value!r}")
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} must be an int >= 1, got {value!r} ({type(value).__name__})"
        ) from None
    if count < 1:
        raise ValueError(f"{name} must be an int >= 1, got {count}")
    return count


def cpu_threads() -> int | None:
    """The thread count asked of XLA's CPU client (`PJRT_NPROC`), or None for its default.

    Returns:
        The int in `PJRT_NPROC`, or None when it is unset or not an integer (XLA then
        uses one thread per CPU the process may run on).

    Example:
        >>> import os
        >>> from parallax import cpu_threads
        >>> cpu_threads() == (int(os.environ["PJRT_NPROC"]) if "PJRT_NPROC" in os.environ else None)
        True
    """
    value = os.environ.get(_VARIABLE)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def set_cpu_threads(threads: int) -> None:
    """Run XLA:CPU programs on `threads` threads; call it before JAX's first computation.

    One thread (`set_cpu_threads(1)`) is what an env rollout on the CPU wants: the finance
    envs' auto-resetting rollouts at N = 1024 then use 1.7-1.9x less CPU time per step
    and no longer vary with thread placement (`benchmarks/thread_handoffs.py`). To use
    several cores, split the batch over CPU devices instead (`set_cpu_devices`). Large
    single kernels (a big matmul, a batch of 10^6 envs) can prefer more threads. The setting is
    the process's: it applies to every JAX CPU computation, and leaves GPU and TPU
    programs alone. Setting `PJRT_NPROC=1` in the environment does the same without code.

    Args:
        threads: the pool's size, an int >= 1.

    Raises:
        TypeError: `threads` is not an int.
        ValueError: `threads` < 1.
        RuntimeError: JAX's backends already exist and were sized differently (the pool
            cannot be resized in a running process).

    Example:
        >>> import subprocess, sys
        >>> code = "import parallax, jax; parallax.set_cpu_threads(1); print(jax.numpy.ones(2).sum())"
        >>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        '2.0\\n'
    """
    count = _positive_count("threads", threads)
    if _backends_initialized():
        if cpu_threads() == count:
            return
        current = os.environ.get(_VARIABLE)
        raise RuntimeError(
            f"set_cpu_threads({count}) comes too late: JAX's backends already exist in this "
            f"process (its CPU thread pool was sized from {_VARIABLE}="
            f"{current if current is not None else 'unset: one thread per CPU'}). Call it "
            f"before the first JAX computation, or start the process with {_VARIABLE}={count}."
        )
    os.environ[_VARIABLE] = str(count)


def set_cpu_devices(devices: int) -> None:
    """Present the CPU as `devices` JAX devices; call it before JAX's first computation.

    It sets JAX's `jax_num_cpu_devices`. Each CPU device runs its programs on a thread of
    its own, so `devices` programs with no communication between them (a vector env's
    batch split over the devices with `jax.shard_map`) run at once, one per core: on
    2 cores the limit order book env at N = 1024 stepped about 1.7x faster as two devices
    of 512 envs than as one device of 1024 (`benchmarks/lob_speed.py --cpu-devices 2`).
    A program that communicates between the devices (`jax.jit` with sharded arrays, whose
    batch-wide reductions become collectives) gains less, and with one CPU thread
    (`set_cpu_threads(1)`) its devices can wait on each other for ever: split a rollout
    with `jax.shard_map`, as `parallax bench --cpu-devices` does.

    Args:
        devices: the number of CPU devices, an int >= 1.

    Raises:
        TypeError: `devices` is not an int.
        ValueError: `devices` < 1.
        RuntimeError: JAX's backends already exist with another number of CPU devices.

    Example:
        >>> import subprocess, sys
        >>> code = "import parallax, jax; parallax.set_cpu_devices(2); print(len(jax.devices('cpu')))"
        >>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        '2\\n'
    """
    count = _positive_count("devices", devices)
    import jax

    if _backends_initialized():
        existing = len(jax.devices("cpu"))
        if existing == count:
            return
        raise RuntimeError(
            f"set_cpu_devices({count}) comes too late: JAX's backends already exist in this "
            f"process with {existing} CPU device(s). Call it before the first JAX "
            "computation."
        )
    jax.config.update("jax_num_cpu_devices", count)
