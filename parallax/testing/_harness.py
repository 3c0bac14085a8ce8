"""`harness_jit`: how the checks compile their own small programs.

The battery compiles two kinds of programs: the env's (its reset, step and rollouts, which
are what a check is about) and its own bookkeeping (the key schedule of a rollout, the
policy's action samples, space membership of a batch of observations). The second kind runs
for microseconds on a handful of values, and its outputs are integers, comparisons and a
few uniform/Gumbel floats that XLA computes the same at every LLVM optimisation level. On
the CPU, `harness_jit` compiles those programs at XLA's backend optimisation level 0:
the key schedule of a rollout, mostly unrolled Threefry hashes, then compiles in about a
third of the time (1.8 s against 0.6 s for a 12-step schedule of 2 instances), and the
suite compiles about a hundred of them.

The env's programs are never compiled this way: they run as users run them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

__all__ = ["HARNESS_COMPILER_OPTIONS", "harness_jit"]

HARNESS_COMPILER_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}
"""The XLA options of the harness's own programs on the CPU backend."""


def harness_jit(fn: Callable[..., Any], *, lead: int = 0) -> Any:
    """`jax.jit(fn)` over `lead` leading batch axes (`fn` vmapped `lead` times), compiled
    with `HARNESS_COMPILER_OPTIONS` when the default backend is the CPU (other backends
    compile with their defaults)."""
    for _ in range(lead):
        fn = jax.vmap(fn)
    if jax.default_backend() == "cpu":
        return jax.jit(fn, compiler_options=HARNESS_COMPILER_OPTIONS)
    return jax.jit(fn)
