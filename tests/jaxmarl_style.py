"""An IPPO trainer written the way JaxMARL's baselines are (our code, not theirs).

JaxMARL's IPPO shares one actor-critic between the agents: every dict of per-agent values
is batchified into `(num_agents * num_envs, ...)` actors, the env is `jax.vmap`-ed over
its `num_envs` copies (`reset(key)`, `step(key, state, actions)` with JaxMARL's auto-reset),
returns are logged by JaxMARL's `LogWrapper`, and PPO runs on GAE advantages with each
agent's own `dones[agent]`. Nothing here knows the env is a Parallax export.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


class ActorCritic(nn.Module):
    num_actions: int
    hidden: int = 64

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        init = nn.initializers.orthogonal(np.sqrt(2))
        actor = nn.tanh(nn.Dense(self.hidden, kernel_init=init)(x))
        actor = nn.tanh(nn.Dense(self.hidden, kernel_init=init)(actor))
        logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))(actor)
        critic = nn.tanh(nn.Dense(self.hidden, kernel_init=init)(x))
        critic = nn.tanh(nn.Dense(self.hidden, kernel_init=init)(critic))
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(critic)
        return logits, jnp.squeeze(value, -1)


class Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array
    info: Any


def batchify(x: dict[str, jax.Array], agents: list[str], num_actors: int) -> jax.Array:
    """`{agent: (num_envs, ...)}` -> `(num_agents * num_envs, features)`."""
    return jnp.stack([x[a] for a in agents]).reshape((num_actors, -1))


def unbatchify(x: jax.Array, agents: list[str], num_envs: int) -> dict[str, jax.Array]:
    """`(num_agents * num_envs,)` -> `{agent: (num_envs,)}`."""
    x = x.reshape((len(agents), num_envs))
    return {a: x[i] for i, a in enumerate(agents)}


def make_train(
    env: Any,
    *,
    num_envs: int = 16,
    num_steps: int = 16,
    num_updates: int = 60,
    update_epochs: int = 4,
    num_minibatches: int = 4,
    lr: float = 3e-3,
    gamma: float = 0.99,
    gae_lambda: float = 0.95,
    clip_eps: float = 0.2,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
):
    """`train(key) -> (params, returned_episode_returns per update)` for a JaxMARL env
    (already in `LogWrapper`) with a `Discrete` action space shared by its agents."""
    agents = list(env.agents)
    num_actors = env.num_agents * num_envs
    num_actions = int(env.action_space(agents[0]).n)
    network = ActorCritic(num_actions)
    minibatch = num_actors * num_steps // num_minibatches

    def train(key: jax.Array):
        key, init_key, reset_key = jax.random.split(key, 3)
        obs_size = int(np.prod(env.observation_space(agents[0]).shape))
        params = network.init(init_key, jnp.zeros((obs_size,)))
        tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(lr, eps=1e-5))
        opt_state = tx.init(params)
        obs, env_state = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))

        def env_step(carry, _):
            params, env_state, obs, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            x = batchify(obs, agents, num_actors)
            logits, value = network.apply(params, x)
            action = jax.random.categorical(act_key, logits)
            log_prob = jnp.take_along_axis(
                jax.nn.log_softmax(logits), action[:, None], axis=-1
            ).squeeze(-1)
            actions = unbatchify(action, agents, num_envs)
            next_obs, env_state, reward, done, info = jax.vmap(env.step)(
                jax.random.split(step_key, num_envs), env_state, actions
            )
            info = jax.tree.map(lambda v: v.reshape((num_actors,)), info)
            transition = Transition(
                batchify(done, agents, num_actors).squeeze(-1),
                action,
                value,
                batchify(reward, agents, num_actors).squeeze(-1),
                log_prob,
                x,
                info,
            )
            return (params, env_state, next_obs, key), transition

        def gae(traj: Transition, last_value: jax.Array) -> tuple[jax.Array, jax.Array]:
            def backward(carry, t):
                advantage, next_value = carry
                delta = t.reward + gamma * next_value * (1 - t.done) - t.value
                advantage = delta + gamma * gae_lambda * (1 - t.done) * advantage
                return (advantage, t.value), advantage

            _, advantages = jax.lax.scan(
                backward, (jnp.zeros_like(last_value), last_value), traj, reverse=True
            )
            return advantages, advantages + traj.value

        def loss_fn(params, batch):
            traj, advantages, targets = batch
            logits, value = network.apply(params, traj.obs)
            log_probs = jax.nn.log_softmax(logits)
            log_prob = jnp.take_along_axis(log_probs, traj.action[:, None], axis=-1).squeeze(-1)
            ratio = jnp.exp(log_prob - traj.log_prob)
            adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            actor = -jnp.minimum(
                ratio * adv, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv
            ).mean()
            critic = 0.5 * ((value - targets) ** 2).mean()
            entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
            return actor + vf_coef * critic - ent_coef * entropy

        def update(carry, _):
            params, opt_state, env_state, obs, key = carry
            (params, env_state, obs, key), traj = jax.lax.scan(
                env_step, (params, env_state, obs, key), None, num_steps
            )
            _, last_value = network.apply(params, batchify(obs, agents, num_actors))
            advantages, targets = gae(traj, last_value)

            def epoch(carry, _):
                params, opt_state, key = carry
                key, perm_key = jax.random.split(key)
                flat = jax.tree.map(
                    lambda x: x.reshape((num_steps * num_actors, *x.shape[2:])),
                    (traj, advantages, targets),
                )
                order = jax.random.permutation(perm_key, num_steps * num_actors)
                shuffled = jax.tree.map(lambda x: x[order], flat)
                batches = jax.tree.map(
                    lambda x: x.reshape((num_minibatches, minibatch, *x.shape[1:])), shuffled
                )

                def step(carry, batch):
                    params, opt_state = carry
                    grads = jax.grad(loss_fn)(params, batch)
                    updates, opt_state = tx.update(grads, opt_state)
                    return (optax.apply_updates(params, updates), opt_state), None

                (params, opt_state), _ = jax.lax.scan(step, (params, opt_state), batches)
                return (params, opt_state, key), None

            (params, opt_state, key), _ = jax.lax.scan(
                epoch, (params, opt_state, key), None, update_epochs
            )
            ended = traj.info["returned_episode"]
            returns = jnp.where(ended, traj.info["returned_episode_returns"], 0.0).sum()
            mean_return = returns / jnp.maximum(ended.sum(), 1)
            return (params, opt_state, env_state, obs, key), mean_return

        (params, *_), returns = jax.lax.scan(
            update, (params, opt_state, env_state, obs, key), None, num_updates
        )
        return params, returns

    return network, train
