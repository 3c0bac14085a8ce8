"""Throughput figures of the validation report: the reference against the batched env.

- `measure_throughput(env_factory, ...)`: steps/s of the reference (eager, one instance,
  a Python loop) and of the batched env at each batch size (`parallax.bench.benchmark`'s
  jitted, donated `lax.scan` of random actions under same-step auto-reset).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ._reference import flatten_record, state_record

__all__ = ["measure_throughput"]


def _reference_rate(
    env_factory: Callable[[], Any], reference_factory: Callable[[], Any], steps: int, repeats: int
) -> dict[str, Any]:
    env = env_factory()
    reference = reference_factory()
    key = jax.random.key(0)
    initial = state_record(env.reset(key=key))
    keys = jax.random.split(jax.random.key(1), steps)
    batch = jax.tree.map(np.asarray, jax.vmap(lambda k: env.action_space.sample(key=k))(keys))
    actions = [jax.tree.map(lambda x, t=t: x[t], batch) for t in range(steps)]
    seconds = []
    for _ in range(repeats + 1):  # the first pass warms up
        reference.reset(key, initial)
        start = time.perf_counter()
        for action in actions:
            record = flatten_record(reference.step(action))
            if bool(record.get("termination", False)) or bool(record.get("truncation", False)):
                reference.reset(key, initial)
        seconds.append(time.perf_counter() - start)
    rate = statistics.median(steps / s for s in seconds[1:])
    return {"num_envs": 1, "steps": steps, "repeats": repeats, "steps_per_second": rate}


def measure_throughput(
    env_factory: Callable[[], Any],
    reference_factory: Callable[[], Any] | None = None,
    *,
    env_id: str | None = None,
    sizes: Sequence[int] = (1024, 8192),
    steps: int = 100,
    repeats: int = 3,
    reference_steps: int = 1000,
) -> dict[str, Any]:
    """Steps/s of the reference (eager, one env) and of the batched env at each size.

    Args:
        env_factory: `env_factory() -> env` (a single env).
        reference_factory: `reference_factory() -> Reference`, or None (no reference row).
        env_id: the registered id, if the env has one (else a temporary id is registered
            for the measurement and removed afterwards).
        sizes: the batch sizes N.
        steps: env steps per timed call of the batched scan.
        repeats: timed calls per measurement.
        reference_steps: reference steps per timed loop.

    Returns:
        `{"reference": {...} or None, "batched": [{num_envs, steps_per_second,
        compile_seconds, ...}, ...], "speedup": {N: batched / reference}}`, measured in the
        current x64 mode (`precision`).
    """
    from .._registry import _REGISTRY, register
    from ..bench import benchmark

    temporary = None
    if env_id is None:
        temporary = f"_parallax_check_throughput_{id(env_factory):x}"
        register(temporary, env_factory, override=True)
    batched = []
    try:
        for n in sizes:
            result = benchmark(
                env_id or temporary or "", int(n), steps=steps, repeats=repeats, progress=False
            )
            batched.append(
                {
                    "num_envs": int(n),
                    "steps": steps,
                    "repeats": repeats,
                    "steps_per_second": result["steps_per_second"],
                    "steps_per_second_min": result["steps_per_second_min"],
                    "steps_per_second_max": result["steps_per_second_max"],
                    "compile_seconds": result["compile_seconds"],
                }
            )
    finally:
        if temporary is not None:
            _REGISTRY.pop(temporary, None)
    reference = None
    if reference_factory is not None:
        reference = _reference_rate(env_factory, reference_factory, reference_steps, repeats)
    speedup = {}
    if reference is not None and reference["steps_per_second"] > 0:
        speedup = {
            str(row["num_envs"]): row["steps_per_second"] / reference["steps_per_second"]
            for row in batched
        }
    return {
        "precision": "x64" if jax.config.read("jax_enable_x64") else "f32",
        "reference": reference,
        "batched": batched,
        "speedup": speedup,
    }
