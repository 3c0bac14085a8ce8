"""`check_marl_env`: the six multi-agent rules of the Parallax protocol.

1. Inactive agents' actions are ignored (random and extreme values in inactive slots must
   give a bit-identical next state).
2. Inactive agents' observations are zeros.
3. Inactive agents' rewards are zeros (the reward of a step pairs with the active mask of
   the state the step was called on, so a dying agent may carry reward).
4. Every action mask (active or not) allows at least one action.
5. `agents.active` marks the agents whose actions the next step uses.
6. The environment sets `termination` itself (an episode-level bool, not derived by the
   test from the active mask).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._spaces import Discrete, MultiDiscrete
from ._errors import CheckError
from ._harness import harness_jit
from ._report import CheckReport
from ._rollout import (
    Driver,
    EnvKind,
    Policy,
    as_typed_key,
    inspect_env,
    make_policy,
)
from ._session import check_interface, validate_common
from ._tolerance import EXACT
from ._trees import first_mismatch, flatten, to_numpy

__all__ = ["check_marl_env"]

_OWNER = "check_marl_env"


@functools.lru_cache(maxsize=32)
def _sampler(space: Any, lead: int) -> Callable[[Any], Any]:
    return harness_jit(lambda key: space.sample(key=key), lead=lead)


def _sample(space: Any, keys: Any) -> Any:
    lead = jnp.ndim(keys)
    try:
        return _sampler(space, lead)(keys)
    except TypeError:  # an unhashable space
        return _sampler.__wrapped__(space, lead)(keys)


def _extreme_like(action: Any) -> Any:
    """Values no env expects: the largest int, or NaN, or True, per leaf."""

    def leaf(x: Any) -> Any:
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.integer):
            return np.full(x.shape, np.iinfo(x.dtype).max, x.dtype)
        if np.issubdtype(x.dtype, np.floating):
            return np.full(x.shape, np.nan, x.dtype)
        return np.ones(x.shape, x.dtype)

    return jax.tree.map(leaf, action)


def _mix(slots: np.ndarray, replacement: Any, action: Any) -> Any:
    """`replacement` where `slots` (shape `(*batch, A)`) is True, else `action`, per leaf."""

    def leaf(r: Any, a: Any) -> Any:
        r, a = np.asarray(r), np.asarray(a)
        mask = slots.reshape(slots.shape + (1,) * (a.ndim - slots.ndim))
        return np.where(mask, r.astype(a.dtype), a)

    return jax.tree.map(leaf, replacement, action)


def _other_action(space: Any, action: Any, sample: Any, rng: np.random.Generator) -> Any:
    """An action that differs from `action` in every element where possible."""
    a = np.asarray(action)
    if isinstance(space, Discrete) and space.n > 1:
        shift = rng.integers(1, space.n, size=a.shape)
        return ((a + shift) % space.n).astype(a.dtype)
    if isinstance(space, MultiDiscrete):
        nvec = np.broadcast_to(np.asarray(space.nvec), a.shape)
        shift = rng.integers(1, np.maximum(nvec, 2), size=a.shape) % np.maximum(nvec, 1)
        return ((a + shift) % nvec).astype(a.dtype)
    return jax.tree.map(np.asarray, sample)


def _flat_np(state: Any) -> dict[str, np.ndarray]:
    return {path: to_numpy(leaf) for path, leaf in flatten(state).items()}


def _where(mask: np.ndarray, kind: EnvKind) -> tuple[int | None, int]:
    """`(env index, agent slot)` of the first True in a `(*batch, A)` mask."""
    index = tuple(int(i) for i in np.argwhere(mask)[0])
    return (index[0] if kind.vector else None), index[-1]


def _agent_leading(x: np.ndarray, kind: EnvKind, num_agents: int, field: str) -> None:
    lead = (*((kind.num_envs,) if kind.vector else ()), num_agents)
    if tuple(x.shape[: len(lead)]) != lead:
        raise CheckError(
            f"{_OWNER}/shapes",
            f"every per-agent field must lead with {'(num_envs, num_agents)' if kind.vector else 'num_agents'}",
            field=field,
            expected=f"shape {lead} + ...",
            got=f"shape {x.shape}",
        )


def _check_state(state: Any, step: int, kind: EnvKind, num_agents: int, stats: dict) -> None:
    """Rules 2, 4 and 6 (and the shapes of the per-agent fields) on one state."""
    agents = state.agents
    active = np.asarray(agents.active)
    batch = (kind.num_envs,) if kind.vector else ()
    if active.dtype != np.bool_ or active.shape != (*batch, num_agents):
        raise CheckError(
            f"{_OWNER}/shapes",
            "`agents.active` must be a bool array with one entry per agent slot",
            step=step,
            field="agents.active",
            expected=f"bool{list((*batch, num_agents))}",
            got=f"{active.dtype}{list(active.shape)}",
        )
    inactive = ~active
    # rule 6: episode-level flags are the env's own bool scalars (per env of a batch)
    for name in ("termination", "truncation"):
        flag = np.asarray(getattr(state, name))
        if flag.dtype != np.bool_ or flag.shape != batch:
            raise CheckError(
                f"{_OWNER}/rule6_termination_by_env",
                f"`{name}` must be an episode-level bool set by the env "
                f"(shape {batch}), not a per-agent array",
                step=step,
                field=name,
                expected=f"bool{list(batch)}",
                got=f"{flag.dtype}{list(flag.shape)}",
            )
    if inactive.all(axis=-1).any():
        term = np.asarray(state.termination)
        all_out = inactive.all(axis=-1)
        stats["all_inactive_states"] += int(all_out.sum())
        stats["all_inactive_not_terminated"] += int((all_out & ~term).sum())
    # rule 2: inactive observations are zeros
    for path, leaf in flatten(agents.observation).items():
        obs = to_numpy(leaf)
        field = "agents.observation" + ("" if path == "<root>" else f".{path}")
        _agent_leading(obs, kind, num_agents, field)
        nonzero = obs.reshape((*inactive.shape, -1)) != 0
        bad = np.asarray(inactive & nonzero.any(axis=-1))
        if bad.any():
            env_i, slot = _where(bad, kind)
            value = obs[(env_i, slot) if env_i is not None else slot]
            raise CheckError(
                f"{_OWNER}/rule2_inactive_observation_zero",
                f"agent slot {slot} is inactive, so its observation must be zeros",
                step=step,
                env_index=env_i,
                field=f"{field}[{slot}]",
                expected=np.zeros_like(value),
                got=value,
            )
    # rule 4: every mask allows at least one action
    if agents.action_mask is not None:
        for path, leaf in flatten(agents.action_mask).items():
            mask = to_numpy(leaf)
            field = "agents.action_mask" + ("" if path == "<root>" else f".{path}")
            _agent_leading(mask, kind, num_agents, field)
            none = np.asarray(~mask.reshape((*inactive.shape, -1)).astype(bool).any(axis=-1))
            if none.any():
                env_i, slot = _where(none, kind)
                state_word = (
                    "inactive"
                    if inactive[(env_i, slot) if env_i is not None else slot]
                    else "active"
                )
                raise CheckError(
                    f"{_OWNER}/rule4_mask_has_legal_action",
                    f"the action mask of agent slot {slot} ({state_word}) allows no action; "
                    "every mask, inactive slots included, needs at least one legal action",
                    step=step,
                    env_index=env_i,
                    field=f"{field}[{slot}]",
                    expected="at least one True",
                    got=mask[(env_i, slot) if env_i is not None else slot],
                )


def check_marl_env(
    env: Any,
    *,
    key: Any = None,
    num_steps: int = 32,
    policy: Policy | None = None,
    autoreset: bool | None = None,
    require_inactive: bool = False,
    check_active_used: bool = True,
    disable_jit: bool = True,
    _step_fn: Any = None,
) -> CheckReport:
    """Check the six multi-agent rules; raise `CheckError` at the first breach.

    The env is run for `num_steps` steps (the driver of `check_env`: actions from
    `policy`, finished episodes reset unless the env auto-resets). At each step, with `pre`
    the state passed to `step`, `a` the action and `post` the result, it checks exactly:

    1. `rule1_inactive_actions_ignored`: when some agent of `pre` is inactive, replacing
       its action slots with (a) a fresh sample of `action_space` and (b) extreme values
       (the dtype's largest int, NaN for floats) gives a `post` bit-identical to the
       original in every field, keys included.
    2. `rule2_inactive_observation_zero`: in the reset state and every `post`,
       `agents.observation` is zero in every slot where `agents.active` is False.
    3. `rule3_inactive_reward_zero`: `post.agents.reward` is zero in every slot where
       `pre.agents.active` is False (the step an agent dies on is active, so it may carry
       reward); also at reset, where the slot is inactive.
    4. `rule4_mask_has_legal_action`: every `agents.action_mask` leaf, active slots and
       inactive ones, has at least one True along its last axis.
    5. `rule5_active_actions_used`: inactive slots are not used (rule 1), and with
       `check_active_used`, every agent slot that was active in at least two steps had at
       least one step where changing only its action (to a different in-space action)
       changed `post`. This holds per activity spell: an agent that leaves (inactive)
       and re-joins (active again within the episode) starts a new spell, in which its
       actions must be used again; `stats["rejoins"]` counts the re-joins seen. An env
       whose agents' actions can legitimately be irrelevant for a whole rollout should
       pass `check_active_used=False`.
    6. `rule6_termination_by_env`: `termination` and `truncation` are episode-level bool
       arrays (shape `()`, or `(num_envs,)`) returned by the env at every step, and rule 1
       shows inactive actions cannot change them. Nothing is required when every agent is
       inactive: the env may or may not terminate (the report counts such states).

    Also `agents.active` must be bool of shape `(num_agents,)` and per-agent fields lead
    with `num_agents` (after `num_envs` for vector envs).

    Args:
        env: a multi-agent env (its `reset` returns a `MARLState`), single or vector.
        key: a PRNG key (typed or raw); `jax.random.key(0)` by default.
        num_steps: steps to run (positive int); long enough for agents to become inactive.
        policy: `policy(key, state) -> action` for one unbatched instance, or None for
            uniform samples of `action_space` (legal ones for a `Discrete` space with a
            boolean `agents.action_mask`).
        autoreset: as in `check_env`.
        require_inactive: fail if no agent was ever inactive (rules 1-3 unexercised).
        check_active_used: run the second half of rule 5.
        disable_jit: run the resets, restarts and policy of the driver under
            `jax.disable_jit()` (default), so that `lax.cond`/`lax.while_loop` inside them
            run as Python and nothing compiles per step; pass False for envs with long
            internal loops, which then run op by op (as in `check_env`). The steps always
            run through `jax.jit(env.step)`; no rule depends on this choice.

    Returns:
        A `CheckReport`; `stats` count the steps with inactive agents, the probes run and
        the states where every agent was inactive.

    Example:
        >>> from parallax.envs import Race
        >>> from parallax.testing import check_marl_env
        >>> report = check_marl_env(Race(), num_steps=24)
        >>> report.passed[0], report.stats["steps_with_inactive_agents"] > 0
        ('rule1_inactive_actions_ignored', True)
    """
    num_steps, policy, autoreset = validate_common(_OWNER, num_steps, policy, autoreset)
    for name, value in (
        ("require_inactive", require_inactive),
        ("check_active_used", check_active_used),
        ("disable_jit", disable_jit),
    ):
        if not isinstance(value, bool):
            raise TypeError(f"{_OWNER}: {name} must be a bool, got {value!r}")
    key = as_typed_key(key, _OWNER)
    check_interface(env, _OWNER)
    k_probe, k_env, k_policy, k_sample = jax.random.split(key, 4)
    probe = jax.eval_shape(lambda: env.reset(key=k_probe))
    kind = inspect_env(env, probe, autoreset, _OWNER)
    if not kind.marl:
        raise CheckError(
            f"{_OWNER}/interface",
            "check_marl_env needs a multi-agent env: reset must return a parallax.MARLState",
            step=0,
            expected="MARLState",
            got=type(probe).__name__,
        )
    num_agents = int(probe.agents.active.shape[-1])
    impl = jax.random.key_impl(key)
    driver = Driver(env, kind, make_policy(env, policy, impl), _OWNER, impl)
    sched = driver.schedule(driver.instance_keys(k_env), driver.instance_keys(k_policy), num_steps)
    # two fresh samples of the stacked action space per step (probes for rules 1 and 5)
    sample_keys = jax.random.split(k_sample, (num_steps, 2, *kind.batch_shape))
    samples = jax.tree.map(np.asarray, _sample(env.action_space, sample_keys))
    rng = np.random.default_rng(np.asarray(jax.random.key_data(k_sample)).astype(np.uint64))
    step_j = _step_fn if _step_fn is not None else jax.jit(env.step)
    stats = {
        "steps": num_steps,
        "steps_with_inactive_agents": 0,
        "inactive_action_probes": 0,
        "active_action_probes": 0,
        "all_inactive_states": 0,
        "all_inactive_not_terminated": 0,
    }
    stats["rejoins"] = 0
    # rule 5 is checked per activity spell: an agent that leaves and re-joins must have its
    # actions used again after it re-joins (a spell restarts on each re-join)
    active_steps = np.zeros(num_agents, dtype=np.int64)
    mattered = np.zeros(num_agents, dtype=bool)

    with jax.disable_jit(disable_jit):
        state = driver.first_reset(sched.first)
    _check_state(state, 0, kind, num_agents, stats)
    reward0 = np.asarray(state.agents.reward)
    bad = ~np.asarray(state.agents.active) & (reward0 != 0)
    if bad.any():
        env_i, slot = _where(bad, kind)
        raise CheckError(
            f"{_OWNER}/rule3_inactive_reward_zero",
            f"agent slot {slot} is inactive at reset, so its reward must be 0",
            step=0,
            env_index=env_i,
            field=f"agents.reward[{slot}]",
            expected=0.0,
            got=reward0[(env_i, slot) if env_i is not None else slot],
        )

    for t in range(num_steps):
        prepared = jax.tree.map(lambda x, t=t: x[t], sched.prepared)
        with jax.disable_jit(disable_jit):
            pre = driver.restart(sched.restart[t], state, eager=True)
            action = jax.tree.map(np.asarray, driver.act(prepared, pre))
        post = step_j(pre, action)
        step = t + 1
        _check_state(post, step, kind, num_agents, stats)
        active = np.asarray(pre.agents.active)
        inactive = ~active
        # rule 3: rewards of agents that did not act are zero
        reward = np.asarray(post.agents.reward)
        _agent_leading(reward, kind, num_agents, "agents.reward")
        bad = inactive & (reward != 0)
        if bad.any():
            env_i, slot = _where(bad, kind)
            raise CheckError(
                f"{_OWNER}/rule3_inactive_reward_zero",
                f"agent slot {slot} was inactive in the state passed to step {step}, so its "
                "reward for that step must be 0",
                step=step,
                env_index=env_i,
                field=f"agents.reward[{slot}]",
                expected=0.0,
                got=reward[(env_i, slot) if env_i is not None else slot],
            )
        reference = _flat_np(post)
        # rule 1: inactive actions are ignored
        if inactive.any():
            stats["steps_with_inactive_agents"] += 1
            probe_sample = jax.tree.map(lambda x, t=t: x[t, 0], samples)
            for label, replacement in (
                ("a fresh sample of action_space", probe_sample),
                ("extreme values (largest int / NaN)", _extreme_like(action)),
            ):
                changed = _mix(inactive, replacement, action)
                stats["inactive_action_probes"] += 1
                other = _flat_np(step_j(pre, changed))
                m = first_mismatch(other, reference, EXACT, time_axis=False, batch_axis=kind.vector)
                if m is not None:
                    row = inactive[m.env] if m.env is not None else inactive
                    slots = [int(i) for i in np.flatnonzero(row)]
                    raise CheckError(
                        f"{_OWNER}/rule1_inactive_actions_ignored",
                        f"changing only the actions of inactive agent slot(s) {slots} to "
                        f"{label} changed the next state; inactive agents' actions must be "
                        "ignored",
                        step=step,
                        env_index=m.env,
                        field=m.field_with_index,
                        expected=m.expected,
                        got=m.got,
                        hint="mask the action with agents.active before using it "
                        "(jnp.where(active, action, 0)); multiplying by the mask lets NaN through",
                    )
        # rule 5: active agents' actions are used
        if check_active_used:
            other_sample = jax.tree.map(lambda x, t=t: x[t, 1], samples)
            alternative = _other_action(env.action_space, action, other_sample, rng)
            for slot in range(num_agents):
                slot_active = active[..., slot]
                if not slot_active.any():
                    continue
                active_steps[slot] += 1
                if mattered[slot]:
                    continue
                only = np.zeros_like(active)
                only[..., slot] = slot_active
                stats["active_action_probes"] += 1
                other = _flat_np(step_j(pre, _mix(only, alternative, action)))
                if first_mismatch(other, reference, EXACT, time_axis=False, batch_axis=kind.vector):
                    mattered[slot] = True
        # re-joins: inactive in the state passed to the step, active again after it (within
        # the episode: a state that ends it, e.g. an auto-reset one, does not count)
        post_done = np.asarray(post.termination) | np.asarray(post.truncation)
        rejoined = inactive & np.asarray(post.agents.active) & ~post_done[..., None]
        for slot in range(num_agents):
            if rejoined[..., slot].any():
                stats["rejoins"] += 1
                if check_active_used:
                    _check_spell(slot, active_steps, mattered, step, rejoin=True)
                active_steps[slot], mattered[slot] = 0, False
        state = post

    if check_active_used:
        for slot in range(num_agents):
            _check_spell(slot, active_steps, mattered, num_steps, rejoin=False)
    report = CheckReport(_OWNER, stats=stats)
    if stats["rejoins"]:
        report.notes.append(f"{stats['rejoins']} re-join(s): rule 5 held for each activity spell")
    if stats["steps_with_inactive_agents"] == 0:
        message = (
            f"no agent was inactive in {num_steps} steps, so rules 1-3 were not exercised on "
            "inactive slots"
        )
        if require_inactive:
            raise CheckError(
                f"{_OWNER}/coverage",
                message,
                expected="at least one step with an inactive agent",
                got="none",
                hint="run more steps or use a policy that makes agents finish/die",
            )
        report.notes.append(message + "; run more steps")
    report.passed.extend(
        [
            "rule1_inactive_actions_ignored",
            "rule2_inactive_observation_zero",
            "rule3_inactive_reward_zero",
            "rule4_mask_has_legal_action",
            "rule5_active_actions_used",
            "rule6_termination_by_env",
        ]
    )
    if stats["all_inactive_states"]:
        report.notes.append(
            f"{stats['all_inactive_states']} state(s) had every agent inactive; "
            f"{stats['all_inactive_not_terminated']} of them were not terminated (allowed)"
        )
    return report


def _check_spell(
    slot: int, active_steps: np.ndarray, mattered: np.ndarray, step: int, *, rejoin: bool
) -> None:
    """Rule 5 for one activity spell of `slot`: active in >= 2 steps, its action mattered."""
    if active_steps[slot] < 2 or mattered[slot]:
        return
    spell = f" before it left and re-joined at step {step}" if rejoin else ""
    raise CheckError(
        f"{_OWNER}/rule5_active_actions_used",
        f"agent slot {slot} was active in {int(active_steps[slot])} steps{spell}, but changing "
        "only its action never changed the next state; `agents.active` must mark the "
        "agents whose actions the step uses",
        field=f"agents.active[{slot}]",
        expected="an action that matters in at least one active step"
        + (" of each activity spell" if rejoin else ""),
        got="no effect in any step",
        hint="pass check_active_used=False if this agent's action can legitimately "
        "be irrelevant for a whole rollout",
    )
