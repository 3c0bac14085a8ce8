"""PPO on Parallax environments, the whole training inside one `jax.jit` (PureJaxRL style).

`make_train(config)` returns a pure `train(key)`: it builds the wrapped vector env, collects
rollouts with `parallax.rollout`, computes GAE advantages (bootstrapping from the true
terminal observation on truncation), and runs clipped-PPO minibatch updates with optax, all
in one `lax.scan` that `jax.jit` compiles once and `jax.vmap` can run over seeds.
`make_evaluate(config)` scores the trained policy, a uniformly random policy and, for the
finance envs, the closed-form policy (Almgren-Chriss for OptimalExecution-v0,
Avellaneda-Stoikov for MarketMaking-v0) on the same episodes (same reset keys, so the same
market noise).

`run(config, seed)` trains and evaluates and returns a JSON-able dict: `env`, `seed`,
`total_steps`, `mean_episode_reward` (trained policy, deterministic actions),
`random_policy_reward`, `baseline_reward` (finance envs), `sell_all_reward`
(OptimalExecution-v0), `train_seconds`, and the learning curve's last training return.
`examples/ppo.py` is the command-line front end.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import parallax
from parallax import (
    ClipAction,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    TimeLimit,
    VmapAutoResetWrapper,
    VmapWrapper,
    rollout,
    spaces,
)

FINANCE_BASELINES = {
    "OptimalExecution-v0": "almgren_chriss_policy",
    "MarketMaking-v0": "avellaneda_stoikov_policy",
}


@dataclass(frozen=True)
class Config:
    """PPO hyper-parameters and the environment (hashable, so it can be a static argument)."""

    env_id: str = "GridWorld-v0"
    env_kwargs: tuple[tuple[str, Any], ...] = ()
    max_episode_steps: int | None = None
    num_envs: int = 16
    num_steps: int = 32
    total_steps: int = 100_000
    update_epochs: int = 4
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    lr: float = 3e-4
    anneal_lr: bool = True
    hidden: int = 64
    init_log_std: float = -0.5
    normalize_observation: bool = True
    normalize_reward: bool = True
    num_eval_envs: int = 256
    eval_steps: int | None = None

    @property
    def num_updates(self) -> int:
        """Number of rollout + update iterations."""
        return max(1, self.total_steps // (self.num_envs * self.num_steps))

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.num_envs * self.num_steps // self.num_minibatches


PRESETS: dict[str, dict[str, Any]] = {
    "GridWorld-v0": {"max_episode_steps": 50, "total_steps": 100_000},
    "gymnax/CartPole-v1": {
        "num_envs": 4,
        "num_steps": 128,
        "total_steps": 500_000,
        "lr": 2.5e-4,
        "normalize_observation": False,
        "normalize_reward": False,
        "eval_steps": 500,
        "num_eval_envs": 64,
    },
    "OptimalExecution-v0": {
        "num_envs": 32,
        "num_steps": 25,
        "total_steps": 300_000,
        "gamma": 1.0,
        "lr": 1e-3,
        "ent_coef": 0.0,
        "update_epochs": 8,
    },
    "MarketMaking-v0": {
        "num_envs": 32,
        "num_steps": 100,
        "total_steps": 2_000_000,
        "gamma": 1.0,
        "lr": 1e-3,
        "ent_coef": 0.0,
        "update_epochs": 8,
        "init_log_std": -1.0,
    },
}


def preset(env_id: str, **overrides: Any) -> Config:
    """The `Config` for `env_id`: the preset's values, then `overrides` (None ignored)."""
    values = {**PRESETS.get(env_id, {}), **{k: v for k, v in overrides.items() if v is not None}}
    return Config(env_id=env_id, **values)


# -- environment ------------------------------------------------------------------------------------
def _base_env(config: Config) -> Any:
    env = parallax.make(config.env_id, **dict(config.env_kwargs))
    if isinstance(env.action_space, spaces.Box):
        env = ClipAction(env)
    if config.max_episode_steps is not None:
        env = TimeLimit(env, config.max_episode_steps)
    return env


