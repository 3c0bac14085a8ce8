"""PPO's training loop: GAE, the clipped loss and its optimiser, and `make_train`'s one jit.

- `gae`: generalised advantage estimates and value targets (a truncated transition
  bootstraps from the true next observation, a terminated one does not).
- `Learner` and `make_learner`: the clipped PPO loss and one optimiser step (Adam with
  gradient clipping and the annealed learning rate), public so the update can run on its
  own, data-parallel.
- `make_train(config)`: a pure `train(key)`, rollouts with `parallax.rollout` and minibatch
  updates in one `lax.scan`, jit-able and vmappable over seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from parallax import RecordEpisodeStatistics, rollout

from ._ppo import Config, make_env, true_action_space
from ._ppo_network import ActionHead, _features, actor, critic, init_params


# -- training -----------------------------------------------------------------------------------------
def gae(
    reward: jax.Array,
    value: jax.Array,
    next_value: jax.Array,
    termination: jax.Array,
    done: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimates and value targets, all `(T, N)`.

    `next_value[t]` is the value of the true next observation (the terminal one at episode
    ends): a truncated transition bootstraps from it, a terminated one does not; the
    recursion stops at every episode end.
    """
    delta = reward + gamma * next_value * (1.0 - termination) - value

    def back(carry: jax.Array, row: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        d, end = row
        adv = d + gamma * lam * (1.0 - end) * carry
        return adv, adv

    _, advantages = jax.lax.scan(
        back, jnp.zeros_like(delta[0]), (delta, done.astype(delta.dtype)), reverse=True
    )
    return advantages, advantages + value


@dataclass(frozen=True)
class Learner:
    """PPO's loss and optimiser for `config`: one gradient step on one batch of transitions.

    `make_train` runs `step` on every minibatch; it is public so that the update can be
    run on its own, e.g. data-parallel over many devices or processes: `jax.jit(step)`
    with the batch split over a mesh (`PartitionSpec("batch")`) and the parameters
    replicated makes XLA all-reduce the gradients (and the batch statistics of the
    advantage normalisation), so the result equals the step on the whole batch.

    A batch is a dict of arrays with a leading batch axis: `obs` (features, float32),
    `u` (the sampled pre-squash action), `log_prob` and `value` (of the acting policy),
    `advantage` and `target` (from `gae`).
    """

    config: Config
    head: ActionHead
    optimizer: optax.GradientTransformation

    def loss(
        self, params: dict[str, Any], batch: dict[str, jax.Array]
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
        """The clipped PPO loss and its parts `(policy, value, entropy)`."""
        config, head = self.config, self.head
        out = actor(params, batch["obs"])
        log_prob = head.log_prob(out, params["log_std"], batch["u"])
        value = critic(params, batch["obs"])
        ratio = jnp.exp(log_prob - batch["log_prob"])
        adv = batch["advantage"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.mean(
            jnp.minimum(
                ratio * adv, jnp.clip(ratio, 1 - config.clip_eps, 1 + config.clip_eps) * adv
            )
        )
        clipped = batch["value"] + jnp.clip(
            value - batch["value"], -config.clip_eps, config.clip_eps
        )
        vf = 0.5 * jnp.mean(
            jnp.maximum(jnp.square(value - batch["target"]), jnp.square(clipped - batch["target"]))
        )
        entropy = jnp.mean(head.entropy(out, params["log_std"]))
        total = pg + config.vf_coef * vf - config.ent_coef * entropy
        return total, (pg, vf, entropy)

    def step(
        self, params: dict[str, Any], opt_state: Any, batch: dict[str, jax.Array]
    ) -> tuple[dict[str, Any], Any, jax.Array]:
        """One optimiser step on `batch`: `(new_params, new_opt_state, loss)`."""
        (loss, _), grads = jax.value_and_grad(self.loss, has_aux=True)(params, batch)
        # optax's Adam bias correction raises an int32 count to a float power, which JAX's
        # strict dtype promotion (used by the test suite) rejects
        with jax.numpy_dtype_promotion("standard"):
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss


def make_learner(config: Config) -> Learner:
    """The `Learner` (loss, Adam with gradient clipping and the annealed learning rate) of
    `config`, as `make_train` uses it.

    Example:
        >>> import jax
        >>> from parallax import train
        >>> config = train.preset("GridWorld-v0", hidden=8)
        >>> learner = train.make_learner(config)
        >>> params = train.init_params(jax.random.key(0), 4, learner.head, config.hidden)
        >>> opt_state = learner.optimizer.init(params)
        >>> sorted(params)
        ['actor', 'critic', 'log_std']
    """
    num_updates = config.num_updates

    def schedule(count: jax.Array) -> jax.Array:
        steps_per_update = config.update_epochs * config.num_minibatches
        done = (count // steps_per_update).astype(jnp.float32)
        frac = 1.0 - done / num_updates if config.anneal_lr else jnp.ones((), jnp.float32)
        return config.lr * frac

    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate=schedule, eps=1e-5),
    )
    return Learner(config, ActionHead(true_action_space(config), config.init_log_std), optimizer)


def _require_report(config: Config, require_report: Any) -> None:
    """`require_fresh_report` for `make_train(..., require_report=...)` (None/False: skip)."""
    if require_report is None or require_report is False:
        return
    from ..testing import require_fresh_report

    require_fresh_report(config.env_id if require_report is True else require_report)


def make_train(
    config: Config,
    on_update: Callable[..., None] | None = None,
    *,
    require_report: Any = None,
) -> Callable[[jax.Array], dict[str, Any]]:
    """A pure `train(key) -> results`, jit-able and vmappable over keys.

    Args:
        config: the hyper-parameters.
        on_update: optional host function `on_update(update, mean_return, num_episodes)`
            called through `jax.debug.callback` after every update (progress bars, prints).
        require_report: refuse to build the trainer unless the env's validation report
            (`parallax check`) exists, passed and matches the current source: a report
            path or project directory, or True for `config.env_id`'s default report;
            None (default) checks nothing. See `parallax.testing.require_fresh_report`.

    Raises:
        parallax.testing.StaleReportError: `require_report` is set and the report is
            missing, failing or stale.

    Returns:
        `train(key)` returning a dict with `params`, `env_state` (holds the observation
        statistics) and `metrics` (`mean_return`, `num_episodes`, `loss` per update).
    """
    _require_report(config, require_report)
    env = make_env(config)
    head = ActionHead(true_action_space(config), config.init_log_std)
    obs_size = int(
        np.prod(
            jax.eval_shape(
                lambda k: _features(env.reset(key=k).observation), jax.random.key(0)
            ).shape[1:]
        )
    )
    num_updates = config.num_updates
    learner = make_learner(config)

    def policy(params: dict[str, Any]) -> Callable[..., Any]:
        def act(key: jax.Array, state: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
            obs = _features(state.observation)
            out = actor(params, obs)
            u = head.sample(key, out, params["log_std"])
            aux = {"u": u, "log_prob": head.log_prob(out, params["log_std"], u)}
            return head.to_action(u), aux

        return act

    def train(key: jax.Array) -> dict[str, Any]:
        key, init_key, reset_key = jax.random.split(key, 3)
        params = init_params(init_key, obs_size, head, config.hidden)
        opt_state = learner.optimizer.init(params)
        env_state = env.reset(key=reset_key)

        def update(carry: Any, update_index: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
            params, opt_state, env_state, key = carry
            key, rollout_key, perm_key = jax.random.split(key, 3)
            env_state, traj = rollout(
                env,
                policy(params),
                rollout_key,
                config.num_steps,
                state=env_state,
                has_aux=True,
                keep_info=False,
            )
            obs = _features_tn(traj.observation)
            next_obs = _features_tn(traj.next_observation)
            value = critic(params, obs)
            next_value = critic(params, next_obs)
            reward = traj.reward.astype(jnp.float32)
            advantage, target = gae(
                reward,
                value,
                next_value,
                traj.termination.astype(jnp.float32),
                traj.done,
                config.gamma,
                config.gae_lambda,
            )
            batch = {
                "obs": obs,
                "u": traj.aux["u"],
                "log_prob": traj.aux["log_prob"],
                "value": value,
                "advantage": advantage,
                "target": target,
            }
            size = config.num_envs * config.num_steps
            batch = jax.tree.map(lambda x: x.reshape(size, *x.shape[2:]), batch)

            def epoch(carry: Any, k: jax.Array) -> tuple[Any, jax.Array]:
                perm = jax.random.permutation(k, size)
                shuffled = jax.tree.map(
                    lambda x: x[perm].reshape(config.num_minibatches, -1, *x.shape[1:]), batch
                )

                def minibatch(carry: Any, mb: dict[str, jax.Array]) -> tuple[Any, jax.Array]:
                    params, opt_state, loss = learner.step(carry[0], carry[1], mb)
                    return (params, opt_state), loss

                return jax.lax.scan(minibatch, carry, shuffled)

            (params, opt_state), losses = jax.lax.scan(
                epoch, (params, opt_state), jax.random.split(perm_key, config.update_epochs)
            )
            summary = RecordEpisodeStatistics.summary(env_state)
            env_state = RecordEpisodeStatistics.clear(env_state)
            metrics = {
                "mean_return": summary["mean_return"].astype(jnp.float32),
                "num_episodes": summary["num_episodes"],
                "loss": jnp.mean(losses),
            }
            if on_update is not None:
                jax.debug.callback(
                    on_update, update_index, metrics["mean_return"], metrics["num_episodes"]
                )
            return (params, opt_state, env_state, key), metrics

        (params, _, env_state, _), metrics = jax.lax.scan(
            update, (params, opt_state, env_state, key), jnp.arange(num_updates)
        )
        return {"params": params, "env_state": env_state, "metrics": metrics}

    return train


def _features_tn(observation: Any) -> jax.Array:
    """`(T, N, features)` float32 from a `(T, N, ...)` observation pytree."""
    leaves = jax.tree.leaves(observation)
    return jnp.concatenate(
        [jnp.asarray(x, jnp.float32).reshape(*x.shape[:2], -1) for x in leaves], -1
    )
