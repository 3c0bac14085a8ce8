"""`EnvSession`: what one check run holds, shared by the `check_env` rule groups.

- `EnvSession`: the env under test, its kind, the test driver, the key schedule, and the
  rollouts and compiled functions the rule groups reuse (built once, cached).
- `index_schedule`: one element of a stacked key schedule.
- The argument checks shared by every `check_*` function (at the bottom):
  `validate_common`, `check_interface`.

This module imports no rule module, so every rule module (and `_marl`, `_batch`,
`_reference`) may import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp

from .._wrappers.base import check_positive_int
from ._errors import CheckError
from ._rollout import (
    Driver,
    Policy,
    Rollout,
    Schedule,
    as_typed_key,
    inspect_env,
    make_policy,
)

__all__ = ["EnvSession", "check_interface", "index_schedule", "validate_common"]

_OWNER = "check_env"


# -- the session: one env, its schedule and compiled functions, shared by the groups ---------
class EnvSession:
    """One env under test, with the rollouts and compiled functions the check groups share.

    `check_env` builds one and runs the requested groups; the pytest battery keeps one per
    env and precision so that each named test reuses the compiled programs. Arguments are
    those of `check_env`.
    """

    def __init__(
        self,
        env: Any,
        *,
        key: Any = None,
        num_steps: int = 16,
        policy: Policy | None = None,
        autoreset: bool | None = None,
        num_keys: int = 4,
        disable_jit: bool = True,
    ) -> None:
        num_steps, policy, autoreset = validate_common(_OWNER, num_steps, policy, autoreset)
        if isinstance(num_keys, bool) or not isinstance(num_keys, int) or num_keys < 2:
            raise ValueError(f"{_OWNER}: num_keys must be an int >= 2, got {num_keys!r}")
        if not isinstance(disable_jit, bool):
            raise TypeError(f"{_OWNER}: disable_jit must be a bool, got {disable_jit!r}")
        key = as_typed_key(key, _OWNER)
        check_interface(env, _OWNER)
        self.env = env
        self.num_steps = num_steps
        self.num_keys = num_keys
        self.disable_jit = disable_jit
        self.user_policy = policy
        self.user_autoreset = autoreset
        k_probe, k_env, k_policy, self.k_other = jax.random.split(key, 4)
        probe = jax.eval_shape(lambda: env.reset(key=k_probe))
        self.kind = inspect_env(env, probe, autoreset, _OWNER)
        impl = jax.random.key_impl(key)
        self.driver = Driver(env, self.kind, make_policy(env, policy, impl), _OWNER, impl)
        policy_keys = self.driver.instance_keys(k_policy)
        env_key_list = [self.driver.instance_keys(k_env)] + [
            self.driver.instance_keys(jax.random.fold_in(self.k_other, i))
            for i in range(1, num_keys)
        ]
        self.sched_all = self.driver.schedule(
            jnp.stack(env_key_list), jnp.stack([policy_keys] * num_keys), num_steps
        )
        self.sched = index_schedule(self.sched_all, 0)
        self.traces = {"step": 0}
        self._cache: dict[str, tuple[bool, Any]] = {}

    def _cached(self, name: str, make: Callable[[], Any]) -> Any:
        if name not in self._cache:
            try:
                self._cache[name] = (True, make())
            except CheckError as error:
                self._cache[name] = (False, error)
        ok, value = self._cache[name]
        if not ok:
            raise value
        return value

    def eager(self) -> Rollout:
        """The eager rollout (structure-checked step by step)."""
        return self._cached(
            "eager", lambda: self.driver.eager(self.sched, disable_jit=self.disable_jit)
        )

    def vscan(self) -> Any:
        """`jax.jit(jax.vmap(driver.scan))`: one function object, so every batched rollout
        of the session with the same sizes (the vmapped rollout, the invariant sweep) runs
        one compiled program."""
        return self._cached("vscan", lambda: jax.jit(jax.vmap(self.driver.scan)))

    def vroll(self) -> Rollout:
        """`jax.jit(jax.vmap(lax.scan rollout))` over the `num_keys` env keys (host arrays)."""
        return self._cached("vroll", lambda: self.vscan()(self.sched_all).host())

    @contextlib.contextmanager
    def lent_step(self) -> Iterator[Any]:
        """`step_j()` lent to another check (`marl_rules`, `matches_reference`): the same
        compiled program, and the traces it causes are not counted for the recompilation
        check."""
        traced = self.traces["step"]
        try:
            yield self.step_j()
        finally:
            self.traces["step"] = traced

    def step_j(self) -> Any:
        """`jax.jit(env.step)`, counting its traces in `self.traces["step"]`."""

        def make() -> Any:
            def counted_step(state: Any, action: Any) -> Any:
                self.traces["step"] += 1
                return self.env.step(state, action)

            return jax.jit(counted_step)

        return self._cached("step_j", make)


def index_schedule(sched: Schedule, index: int) -> Schedule:
    """Element `index` of a schedule with a leading stacking axis."""
    return jax.tree.map(lambda x: x[index], sched)


# -- argument checks --------------------------------------------------------------------------
def validate_common(
    owner: str, num_steps: Any, policy: Any, autoreset: Any
) -> tuple[int, Policy | None, bool | None]:
    """Check the arguments shared by the `check_*` functions."""
    steps = check_positive_int(num_steps, "num_steps", owner)
    if policy is not None and not callable(policy):
        raise TypeError(
            f"{owner}: policy must be a callable policy(key, state) -> action, got {policy!r}"
        )
    if autoreset is not None and not isinstance(autoreset, bool):
        raise TypeError(f"{owner}: autoreset must be None, True or False, got {autoreset!r}")
    return steps, policy, autoreset


def check_interface(env: Any, owner: str) -> None:
    """The env has callable `reset`/`step` and spaces with `sample` and `contains`."""
    for name in ("reset", "step"):
        if not callable(getattr(env, name, None)):
            raise CheckError(
                f"{owner}/interface",
                f"the env has no callable `{name}`",
                expected=f"a method {name}",
                got=type(env).__name__,
            )
    for name in ("action_space", "observation_space"):
        space = getattr(env, name, None)
        if space is None or not (hasattr(space, "sample") and hasattr(space, "contains")):
            raise CheckError(
                f"{owner}/interface",
                f"`{name}` must be a parallax space (with `sample` and `contains`)",
                expected="a space",
                got=repr(space),
            )