def true_action_space(config: Config) -> Any:
    """The env's own action space (`ClipAction` widens it to an unbounded `Box`)."""
    return parallax.make(config.env_id, **dict(config.env_kwargs)).action_space


def make_env(config: Config) -> Any:
    """The training env: statistics and normalisation over an auto-resetting vector env."""
    env: Any = VmapAutoResetWrapper(_base_env(config), config.num_envs)
    env = RecordEpisodeStatistics(env)
    if config.normalize_observation:
        env = NormalizeObservation(env)
    if config.normalize_reward:
        env = NormalizeReward(env, gamma=config.gamma)
    return env


def make_eval_env(config: Config) -> Any:
    """The evaluation env: one episode per env (no auto-reset), frozen observation statistics."""
    env: Any = VmapWrapper(_base_env(config), config.num_eval_envs)
    if config.normalize_observation:
        env = NormalizeObservation(env, update=False)
    return env


def eval_horizon(config: Config, env: Any) -> int:
    """Steps an evaluation runs: `eval_steps`, the env's `n_steps` or `max_episode_steps`."""
    for value in (config.eval_steps, getattr(env, "n_steps", None), config.max_episode_steps):
        if value is not None:
            return int(value)
    raise ValueError(f"{config.env_id}: set eval_steps or max_episode_steps")


# -- network ------------------------------------------------------------------------------------------
class ActionHead:
    """How network outputs become actions: categorical (Discrete), one categorical per
    element (1-D MultiDiscrete: the log-probabilities and entropies add up) or Gaussian (Box).

    Box actions are sampled in a canonical unit `u` and mapped affinely onto the bounds
    (`center + half_width * u`); `ClipAction` clips what falls outside.
    """

    def __init__(self, space: Any, init_log_std: float) -> None:
        self.discrete = isinstance(space, spaces.Discrete)
        # a 1-D MultiDiscrete is one categorical per element, its logits side by side
        self.nvec: tuple[int, ...] = ()
        if self.discrete:
            self.size = int(space.n)
        elif isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            self.nvec = tuple(int(n) for n in space.nvec)
            self.size = sum(self.nvec)
        elif isinstance(space, spaces.Box) and len(space.shape) == 1:
            self.size = int(space.shape[0])
            low, high = space.low, space.high
            bounded = np.isfinite(low) & np.isfinite(high)
            safe_low, safe_high = np.where(bounded, low, -1.0), np.where(bounded, high, 1.0)
            self.center = ((safe_low + safe_high) / 2).astype(np.float32)
            self.half = ((safe_high - safe_low) / 2).astype(np.float32)
        else:
            raise TypeError(
                f"PPO supports Discrete, 1-D MultiDiscrete or 1-D Box actions, got {space!r}"
            )
        self.init_log_std = init_log_std

    def _split(self, out: jax.Array) -> list[jax.Array]:
        """The logits of each element of a MultiDiscrete action."""
        bounds = np.cumsum(self.nvec)[:-1].tolist()
        return jnp.split(out, bounds, axis=-1)

    def to_action(self, u: jax.Array) -> jax.Array:
        if self.discrete or self.nvec:
            return u.astype(jnp.int32)
        return _row(jnp.asarray(self.center), u) + _row(jnp.asarray(self.half), u) * u

    def sample(self, key: jax.Array, out: jax.Array, log_std: jax.Array) -> jax.Array:
        if self.discrete:
            return jax.random.categorical(key, out)
        if self.nvec:
            keys = jax.random.split(key, len(self.nvec))
            parts = self._split(out)
            return jnp.stack([jax.random.categorical(k, p) for k, p in zip(keys, parts)], -1)
        noise = jax.random.normal(key, out.shape, out.dtype)
        return out + _row(jnp.exp(log_std), out) * noise

    def mode(self, out: jax.Array) -> jax.Array:
        if self.nvec:
            return jnp.stack([jnp.argmax(p, axis=-1) for p in self._split(out)], -1)
        return jnp.argmax(out, axis=-1) if self.discrete else out

    def log_prob(self, out: jax.Array, log_std: jax.Array, u: jax.Array) -> jax.Array:
        if self.discrete:
            logp = jax.nn.log_softmax(out)
            return jnp.take_along_axis(logp, u[..., None].astype(jnp.int32), -1)[..., 0]
        if self.nvec:
            index = u.astype(jnp.int32)
            per_element = [
                jnp.take_along_axis(jax.nn.log_softmax(p), index[..., i, None], -1)[..., 0]
                for i, p in enumerate(self._split(out))
            ]
            return jnp.sum(jnp.stack(per_element, -1), axis=-1)
        z = (u - out) / _row(jnp.exp(log_std), out)
        return jnp.sum(-0.5 * z**2 - _row(log_std, out) - 0.5 * math.log(2 * math.pi), axis=-1)

    def entropy(self, out: jax.Array, log_std: jax.Array) -> jax.Array:
        if self.discrete or self.nvec:
            parts = self._split(out) if self.nvec else [out]
            logps = [jax.nn.log_softmax(p) for p in parts]
            per_element = [-jnp.sum(jnp.exp(logp) * logp, axis=-1) for logp in logps]
            return jnp.sum(jnp.stack(per_element, -1), axis=-1)
        total = jnp.sum(log_std + 0.5 * math.log(2 * math.pi * math.e))
        return jnp.broadcast_to(total, out.shape[:-1])


