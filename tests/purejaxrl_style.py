"""A small PPO written the PureJaxRL way, for tests of `to_gymnax`.

`make_train(config, env, env_params)` returns `train(key) -> (params, metrics)`: the whole
training run (rollouts, GAE, clipped PPO epochs over minibatches) is one pure function, so
`jax.jit(train)(key)` compiles it once and `jax.jit(jax.vmap(train))(keys)` trains several
seeds in one program. The env is any gymnax 1.0.1 environment with a `Box` action space (a
diagonal Gaussian policy) and a flat `Box` observation space; it is driven only through
gymnax's public API (`reset`, `step` with its auto-reset, `info["discount"]` and
`info["final_observation"]` to bootstrap), wrapped in gymnax's `LogWrapper`.

The network is a plain-JAX MLP actor-critic (no flax), optimised with optax's Adam.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from gymnax.wrappers.purerl import LogWrapper


class Config(NamedTuple):
    num_envs: int = 32
    num_steps: int = 10
    num_updates: int = 150
    update_epochs: int = 4
    num_minibatches: int = 4
    hidden: int = 32
    lr: float = 3e-3
    gamma: float = 1.0
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    init_log_std: float = -1.0


class Transition(NamedTuple):
    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array
    bootstrap: jax.Array  # gamma * discount * V(final observation)


def _dense(key: jax.Array, n_in: int, n_out: int, scale: float) -> dict[str, jax.Array]:
    w = jax.nn.initializers.orthogonal(scale)(key, (n_in, n_out), jnp.float32)
    return {"w": w, "b": jnp.zeros(n_out, jnp.float32)}


def init_network(key: jax.Array, obs_dim: int, act_dim: int, cfg: Config) -> dict[str, Any]:
    """Separate two-layer tanh MLPs for the Gaussian mean and the value, a learned log-std."""
    k = jax.random.split(key, 6)
    root2 = float(np.sqrt(2.0))
    return {
        "pi": [
            _dense(k[0], obs_dim, cfg.hidden, root2),
            _dense(k[1], cfg.hidden, cfg.hidden, root2),
            _dense(k[2], cfg.hidden, act_dim, 0.01),
        ],
        "v": [
            _dense(k[3], obs_dim, cfg.hidden, root2),
            _dense(k[4], cfg.hidden, cfg.hidden, root2),
            _dense(k[5], cfg.hidden, 1, 1.0),
        ],
        "log_std": jnp.full(act_dim, cfg.init_log_std, jnp.float32),
    }


def _mlp(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def policy_mean(net: dict[str, Any], obs: jax.Array) -> jax.Array:
    """The deterministic action: the Gaussian's mean."""
    return _mlp(net["pi"], obs)


def value(net: dict[str, Any], obs: jax.Array) -> jax.Array:
    return _mlp(net["v"], obs)[..., 0]


def _log_prob(mean: jax.Array, log_std: jax.Array, action: jax.Array) -> jax.Array:
    z = (action - mean) / jnp.exp(log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * float(np.log(2 * np.pi)), axis=-1)


