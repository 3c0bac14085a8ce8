"""`check_env`: the Parallax contract of one environment (single, vector or multi-agent).

Check groups (select with `check_env(..., checks=...)`):

- `"contract"`: spaces, reset state, observations and actions in their spaces, reward,
  flags, `step_count`, action masks, `info`.
- `"structure"`: identical tree structure, shapes and dtypes across reset and step, also
  through `lax.cond` and `jnp.where` between a reset and a step state.
- `"transforms"`: `jit`, `lax.scan` and `vmap` runs agree with the eager run.
- `"recompilation"`: a jitted step is traced once, and XLA compiles nothing on later steps.
- `"determinism"`: same keys give the same trajectory, `reset` depends on its key alone,
  different keys give different trajectories (the same ones for `deterministic=True`).
- `"marl"`: `check_marl_env` (multi-agent envs only).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace
from .._wrappers.base import check_positive_int
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import (
    Driver,
    EnvKind,
    Policy,
    Rollout,
    Schedule,
    action_mask_of,
    as_typed_key,
    inspect_env,
    make_policy,
    observation_of,
    reward_of,
)
from ._tolerance import EXACT, TRANSFORM_TOLERANCE, Tolerance
from ._trees import (
    describe_leaf,
    first_mismatch,
    flatten,
    path_str,
    structure_difference,
    to_numpy,
)

__all__ = ["CHECK_GROUPS", "check_env", "explain_not_contained"]

CHECK_GROUPS = ("contract", "structure", "transforms", "recompilation", "determinism", "marl")
_OWNER = "check_env"


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


# -- explaining a failed `contains` ------------------------------------------------------------
def explain_not_contained(space: Any, x: Any) -> tuple[str, str, Any]:
    """Why `space.contains(x)` is False: `(sub-path with element index, expected, got)`."""
    if isinstance(space, PyTreeSpace):
        try:
            leaves = space._treedef.flatten_up_to(x)  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            got_def = jax.tree_util.tree_structure(x)
            return "", f"a pytree shaped like {space._treedef}", f"{got_def}"
        paths = [path_str(p) for p, _ in jax.tree_util.tree_flatten_with_path(space.spaces)[0]]
        if len(paths) != len(leaves):  # a leaf space that is itself a pytree node
            paths = [f"[{i}]" for i in range(len(leaves))]
        for sub_path, sub_space, leaf in zip(paths, space._leaves, leaves):
            if not bool(sub_space.contains(leaf)):
                inner, expected, got = explain_not_contained(sub_space, leaf)
                return f".{sub_path}{inner}", expected, got
        return "", repr(space), "contains() returned False"
    arr = np.asarray(x)
    shape = tuple(getattr(space, "shape", ()))
    if arr.shape != shape:
        return "", f"shape {shape} ({space!r})", f"shape {arr.shape}"
    if isinstance(space, Box):
        kind_ok = (np.issubdtype(arr.dtype, np.floating) and space.dtype.kind == "f") or (
            space.dtype.kind in "iu" and (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool)
        )
        if not kind_ok:
            return "", f"a {space.dtype.kind}-kind dtype ({space!r})", str(arr.dtype)
        with np.errstate(invalid="ignore"):
            ok = (arr >= space.low) & (arr <= space.high)
        bad = np.argwhere(~ok)
        if bad.size:
            i = tuple(int(j) for j in bad[0])
            idx = f"[{', '.join(map(str, i))}]" if i else ""
            lo, hi = np.asarray(space.low)[i], np.asarray(space.high)[i]
            return idx, f"a value in [{lo}, {hi}] ({space!r})", arr[i]
    elif isinstance(space, Discrete | MultiDiscrete | MultiBinary):
        if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
            return "", f"an integer dtype ({space!r})", str(arr.dtype)
        if isinstance(space, Discrete):
            upper = np.full(arr.shape, space.n)
        elif isinstance(space, MultiDiscrete):
            upper = np.asarray(space.nvec)
        else:
            upper = np.full(arr.shape, 2)
        bad = np.argwhere((arr < 0) | (arr >= upper))
        if bad.size:
            i = tuple(int(j) for j in bad[0])
            idx = f"[{', '.join(map(str, i))}]" if i else ""
            return idx, f"an integer in [0, {int(upper[i]) - 1}] ({space!r})", arr[i]
    return "", repr(space), "contains() returned False"


# -- helpers -------------------------------------------------------------------------------------
def _batch_index(index: tuple[int, ...], kind: EnvKind) -> int | None:
    return index[1] if kind.vector else None


def _slice(tree: Any, index: tuple[int, ...]) -> Any:
    return jax.tree.map(lambda x: x[index], tree)


@functools.lru_cache(maxsize=64)
def _batched_contains(space: Any, lead: int) -> Callable[[Any], Any]:
    fn = space.contains
    for _ in range(lead):
        fn = jax.vmap(fn)
    return jax.jit(fn)


def _contains_all(space: Any, tree: Any, lead: int) -> np.ndarray:
    try:
        fn = _batched_contains(space, lead)
    except TypeError:  # an unhashable space
        fn = _batched_contains.__wrapped__(space, lead)
    return np.asarray(fn(tree))


def _check_in_space(
    check: str,
    space: Any,
    tree: Any,
    kind: EnvKind,
    field: str,
    describe: Callable[[int], str],
    step_offset: int,
) -> None:
    lead = 1 + int(kind.vector)
    ok = _contains_all(space, tree, lead)
    if ok.all():
        return
    index = tuple(int(i) for i in np.argwhere(~ok)[0])
    value = jax.tree.map(np.asarray, _slice(tree, index))
    sub, expected, got = explain_not_contained(space, value)
    raise CheckError(
        check,
        describe(index[0]),
        step=index[0] + step_offset,
        env_index=_batch_index(index, kind),
        field=field + sub,
        expected=expected,
        got=got,
    )


# -- the contract group --------------------------------------------------------------------------
def _check_contract(env: Any, kind: EnvKind, roll: Rollout, report: CheckReport) -> None:
    states, pre, actions = roll.states, roll.pre, roll.actions
    num_agents = int(getattr(env, "num_agents", 0) or 0)
    batch = kind.batch_shape

    # info is a dict, on every state (the structure check made it the same dict everywhere)
    if not isinstance(states.info, dict):
        raise CheckError(
            f"{_OWNER}/info",
            "`info` must be a dict (with the same keys on every reset and step)",
            step=0,
            field="info",
            expected="dict",
            got=type(states.info).__name__,
        )

    # dtypes and shapes of the episode fields
    T1 = jnp.shape(states.termination)[0]

    def check_leaf(field: str, value: Any, dtypes: tuple[Any, ...], shape: tuple[int, ...]) -> None:
        arr_dtype = jnp.result_type(value)
        per_step_shape = tuple(jnp.shape(value))[1:]
        if arr_dtype not in dtypes or per_step_shape != shape:
            allowed = " or ".join(str(np.dtype(d)) for d in dtypes)
            raise CheckError(
                f"{_OWNER}/{field.split('.')[-1] if field != 'agents.reward' else 'reward'}",
                f"`{field}` must be {allowed} with shape {shape}"
                + (" (one value per env of the batch)" if kind.vector else ""),
                step=0,
                field=field,
                expected=f"{allowed}{list(shape)}",
                got=f"{np.dtype(arr_dtype)}{list(per_step_shape)}",
            )

    reward_shape = (*batch, num_agents) if kind.marl and num_agents else batch
    if kind.marl and not num_agents:
        reward_shape = (*batch, *jnp.shape(states.agents.active)[1 + len(batch) :])
    reward_field = "agents.reward" if kind.marl else "reward"
    check_leaf(reward_field, reward_of(states), (jnp.float32, jnp.float64), reward_shape)
    check_leaf("termination", states.termination, (jnp.bool_,), batch)
    check_leaf("truncation", states.truncation, (jnp.bool_,), batch)
    check_leaf("step_count", states.step_count, (jnp.int32,), batch)
    report.passed.append("dtypes")

    term = np.asarray(states.termination)
    trunc = np.asarray(states.truncation)
    count = np.asarray(states.step_count)
    reward = np.asarray(reward_of(states))
    pre_count = np.asarray(pre.step_count)
    pre_done = np.asarray(pre.termination) | np.asarray(pre.truncation)

    # the reset state
    for name, flags in (("termination", term), ("truncation", trunc)):
        if flags[0].any():
            env_i = int(np.argwhere(np.atleast_1d(flags[0]))[0][0]) if kind.vector else None
            raise CheckError(
                f"{_OWNER}/reset",
                "a freshly reset state must not be done",
                step=0,
                env_index=env_i,
                field=name,
                expected=False,
                got=True,
            )
    if (count[0] != 0).any():
        env_i = int(np.argwhere(np.atleast_1d(count[0] != 0))[0][0]) if kind.vector else None
        got = count[0][env_i] if env_i is not None else count[0]
        raise CheckError(
            f"{_OWNER}/step_count",
            "`step_count` must be 0 after reset",
            step=0,
            env_index=env_i,
            field="step_count",
            expected=0,
            got=got,
        )
    report.passed.append("reset")

    # observations in the observation space: reset, every step, every driver reset
    obs_field = "agents.observation" if kind.marl else "observation"
    _check_in_space(
        f"{_OWNER}/observation_in_space",
        env.observation_space,
        observation_of(states),
        kind,
        obs_field,
        lambda t: (
            f"the observation at step {t} is not in observation_space"
            + (" (the reset state)" if t == 0 else "")
        ),
        0,
    )
    _check_in_space(
        f"{_OWNER}/observation_in_space",
        env.observation_space,
        observation_of(pre),
        kind,
        obs_field,
        lambda t: (
            f"the observation of the state passed to step {t + 1} (reset by the test "
            "driver after the previous episode ended) is not in observation_space"
        ),
        1,
    )
    report.passed.append("observation_in_space")

    # sampled actions belong to the action space (tests the space and the policy)
    _check_in_space(
        f"{_OWNER}/action_in_space",
        env.action_space,
        actions,
        kind,
        "action",
        lambda t: f"the action of step {t + 1} (from the policy) is not in action_space",
        1,
    )
    report.passed.append("action_in_space")

    # reward finite
    finite = np.isfinite(reward)
    if not finite.all():
        index = tuple(int(i) for i in np.argwhere(~finite)[0])
        lead = 1 + int(kind.vector)
        raise CheckError(
            f"{_OWNER}/reward",
            "the reward must be finite",
            step=index[0],
            env_index=_batch_index(index, kind),
            field=reward_field + (f"[{', '.join(map(str, index[lead:]))}]" if index[lead:] else ""),
            expected="a finite float",
            got=reward[index],
        )
    report.passed.append("reward")
    report.passed.append("flags")

    # step_count increments by one each step (auto-reset restarts at 0)
    stepped = count[1:]
    expected = pre_count + 1
    ok = stepped == expected
    if kind.autoreset:
        restarted = (stepped == 0) & ((term[1:] | trunc[1:]) | pre_done)
        ok |= restarted
    if not ok.all():
        index = tuple(int(i) for i in np.argwhere(~ok)[0])
        raise CheckError(
            f"{_OWNER}/step_count",
            "`step_count` must increase by exactly 1 on every step (TimeLimit relies on it)"
            + (
                "; an auto-reset may restart it at 0 when an episode ends" if kind.autoreset else ""
            ),
            step=index[0] + 1,
            env_index=_batch_index(index, kind),
            field="step_count",
            expected=expected[index],
            got=stepped[index],
        )
    report.passed.append("step_count")

    # action masks: boolean, at least one legal action per slot
    masks = action_mask_of(states)
    if masks is not None:
        for path, leaf in flatten(masks).items():
            field = ("agents.action_mask" if kind.marl else "action_mask") + (
                "" if path == "<root>" else f".{path}"
            )
            arr = np.asarray(leaf)
            if arr.dtype != np.bool_:
                raise CheckError(
                    f"{_OWNER}/action_mask",
                    "an action mask must be a bool array",
                    step=0,
                    field=field,
                    expected="bool",
                    got=str(arr.dtype),
                )
            none_legal = ~arr.any(axis=-1)
            if none_legal.any():
                index = tuple(int(i) for i in np.argwhere(none_legal)[0])
                lead = 1 + int(kind.vector)
                slot = index[lead:]
                raise CheckError(
                    f"{_OWNER}/action_mask",
                    "every action mask must allow at least one action"
                    + (f" (agent slot {slot[0]})" if kind.marl and slot else ""),
                    step=index[0],
                    env_index=_batch_index(index, kind),
                    field=field + (f"[{', '.join(map(str, slot))}]" if slot else ""),
                    expected="at least one True",
                    got=arr[index],
                )
        report.passed.append("action_mask")
    report.stats["steps"] = int(T1) - 1
    report.stats["episodes_ended"] = int((term[1:] | trunc[1:]).sum())


# -- the structure group ---------------------------------------------------------------------------
def _check_cond_where(driver: Driver, sched: Schedule) -> None:
    """`lax.cond` and `jnp.where` between a reset state and a step state (traced, not run)."""
    restart0 = sched.restart[0]
    prepared0 = jax.tree.map(lambda x: x[0], sched.prepared)

    def reset_and_step() -> tuple[Any, Any]:
        s0 = driver.first_reset(sched.first)
        _, _, s1 = driver.transition(restart0, prepared0, s0)
        return s0, s1

    def cond_fn(pred: Any) -> Any:
        s0, s1 = reset_and_step()
        return jax.lax.cond(pred, lambda: s0, lambda: s1)

    def where_fn(pred: Any) -> Any:
        s0, s1 = reset_and_step()
        return jax.tree.map(lambda x, y: jnp.where(pred, x, y), s0, s1)

    s0, s1 = jax.eval_shape(reset_and_step)
    for label, fn in (
        ("lax.cond(pred, reset state, step state)", cond_fn),
        ("jnp.where(pred, reset state, step state)", where_fn),
    ):
        try:
            out = jax.eval_shape(fn, jnp.bool_(True))
        except (TypeError, ValueError) as error:
            first = str(error).strip().splitlines()[0]
            diff = structure_difference(s0, s1)
            raise CheckError(
                f"{_OWNER}/structure",
                f"{label} failed: the reset and step states cannot be combined ({first})",
                step=1,
                field=diff[0] if diff else None,
                expected=f"{diff[1]} (as after reset)" if diff else None,
                got=diff[2] if diff else None,
            ) from error
        diff = structure_difference(s1, out)
        if diff is not None:
            raise CheckError(
                f"{_OWNER}/structure",
                f"{label} changed the tree structure, shape or dtype",
                step=1,
                field=diff[0],
                expected=diff[1],
                got=diff[2],
            )


# -- comparing rollouts ----------------------------------------------------------------------------
def compare_rollouts(
    check: str,
    got: Rollout,
    expected: Rollout,
    tolerance: Tolerance,
    kind: EnvKind,
    message: str,
    *,
    keys: bool = True,
    hint: str | None = None,
    env_index: int | None = None,
) -> None:
    """Raise `CheckError(check)` at the first difference between two rollouts.

    `env_index` names the batch instance when the rollouts are one instance of a batch.
    """
    flat_got, flat_exp = got.flat(keys=keys), expected.flat(keys=keys)
    states_got = {k: v for k, v in flat_got.items() if k.startswith("state.")}
    states_exp = {k: v for k, v in flat_exp.items() if k.startswith("state.")}
    acts_got = {k: v for k, v in flat_got.items() if k.startswith("action")}
    acts_exp = {k: v for k, v in flat_exp.items() if k.startswith("action")}
    m_state = first_mismatch(
        states_got, states_exp, tolerance, time_axis=True, batch_axis=kind.vector
    )
    m_act = first_mismatch(acts_got, acts_exp, tolerance, time_axis=True, batch_axis=kind.vector)
    candidates = []
    if m_state is not None:
        candidates.append((m_state.time or 0, 1, m_state))
    if m_act is not None:  # action index t is the input of step t + 1
        candidates.append(((m_act.time or 0) + 1, 0, m_act))
    if not candidates:
        return
    step, _, m = min(candidates, key=lambda c: (c[0], c[1]))
    field = m.field_with_index
    field = field[len("state.") :] if field.startswith("state.") else field
    raise CheckError(
        check,
        f"{message} (rule: {m.rule})",
        step=step,
        env_index=m.env if env_index is None else env_index,
        field=field,
        expected=m.expected,
        got=m.got,
        hint=hint,
    )


# -- recompilation -------------------------------------------------------------------------------
class _CompileCounter:
    """Counts XLA backend compilations while active (a `jax.monitoring` listener)."""

    _EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self) -> None:
        self.count = 0

    def _listen(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == self._EVENT:
            self.count += 1

    def __enter__(self) -> _CompileCounter:
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc: object) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)


def _aval_change(a: Any, b: Any) -> tuple[str, str, str] | None:
    fa, fb = flatten(a), flatten(b)
    for path, leaf in fa.items():
        if path not in fb:
            return path, describe_leaf(leaf), "no such field"
        da, db = describe_leaf(leaf), describe_leaf(fb[path])
        if da != db:
            return path, da, db
    for path in fb:
        if path not in fa:
            return path, "no such field", describe_leaf(fb[path])
    return None


def _check_recompilation(
    driver: Driver,
    step_j: Any,
    traces: dict[str, int],
    sched: Schedule,
    disable_jit: bool,
    report: CheckReport,
) -> None:
    """`step_j = jax.jit(env.step)` is traced once over five calls; nothing compiles later."""
    calls = min(5, int(np.shape(sched.restart)[0]))
    with jax.disable_jit(disable_jit):
        state = driver.first_reset(sched.first)  # keeps reset's exact types, weak ones included
    traced_before = traces["step"]
    inputs = [state]
    compiles = _CompileCounter()
    for t in range(calls):
        prepared = jax.tree.map(lambda x, t=t: x[t], sched.prepared)
        with jax.disable_jit(disable_jit):  # the inputs, outside the counted region
            pre = driver.restart(sched.restart[t], state, eager=True)
            action = driver.act(prepared, pre)
        if t == 0:
            state = jax.block_until_ready(step_j(pre, action))
        else:
            with compiles:
                state = jax.block_until_ready(step_j(pre, action))
        inputs.append(state)
    # the first call may reuse a trace made earlier (same input types): count it as one
    traces_now = max(traces["step"] - traced_before, 0) + int(traced_before > 0)
    if traces_now > 1:
        change = None
        for i in range(len(inputs) - 1):
            change = _aval_change(inputs[i], inputs[i + 1])
            if change is not None:
                break
        field, before, after = change if change else (None, None, None)
        weak = before is not None and after is not None and "~" in (before + after)
        hint = (
            "`~` marks a weakly typed value (e.g. a Python float such as `reward=0.0` in "
            "reset); return the same concrete dtype from reset and step (jnp.float32(0.0))"
            if weak
            else "reset and step must return identical types; a Python-side value that "
            "changes between calls also forces a retrace"
        )
        raise CheckError(
            f"{_OWNER}/recompilation",
            f"jax.jit(env.step) was traced {traces_now} times for {len(inputs) - 1} calls "
            "with inputs of unchanged shapes; it must be traced once",
            step=2,
            field=field,
            expected=f"{before} (the type at the previous step)" if before else None,
            got=after,
            hint=hint,
        )
    if compiles.count:
        raise CheckError(
            f"{_OWNER}/recompilation",
            f"XLA compiled {compiles.count} program(s) while later steps ran through the "
            "already-compiled jax.jit(env.step)",
            step=2,
            expected="0 compilations",
            got=f"{compiles.count} compilations",
            hint="something inside step calls jax.jit on a new function, or keeps state",
        )
    report.stats["step_traces"] = traces_now
    report.passed.append("recompilation")


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
        self.sched = _index_schedule(self.sched_all, 0)
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

    def vroll(self) -> Rollout:
        """`jax.jit(jax.vmap(lax.scan rollout))` over the `num_keys` env keys (host arrays)."""
        return self._cached(
            "vroll", lambda: jax.jit(jax.vmap(self.driver.scan))(self.sched_all).host()
        )

    def step_j(self) -> Any:
        """`jax.jit(env.step)`, counting its traces in `self.traces["step"]`."""

        def make() -> Any:
            def counted_step(state: Any, action: Any) -> Any:
                self.traces["step"] += 1
                return self.env.step(state, action)

            return jax.jit(counted_step)

        return self._cached("step_j", make)

    def run(
        self,
        group: str,
        report: CheckReport,
        *,
        tolerance: Tolerance = TRANSFORM_TOLERANCE,
        deterministic: bool = False,
    ) -> None:
        """Run one check group, appending to `report`; raise `CheckError` on failure."""
        kind, driver = self.kind, self.driver
        if group == "contract":
            _check_contract(self.env, kind, self.eager(), report)
        elif group == "structure":
            self.eager()
            _check_cond_where(driver, self.sched)
            report.passed.append("structure")
        elif group == "transforms":
            self._run_transforms(tolerance, report)
        elif group == "recompilation":
            _check_recompilation(
                driver, self.step_j(), self.traces, self.sched, self.disable_jit, report
            )
        elif group == "determinism":
            eager = self.eager()
            again = driver.eager(self.sched, disable_jit=self.disable_jit)
            compare_rollouts(
                f"{_OWNER}/determinism",
                again,
                eager,
                EXACT,
                kind,
                "a second eager rollout with the same keys differs from the first",
                hint="reset/step must be pure: no Python-side state, no global RNG",
            )
            with jax.disable_jit(self.disable_jit):
                _check_reset_purity(driver, self.sched, _index_schedule(self.sched_all, 1), kind)
            _check_key_sensitivity(self.vroll(), kind, self.num_keys, deterministic, report)
            report.passed.extend(["determinism", "reset_purity", "key_sensitivity"])
        elif group == "marl":
            if not kind.marl:
                return
            from ._marl import check_marl_env

            report.merge(
                check_marl_env(
                    self.env,
                    key=self.k_other,
                    num_steps=self.num_steps,
                    policy=self.user_policy,
                    autoreset=self.user_autoreset,
                    _step_fn=self.step_j(),
                )
            )
        else:
            raise ValueError(f"{_OWNER}: unknown check group {group!r}; use one of {CHECK_GROUPS}")

    def _run_transforms(self, tolerance: Tolerance, report: CheckReport) -> None:
        kind, driver = self.kind, self.driver
        eager, vroll = self.eager(), self.vroll()
        jitted = driver.eager(self.sched, step_fn=self.step_j(), disable_jit=self.disable_jit)
        compare_rollouts(
            f"{_OWNER}/jit",
            jitted,
            eager,
            tolerance,
            kind,
            "the rollout with jax.jit(env.step) differs from the eager rollout",
            hint="Python-side state, or Python control flow on values, behaves differently "
            "when traced; keep reset/step pure",
        )
        try:
            compare_rollouts(
                f"{_OWNER}/vmap",
                vroll.select(0, axis=0),
                eager,
                tolerance,
                kind,
                "instance 0 of the jax.jit(jax.vmap(lax.scan)) rollout differs from the eager "
                "rollout",
            )
        except CheckError:
            # Tell lax.scan and vmap apart: run the scan alone (only on failure).
            scanned = jax.jit(driver.scan)(self.sched).host()
            compare_rollouts(
                f"{_OWNER}/scan",
                scanned,
                eager,
                tolerance,
                kind,
                "the jax.jit(lax.scan) rollout differs from the eager rollout",
            )
            raise
        report.passed.extend(["jit", "scan", "vmap"])


# -- check_env ---------------------------------------------------------------------------------
def check_env(
    env: Any,
    *,
    key: Any = None,
    num_steps: int = 16,
    policy: Policy | None = None,
    autoreset: bool | None = None,
    deterministic: bool = False,
    num_keys: int = 4,
    tolerance: Tolerance = TRANSFORM_TOLERANCE,
    checks: Iterable[str] = CHECK_GROUPS,
    disable_jit: bool = True,
) -> CheckReport:
    """Check that `env` keeps the Parallax contract; raise `CheckError` at the first breach.

    The env is run from a reset for `num_steps` steps with actions from `policy` (by default
    uniform over `action_space`, or over the legal actions when states carry a boolean
    `action_mask` for a `Discrete` space). When an episode ends and the env does not restart
    it itself (`autoreset`), the test driver resets it with a fresh key before the next
    step, because stepping a finished episode is undefined. What is checked, by group:

    - `"contract"`: `reset` returns a `State`/`MARLState`; its flags are False and
      `step_count` 0; `info` is a dict; every observation (after reset, every step and
      every driver reset) is in `observation_space`; every action is in `action_space`;
      the reward (`agents.reward` for multi-agent envs) is float32/float64, of shape `()`
      (`(num_agents,)`; with a leading `num_envs` for vector envs) and finite;
      `termination`/`truncation` are bool, `step_count` int32 and it grows by exactly 1 per
      step (an auto-reset may restart it at 0 on or right after the step that ends an
      episode); a boolean `action_mask`, if the state has one, allows at least one action.
    - `"structure"`: every state has the tree structure, shapes and dtypes of the reset
      state, and `lax.cond`/`jnp.where` between a reset state and a step state work and keep
      them.
    - `"transforms"`: the rollout with a jitted step in a Python loop, the rollout inside
      `jax.jit(lax.scan)` and `jax.jit(jax.vmap(lax.scan))` over `num_keys` keys all
      agree with the eager rollout under `tolerance` (default `TRANSFORM_TOLERANCE`: ints,
      bools and keys exact; floats within 16 ulp or 1e-6 absolute).
    - `"recompilation"`: the jitted step is traced once over five same-shaped calls, and
      XLA compiles nothing during steps 2-4; on failure the field whose type changed is
      named (a weakly typed `reward=0.0` in `reset` is the classic cause).
    - `"determinism"`: a second eager rollout with the same keys is bit-identical; `reset`
      with one key gives bit-identical states before and after other states were stepped;
      rollouts from `num_keys` different env keys (same policy key) are not all identical
      apart from key fields (for `deterministic=True` envs, which use no randomness: they
      must be identical).
    - `"marl"`: `check_marl_env` (only for envs whose `reset` returns a `MARLState`).

    Vector envs (a `VmapWrapper` or anything with `num_envs`) are checked per instance:
    spaces describe one instance, fields lead with `num_envs`, and `reset(key=k)` must
    accept one key or a batch of `num_envs` keys.

    Args:
        env: the environment.
        key: a PRNG key (typed or raw); `jax.random.key(0)` by default.
        num_steps: steps per rollout (positive int).
        policy: `policy(key, state) -> action` for one unbatched instance, or None.
        autoreset: whether the env restarts episodes itself; None detects an
            `AutoResetWrapper` (mode other than "off") in the wrapper stack.
        deterministic: the env uses no randomness (see `"determinism"`).
        num_keys: number of env keys in the vmap and key-sensitivity runs (int >= 2).
        tolerance: float tolerance of the eager-versus-transform comparisons.
        checks: the groups to run, a subset of `CHECK_GROUPS`.
        disable_jit: run the eager rollouts under `jax.disable_jit()` (default), so that
            `lax.cond`/`lax.scan` inside the env run as Python and nothing compiles per
            step; pass False for envs with long internal loops (brax, mjx), which then run
            op by op.

    Returns:
        A `CheckReport` listing the sub-checks that passed.

    Raises:
        CheckError: naming the check, the step, the env of the batch, the field, and the
            expected and actual values.

    Example:
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import check_env
        >>> env = TimeLimit(GridWorld(), 5)
        >>> report = check_env(env, num_steps=6, checks=["contract", "recompilation"])
        >>> report.passed[-3:], report.stats["episodes_ended"]
        (['flags', 'step_count', 'recompilation'], 1)
    """
    if not isinstance(deterministic, bool):
        raise TypeError(f"{_OWNER}: deterministic must be a bool, got {deterministic!r}")
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"{_OWNER}: tolerance must be a Tolerance, got {tolerance!r}")
    groups = (checks,) if isinstance(checks, str) else tuple(checks)
    unknown = [g for g in groups if g not in CHECK_GROUPS]
    if unknown or not groups:
        raise ValueError(
            f"{_OWNER}: checks must be a non-empty subset of {CHECK_GROUPS}, got {groups!r}"
        )
    session = EnvSession(
        env,
        key=key,
        num_steps=num_steps,
        policy=policy,
        autoreset=autoreset,
        num_keys=num_keys,
        disable_jit=disable_jit,
    )
    report = CheckReport(_OWNER)
    report.stats.update(
        {
            "num_steps": session.num_steps,
            "vector": session.kind.vector,
            "marl": session.kind.marl,
            "autoreset": session.kind.autoreset,
        }
    )
    for group in CHECK_GROUPS:
        if group in groups:
            session.run(group, report, tolerance=tolerance, deterministic=deterministic)
    return report


def _index_schedule(sched: Schedule, index: int) -> Schedule:
    """Element `index` of a schedule with a leading stacking axis."""
    return jax.tree.map(lambda x: x[index], sched)


def _check_reset_purity(driver: Driver, sched: Schedule, other: Schedule, kind: EnvKind) -> None:
    first = flatten(driver.first_reset(sched.first))
    state = driver.first_reset(other.first)
    for t in range(min(2, int(np.shape(other.restart)[0]))):
        prepared = jax.tree.map(lambda x, t=t: x[t], other.prepared)
        _, _, state = driver.transition(other.restart[t], prepared, state, eager=True)
    second = flatten(driver.first_reset(sched.first))
    for path, leaf in first.items():
        want, got = to_numpy(leaf), to_numpy(second[path])
        if got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f"):
            continue
        env_i = None
        if kind.vector and got.shape == want.shape:
            diff = (got != want) & ~((got != got) & (want != want))
            env_i = int(np.argwhere(diff.reshape(diff.shape[0], -1).any(axis=1))[0][0])
        raise CheckError(
            f"{_OWNER}/reset_purity",
            "reset with the same key returned a different state after other states were "
            "reset and stepped; reset must depend on nothing but its key",
            step=0,
            env_index=env_i,
            field=path,
            expected=want if env_i is None else want[env_i],
            got=got if env_i is None else got[env_i],
            hint="look for Python-side counters, caches or a global RNG used in reset",
        )


def _check_key_sensitivity(
    vroll: Rollout, kind: EnvKind, num_keys: int, deterministic: bool, report: CheckReport
) -> None:
    base = vroll.select(0, axis=0).flat(keys=False)
    others = [vroll.select(i, axis=0).flat(keys=False) for i in range(1, num_keys)]
    same = [
        all(np.array_equal(base[k], o[k], equal_nan=base[k].dtype.kind == "f") for k in base)
        for o in others
    ]
    if deterministic:
        if not all(same):
            i = 1 + same.index(False)
            m = first_mismatch(others[i - 1], base, EXACT, time_axis=True, batch_axis=kind.vector)
            assert m is not None
            raise CheckError(
                f"{_OWNER}/key_sensitivity",
                f"the env was declared deterministic, but env key {i} gave a different "
                "trajectory than env key 0 (same policy key)",
                step=m.time,
                env_index=m.env,
                field=m.field_with_index.removeprefix("state."),
                expected=m.expected,
                got=m.got,
            )
        report.notes.append(f"deterministic: {num_keys} env keys gave identical trajectories")
        return
    if all(same):
        raise CheckError(
            f"{_OWNER}/key_sensitivity",
            f"{num_keys} different reset keys gave identical trajectories (same policy key; "
            "fields holding PRNG keys ignored): the env ignores its key",
            expected="trajectories that depend on the key",
            got=f"{num_keys} identical trajectories",
            hint="derive every random draw from the key passed to reset (or state.key); "
            "pass deterministic=True for an env that uses no randomness",
        )
    report.stats["distinct_key_trajectories"] = 1 + sum(not x for x in same)