def _dense(key: jax.Array, n_in: int, n_out: int, scale: float) -> dict[str, jax.Array]:
    init = jax.nn.initializers.orthogonal(scale)
    return {"w": init(key, (n_in, n_out), jnp.float32), "b": jnp.zeros(n_out, jnp.float32)}


def init_params(key: jax.Array, obs_size: int, head: ActionHead, hidden: int) -> dict[str, Any]:
    """Separate actor and critic MLPs (two tanh layers), orthogonal init as in purejaxrl."""
    k = jax.random.split(key, 6)
    root2 = math.sqrt(2.0)
    params = {
        "actor": [
            _dense(k[0], obs_size, hidden, root2),
            _dense(k[1], hidden, hidden, root2),
            _dense(k[2], hidden, head.size, 0.01),
        ],
        "critic": [
            _dense(k[3], obs_size, hidden, root2),
            _dense(k[4], hidden, hidden, root2),
            _dense(k[5], hidden, 1, 1.0),
        ],
        "log_std": jnp.full(head.size, head.init_log_std, jnp.float32),
    }
    return params


def _row(vector: jax.Array, like: jax.Array) -> jax.Array:
    """`vector` (last-axis sized) reshaped to broadcast against `like` (explicit ranks)."""
    return vector.reshape((1,) * (like.ndim - 1) + vector.shape)


