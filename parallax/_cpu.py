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
(`parallax bench ... --devices k`). `use_all_cpu_cores()` makes one device a physical
core, the whole machine in one line (`parallax bench ... --devices all`).

Holds: `set_cpu_threads(n)`, `cpu_threads()`, `set_cpu_devices(k)`, `use_all_cpu_cores()`,
`physical_cores()` (the count `--devices all` and `use_all_cpu_cores` use).
"""

from __future__ import annotations

import operator
import os
from pathlib import Path

__all__ = [
    "cpu_threads",
    "physical_cores",
    "set_cpu_devices",
    "set_cpu_threads",
    "use_all_cpu_cores",
]

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
    with `jax.shard_map`, as `parallax bench --devices` does.

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


def physical_cores() -> int:
    """The physical cores this process may run on: one per core, not per SMT thread.

    The CPUs of the process's affinity mask (`os.sched_getaffinity`, where the OS has it;
    else `os.cpu_count()`), counted once per `(package, core)` pair that Linux's sysfs
    topology gives them, so the two hardware threads of one core count once. Where the
    topology cannot be read (not Linux, a restricted container), every usable CPU counts.

    Returns:
        An int >= 1.

    Example:
        >>> import os
        >>> from parallax._cpu import physical_cores
        >>> 1 <= physical_cores() <= (os.cpu_count() or 1)
        True
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity masks
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            cores.add((package, (topology / "core_id").read_text().strip()))
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def use_all_cpu_cores() -> int:
    """Present the CPU as one JAX device a physical core; call it before JAX's first computation.

    The one-line whole-machine path: `set_cpu_devices(physical_cores())`. A vector env's
    batch split over these devices with `jax.shard_map`, each device stepping its slice
    alone, keeps every core busy (Trading-v0 and Portfolio-v0 stepped 2.3-2.4x faster as
    two devices on two cores; `parallax bench ID --devices all` measures it beside one
    device). `parallax.shard_rollout`, one program over sharded arrays, gained nothing on
    the same machine: split with `jax.shard_map` as the performance page's "Two devices on
    two cores" shows. GPU and TPU devices are not changed; the setting is the process's.

    Returns:
        The number of CPU devices JAX will have (`len(jax.devices("cpu"))`).

    Raises:
        RuntimeError: JAX's backends already exist with another number of CPU devices.

    Example:
        >>> import subprocess, sys
        >>> code = "import jax, parallax; k = parallax.use_all_cpu_cores(); print(k == len(jax.devices('cpu')))"
        >>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        'True\\n'
    """
    count = physical_cores()
    set_cpu_devices(count)
    return count