def make_train(cfg: Config, env: Any, env_params: Any) -> Any:
    """`train(key) -> (network params, metrics)` for `env` (see the module docstring)."""
    env = LogWrapper(env)
    obs_dim = int(np.prod(env.observation_space(env_params).shape))
    act_dim = int(np.prod(env.action_space(env_params).shape))
    batch = cfg.num_envs * cfg.num_steps
    minibatch = batch // cfg.num_minibatches
    num_steps = cfg.num_updates * cfg.update_epochs * cfg.num_minibatches
    lr = optax.linear_schedule(cfg.lr, 0.0, num_steps)  # PureJaxRL's ANNEAL_LR
    optimizer = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(lr))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def loss_fn(net: Any, mb: Transition, advantages: jax.Array, targets: jax.Array) -> Any:
        mean = policy_mean(net, mb.obs)
        log_prob = _log_prob(mean, net["log_std"], mb.action)
        ratio = jnp.exp(log_prob - mb.log_prob)
        adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        clipped = jnp.clip(ratio, 1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps)
        actor = -jnp.minimum(ratio * adv, clipped * adv).mean()
        critic = 0.5 * jnp.square(value(net, mb.obs) - targets).mean()
        entropy = jnp.sum(net["log_std"])
        return actor + cfg.vf_coef * critic - cfg.ent_coef * entropy

    def train(key: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
        key, init_key, reset_key = jax.random.split(key, 3)
        net = init_network(init_key, obs_dim, act_dim, cfg)
        opt_state = optimizer.init(net)
        obs, env_state = reset(jax.random.split(reset_key, cfg.num_envs), env_params)

        def env_step(carry: Any, _: Any) -> Any:
            net, env_state, obs, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            mean = policy_mean(net, obs)
            noise = jax.random.normal(act_key, mean.shape, jnp.float32)
            action = mean + jnp.exp(net["log_std"]) * noise
            log_prob = _log_prob(mean, net["log_std"], action)
            keys = jax.random.split(step_key, cfg.num_envs)
            next_obs, env_state, reward, terminated, truncated, info = step(
                keys, env_state, action, env_params
            )
            bootstrap = cfg.gamma * info["discount"] * value(net, info["final_observation"])
            done = jnp.logical_or(terminated, truncated)
            transition = Transition(obs, action, log_prob, value(net, obs), reward, done, bootstrap)
            return (net, env_state, next_obs, key), (transition, info)

        def update(carry: Any, _: Any) -> Any:
            net, opt_state, env_state, obs, key = carry
            (net, env_state, obs, key), (traj, info) = jax.lax.scan(
                env_step, (net, env_state, obs, key), None, cfg.num_steps
            )

            def gae_step(gae: jax.Array, t: Transition) -> Any:
                delta = t.reward + t.bootstrap - t.value
                not_done = 1.0 - t.done.astype(jnp.float32)
                gae = delta + cfg.gamma * cfg.gae_lambda * not_done * gae
                return gae, gae

            _, advantages = jax.lax.scan(
                gae_step, jnp.zeros(cfg.num_envs, jnp.float32), traj, reverse=True
            )
            targets = advantages + traj.value

            def epoch(carry: Any, _: Any) -> Any:
                net, opt_state, key = carry
                key, perm_key = jax.random.split(key)
                perm = jax.random.permutation(perm_key, batch)
                flat = jax.tree.map(lambda x: x.reshape((batch, *x.shape[2:]))[perm], traj)
                adv = advantages.reshape(batch)[perm]
                tgt = targets.reshape(batch)[perm]

                def minibatch_step(carry: Any, i: jax.Array) -> Any:
                    net, opt_state = carry
                    take = jax.tree.map(
                        lambda x: jax.lax.dynamic_slice_in_dim(x, i * minibatch, minibatch),
                        (flat, adv, tgt),
                    )
                    grads = jax.grad(loss_fn)(net, *take)
                    updates, opt_state = optimizer.update(grads, opt_state, net)
                    return (optax.apply_updates(net, updates), opt_state), None

                (net, opt_state), _ = jax.lax.scan(
                    minibatch_step, (net, opt_state), jnp.arange(cfg.num_minibatches)
                )
                return (net, opt_state, key), None

            (net, opt_state, key), _ = jax.lax.scan(
                epoch, (net, opt_state, key), None, cfg.update_epochs
            )
            ended = info["returned_episode"]
            n_ended = jnp.maximum(ended.sum(), 1).astype(jnp.float32)
            episode_return = jnp.where(ended, info["returned_episode_returns"], 0.0).sum()
            return (net, opt_state, env_state, obs, key), episode_return / n_ended

        carry = (net, opt_state, env_state, obs, key)
        (net, *_), returns = jax.lax.scan(update, carry, None, cfg.num_updates)
        return net, {"episode_return": returns}

    return train