def _mlp(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        h = x @ layer["w"]
        x = jnp.tanh(h + _row(layer["b"], h))
    h = x @ layers[-1]["w"]
    return h + _row(layers[-1]["b"], h)


def _features(observation: Any) -> jax.Array:
    leaves = jax.tree.leaves(observation)
    return jnp.concatenate(
        [jnp.asarray(x, jnp.float32).reshape(*x.shape[:1], -1) for x in leaves], -1
    )


def actor(params: dict[str, Any], obs: jax.Array) -> jax.Array:
    """Policy outputs (logits, or the Gaussian mean in canonical units)."""
    return _mlp(params["actor"], obs)


def critic(params: dict[str, Any], obs: jax.Array) -> jax.Array:
    """State values."""
    return _mlp(params["critic"], obs)[..., 0]


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


# -- evaluation ---------------------------------------------------------------------------------------
def _episode_return(traj: parallax.Trajectory) -> jax.Array:
    """Mean over envs of the return of each env's first episode."""
    done = traj.done.astype(jnp.int32)
    alive = (jnp.cumsum(done, axis=0) - done) == 0
    return jnp.mean(jnp.sum(jnp.where(alive, traj.reward, 0.0), axis=0))


def make_evaluate(config: Config) -> Callable[..., dict[str, jax.Array]]:
    """`evaluate(key, params, env_state)`: mean first-episode reward of each policy.

    Every policy runs `num_eval_envs` episodes from the same reset key (hence the same
    market noise for the finance envs). The trained policy acts deterministically (the
    Gaussian mean or the most likely action) on observations normalised with the frozen
    training statistics.
    """
    env = make_eval_env(config)
    true_space = true_action_space(config)
    head = ActionHead(true_space, config.init_log_std)
    horizon = eval_horizon(config, env)
    n = config.num_eval_envs
    baseline_name = FINANCE_BASELINES.get(config.env_id)

    def evaluate(key: jax.Array, params: dict[str, Any], train_state: Any) -> dict[str, jax.Array]:
        reset_key, key = jax.random.split(key)
        kwargs = {}
        if config.normalize_observation:
            kwargs["statistics"] = NormalizeObservation.statistics(train_state)
        state = env.reset(key=reset_key, **kwargs)

        def run(policy: Callable[..., Any]) -> jax.Array:
            _, traj = rollout(env, policy, key, horizon, state=state, keep_info=False)
            return _episode_return(traj)

        def trained(k: jax.Array, s: Any) -> jax.Array:
            return head.to_action(head.mode(actor(params, _features(s.observation))))

        def uniform(k: jax.Array, s: Any) -> jax.Array:
            return jax.vmap(lambda kk: true_space.sample(key=kk))(jax.random.split(k, n))

        out = {"mean_episode_reward": run(trained), "random_policy_reward": run(uniform)}
        if baseline_name is not None:
            import parallax.finance as finance

            closed_form = getattr(finance, baseline_name)(env)
            out["baseline_reward"] = run(lambda k, s: closed_form(s))
        if config.env_id == "OptimalExecution-v0":
            out["sell_all_reward"] = run(lambda k, s: jnp.ones((n, 1), jnp.float32))
        return out

    return evaluate


# -- command line -------------------------------------------------------------------------------------
class Progress:
    """A tqdm bar over the updates plus a learning-progress line every `every` updates."""

    def __init__(self, config: Config, every: int | None = None, file: Any = None) -> None:
        from tqdm.auto import tqdm

        self.config = config
        self.file = file if file is not None else sys.stderr
        self.bar = tqdm(total=config.num_updates, desc=config.env_id, unit="update", file=self.file)
        self.every = every or max(1, config.num_updates // 10)
        self.last = float("nan")

    def __call__(self, update: Any, mean_return: Any, num_episodes: Any) -> None:
        update = int(np.max(update))
        value = (
            float(np.nanmean(np.asarray(mean_return)))
            if np.any(np.isfinite(mean_return))
            else float("nan")
        )
        if math.isfinite(value):
            self.last = value
        self.bar.update(1)
        self.bar.set_postfix(train_return=f"{self.last:.2f}")
        if (update + 1) % self.every == 0 or update + 1 == self.config.num_updates:
            steps = (update + 1) * self.config.num_envs * self.config.num_steps
            self.bar.write(
                f"update {update + 1:4d}/{self.config.num_updates}  steps {steps:9d}  "
                f"mean training return {self.last:10.3f}",
                file=self.file,
            )

    def close(self) -> None:
        self.bar.close()


def run(
    config: Config, seed: int = 0, progress: bool = True, *, require_report: Any = None
) -> dict[str, Any]:
    """Train and evaluate; returns the JSON-able result dict.

    `require_report`: as in `make_train` (checked before anything is built).
    """
    _require_report(config, require_report)  # before the progress bar opens
    bar = Progress(config) if progress else None
    train = jax.jit(make_train(config, on_update=bar))
    evaluate = jax.jit(make_evaluate(config))
    start = time.perf_counter()
    out = jax.block_until_ready(train(jax.random.key(seed)))
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    scores = evaluate(jax.random.key(10_000 + seed), out["params"], out["env_state"])
    curve = np.asarray(out["metrics"]["mean_return"])
    finite = curve[np.isfinite(curve)]
    result = {
        "env": config.env_id,
        "seed": seed,
        "total_steps": config.num_updates * config.num_envs * config.num_steps,
        **{k: round(float(v), 4) for k, v in scores.items()},
        "final_training_return": round(float(finite[-1]), 4) if finite.size else None,
        "train_seconds": round(seconds, 2),
        "eval_episodes": config.num_eval_envs,
    }
    return result
