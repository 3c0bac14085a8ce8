"""`check_batch_independence`: an instance alone and inside a batch behave bit-identically."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .._wrappers.base import check_positive_int
from .._wrappers.vmap import VmapWrapper
from ._compare import compare_rollouts
from ._report import CheckReport
from ._rollout import Driver, EnvKind, Policy, as_typed_key, inspect_env, make_policy
from ._session import check_interface, validate_common
from ._tolerance import EXACT, Tolerance

__all__ = ["check_batch_independence"]

_OWNER = "check_batch_independence"


def check_batch_independence(
    env: Any,
    num_envs: int | None = None,
    *,
    key: Any = None,
    num_steps: int = 16,
    policy: Policy | None = None,
    autoreset: bool | None = None,
    tolerance: Tolerance = EXACT,
    _solo_step: Any = None,
    _disable_jit: bool = True,
) -> CheckReport:
    """Check that instance i run alone and run inside a batch give identical trajectories.

    Every instance gets its own env key and policy key (so neighbours differ in both
    randomness and actions), and the rollout driver of `check_env` runs `num_steps` steps
    (finished episodes are reset unless the env auto-resets).

    - A single env: it is batched with `VmapWrapper(env, num_envs)` (default 8) and run
      under `jax.jit(lax.scan)`; each instance i is also run alone, the unbatched env
      with `jax.jit(env.step)` in a Python loop, with the same two keys. Trajectory i of the
      batch must equal the solo run i. This covers the batch-level machinery of the wrapper stack
      (selective reset, batch-level auto-reset, `max_resets_per_step`).
    - A vector env (anything with `num_envs`, e.g. a natively batched env): a run alone is
      emulated by a batch in which every slot replicates instance i (same keys, same
      actions); instance i of the mixed batch must equal it. This catches the seed's
      `[N]` versus `[N, 1]` broadcast bug, where a value of every neighbour leaks into
      each instance, and that a comparison at batch size 1 cannot see. A vector env must
      accept a batch of `num_envs` keys in `reset(key=...)`, as `VmapWrapper` does.

    Args:
        env: a single env, or a vector env.
        num_envs: batch size for a single env (int >= 2, default 8); for a vector env,
            None or its own `num_envs`.
        key: a PRNG key (typed or raw); `jax.random.key(0)` by default.
        num_steps: steps per rollout (positive int).
        policy: `policy(key, state) -> action` for one unbatched instance, or None.
        autoreset: as in `check_env`.
        tolerance: comparison rule, bit-identical (`EXACT`) by default.

    Returns:
        A `CheckReport` with the batch size and number of steps compared.

    Raises:
        CheckError: `check_batch_independence` with the first diverging step, the
            instance (`env_index`), the field, and both values.

    Example:
        >>> from parallax import AutoResetWrapper, TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import check_batch_independence
        >>> env = AutoResetWrapper(TimeLimit(GridWorld(), 4))
        >>> check_batch_independence(env, num_envs=3, num_steps=6).stats["num_envs"]
        3
    """
    num_steps, policy, autoreset = validate_common(_OWNER, num_steps, policy, autoreset)
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"{_OWNER}: tolerance must be a Tolerance, got {tolerance!r}")
    key = as_typed_key(key, _OWNER)
    check_interface(env, _OWNER)
    k_probe, k_env, k_policy = jax.random.split(key, 3)
    probe = jax.eval_shape(lambda: env.reset(key=k_probe))
    kind = inspect_env(env, probe, autoreset, _OWNER)
    impl = jax.random.key_impl(key)
    chosen = make_policy(env, policy, impl)
    report = CheckReport(_OWNER)

    if kind.vector:
        assert kind.num_envs is not None
        if num_envs is not None and num_envs != kind.num_envs:
            raise ValueError(
                f"{_OWNER}: num_envs must be None or the vector env's own num_envs="
                f"{kind.num_envs}, got {num_envs!r}"
            )
        n = kind.num_envs
        driver = Driver(env, kind, chosen, _OWNER, impl)
        env_keys = jax.random.split(k_env, n)
        policy_keys = jax.random.split(k_policy, n)
        run = jax.jit(driver.scan)
        mixed = run(driver.schedule(env_keys, policy_keys, num_steps)).host()
        for i in range(n):
            same_env = jnp.stack([env_keys[i]] * n)
            same_policy = jnp.stack([policy_keys[i]] * n)
            alone = run(driver.schedule(same_env, same_policy, num_steps)).host()
            compare_rollouts(
                _OWNER,
                mixed.select(i),
                alone.select(0),
                tolerance,
                _single(kind),
                f"instance {i} of a batch of {n} differs from a batch in which every instance "
                f"replicates instance {i}: a neighbour's data leaks into it",
                hint="look for a broadcast between a (num_envs,) and a (num_envs, 1) array "
                "(keepdims=True), or a reduction over the batch axis",
                env_index=i,
            )
    else:
        n = 8 if num_envs is None else check_positive_int(num_envs, "num_envs", _OWNER)
        if n < 2:
            raise ValueError(f"{_OWNER}: num_envs must be an int >= 2, got {n}")
        batched = VmapWrapper(env, n)
        batch_probe = jax.eval_shape(lambda: batched.reset(key=k_probe))
        batch_kind = inspect_env(batched, batch_probe, autoreset, _OWNER)
        solo = Driver(env, kind, chosen, _OWNER, impl)
        group = Driver(batched, batch_kind, chosen, _OWNER, impl)
        env_keys = jax.random.split(k_env, n)
        policy_keys = jax.random.split(k_policy, n)
        together = jax.jit(group.scan)(group.schedule(env_keys, policy_keys, num_steps)).host()
        solo_sched = solo.schedule(env_keys, policy_keys, num_steps)  # leading axis: instance
        step = _solo_step if _solo_step is not None else jax.jit(env.step)
        for i in range(n):
            alone = solo.eager(
                jax.tree.map(lambda x, i=i: x[i], solo_sched),
                step_fn=step,
                disable_jit=_disable_jit,  # the battery's option: its eager runs, op by op
            )
            compare_rollouts(
                _OWNER,
                together.select(i),
                alone,
                tolerance,
                kind,
                f"instance {i} inside VmapWrapper(env, {n}) differs from the same instance "
                "run alone (same keys, same actions)",
                hint="the batched path computes something the single env does not; look at "
                "batch-level resets and at values shared across the batch",
                env_index=i,
            )
    report.stats.update({"num_envs": n, "num_steps": num_steps, "vector": kind.vector})
    report.passed.append("batch_independence")
    return report


def _single(kind: EnvKind) -> EnvKind:
    return EnvKind(marl=kind.marl, vector=False, num_envs=None, autoreset=kind.autoreset)
