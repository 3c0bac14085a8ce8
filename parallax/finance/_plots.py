"""Episode figures of the four finance envs (the panels sekai's finance renderers draw).

- `plot_episode(env, states, actions=None)`: a matplotlib `Figure` of one episode;
- `render_episode(env, states, actions=None)`: the same figure as an RGB `uint8` array
  `(height, width, 3)`, drawn on matplotlib's Agg canvas (no display, no global state).

The panels, by env (recognised from the keys of `states.info`):

- Trading-v0: price with buys and sells, position, equity, drawdown;
- Portfolio-v0: asset prices (rebuilt from `info["asset_returns"]`, starting at 1), weights,
  equity, drawdown;
- MarketMaking-v0: mid with bid / ask quotes and fills, inventory, wealth (mark-to-market);
- OptimalExecution-v0: inventory against the Almgren-Chriss schedule of the env's
  parameters, mid and execution price, implementation shortfall.

matplotlib is an optional dependency (the `docs` and `test` extras); it is imported when a
figure is drawn, and a missing install raises an `ImportError` naming the extra. The env
classes' `render` methods delegate here: `env.render(states) == render_episode(env, states)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._project import install_command

__all__ = ["plot_episode", "render_episode"]

_EXTRA = "docs"
_GAIN, _LOSS, _NEUTRAL = "#2a9d5c", "#c8423b", "#4a5a8a"


def _matplotlib() -> tuple[Any, Any]:
    """`(Figure, FigureCanvasAgg)`, or an ImportError that names the extra."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != "matplotlib":
            raise
        raise ImportError(
            f"plot_episode / render_episode need matplotlib, which the {_EXTRA!r} extra "
            f"installs: {install_command([_EXTRA])}"
        ) from error
    return Figure, FigureCanvasAgg


def _kind(info: Mapping[str, Any], env: Any) -> str:
    if "implementation_shortfall" in info:
        return "execution"
    if "bid" in info and "ask" in info and "mid_price" in info:
        return "market_making"
    if "asset_returns" in info and "weights" in info:
        return "portfolio"
    if "price" in info and "position" in info:
        return "trading"
    raise TypeError(
        "plot_episode draws the finance envs (Trading-v0, Portfolio-v0, MarketMaking-v0, "
        f"OptimalExecution-v0); the states of {type(env).__name__} have info keys "
        f"{sorted(info)}"
    )


def _episode(states: Any, actions: Any, env_index: int | None) -> tuple[dict[str, Any], Any]:
    """The info series of one episode as NumPy arrays with the time axis first, cut after
    the first step that ends the episode, and the matching actions."""
    info = getattr(states, "info", None)
    if not isinstance(info, Mapping):
        raise TypeError(
            "plot_episode: states must be a stacked State (or a Trajectory) with an info dict, "
            f"got {type(states).__name__}"
        )
    if actions is None:
        actions = getattr(states, "action", None)
    done = np.asarray(states.termination) | np.asarray(states.truncation)
    if done.ndim == 0:
        raise ValueError(
            "plot_episode: states must be stacked over time (leaves leading with the step "
            "axis, as a lax.scan collects them), got a single state"
        )
    batched = done.ndim == 2
    if batched and env_index is None:
        raise ValueError(
            f"plot_episode: the states hold a batch of {done.shape[1]} envs; pick one with "
            "env_index="
        )

    def pick(x: Any) -> np.ndarray:
        a = np.asarray(x)
        return a[:, env_index] if batched else a

    done = pick(done)
    ends = np.flatnonzero(done)
    length = int(ends[0]) + 1 if ends.size else done.shape[0]
    series = {k: pick(v)[:length] for k, v in info.items() if not isinstance(v, Mapping)}
    if actions is not None:
        actions = pick(actions)[:length]
    return series, actions


def _drawdown(equity: np.ndarray) -> np.ndarray:
    peak = np.maximum.accumulate(equity)
    safe = np.where(peak > 0, peak, 1.0)
    return np.clip(1.0 - equity / safe, 0.0, 1.0)


def _equity_panels(ax_equity: Any, ax_drawdown: Any, t: np.ndarray, equity: np.ndarray) -> None:
    ax_equity.plot(t, equity, color=_NEUTRAL, label="equity")
    ax_equity.set_ylabel("equity")
    drawdown = _drawdown(equity)
    ax_drawdown.fill_between(t, -drawdown, 0.0, color=_LOSS, alpha=0.4, label="drawdown")
    ax_drawdown.plot(t, -drawdown, color=_LOSS, linewidth=0.8)
    ax_drawdown.set_ylabel("drawdown")


def _holding_panel(ax: Any, t: np.ndarray, holding: np.ndarray, label: str) -> None:
    """A holding (position, inventory) as a step plot about a zero line, named `label`."""
    ax.step(t, holding, where="post", color=_NEUTRAL, label=label)
    ax.axhline(0.0, color="grey", linewidth=0.6)
    ax.set_ylabel(label)


def _trading(axes: Any, info: Mapping[str, np.ndarray]) -> None:
    t = np.arange(info["price"].shape[0])
    price, position = info["price"], info["position"]
    ax = axes[0]
    ax.plot(t, price, color="black", linewidth=1.0, label="price")
    change = np.diff(position, prepend=position[:1])
    buys, sells = change > 0, change < 0
    ax.scatter(t[buys], price[buys], marker="^", color=_GAIN, label="buy", zorder=3)
    ax.scatter(t[sells], price[sells], marker="v", color=_LOSS, label="sell", zorder=3)
    ax.set_ylabel("price")
    ax.legend(loc="upper left", fontsize="small")
    _holding_panel(axes[1], t, position, "position")
    _equity_panels(axes[2], axes[3], t, info["equity"])


def _portfolio(axes: Any, info: Mapping[str, np.ndarray]) -> None:
    returns = info["asset_returns"]
    t = np.arange(returns.shape[0])
    prices = np.cumprod(1.0 + returns, axis=0)
    for j in range(prices.shape[1]):
        axes[0].plot(t, prices[:, j], label=f"asset {j}")
    axes[0].set_ylabel("price (start = 1)")
    axes[0].legend(loc="upper left", fontsize="small")
    weights = info["weights"]
    labels = [f"asset {j}" for j in range(prices.shape[1])]
    labels += ["cash"] * (weights.shape[1] - len(labels))
    axes[1].stackplot(t, np.clip(weights, 0.0, None).T, labels=labels, alpha=0.8)
    axes[1].set_ylabel("weights")
    _equity_panels(axes[2], axes[3], t, info["equity"])


def _market_making(axes: Any, info: Mapping[str, np.ndarray]) -> None:
    mid = info["mid_price"]
    t = np.arange(mid.shape[0])
    ax = axes[0]
    ax.plot(t, mid, color="black", linewidth=1.0, label="mid")
    ax.plot(t, info["bid"], color=_GAIN, linewidth=0.8, label="bid")
    ax.plot(t, info["ask"], color=_LOSS, linewidth=0.8, label="ask")
    for side, color, marker in (("bid", _GAIN, "^"), ("ask", _LOSS, "v")):
        filled = np.asarray(info.get(f"{side}_filled", np.zeros_like(t, bool)), bool)
        ax.scatter(t[filled], info[side][filled], color=color, marker=marker, s=12, zorder=3)
    ax.set_ylabel("price")
    ax.legend(loc="upper left", fontsize="small")
    _holding_panel(axes[1], t, info["inventory"], "inventory")
    axes[2].plot(t, info["wealth"], color=_NEUTRAL, label="wealth")
    axes[2].set_ylabel("wealth")


# The env parameters that `almgren_chriss_trajectory` takes (besides `n_steps`).
_SCHEDULE_PARAMETERS = (
    "initial_inventory",
    "total_time",
    "sigma",
    "permanent_impact",
    "temporary_impact",
    "risk_aversion",
)


def _schedule(env: Any) -> np.ndarray | None:
    """The Almgren-Chriss holdings of `env`'s parameters, or None when it declares none."""
    from ._baselines import almgren_chriss_trajectory

    n_steps, params = getattr(env, "n_steps", None), getattr(env, "params", None)
    if not isinstance(n_steps, int) or params is None:
        return None
    names = _SCHEDULE_PARAMETERS
    values = {name: getattr(params, name) for name in names if hasattr(params, name)}
    return np.asarray(almgren_chriss_trajectory(n_steps=n_steps, **values))


def _execution(axes: Any, info: Mapping[str, np.ndarray], env: Any) -> None:
    inventory = info["inventory"]
    t = np.arange(1, inventory.shape[0] + 1)
    schedule = _schedule(env)
    ax = axes[0]
    if schedule is not None:
        ax.plot(np.arange(schedule.shape[0]), schedule, "--", color="grey", label="Almgren-Chriss")
        start = schedule[0]
    else:
        start = inventory[0] + info.get("shares_sold", np.zeros_like(inventory))[0]
    ax.step(np.r_[0, t], np.r_[start, inventory], where="post", color=_NEUTRAL, label="inventory")
    ax.set_ylabel("inventory")
    ax.legend(loc="upper right", fontsize="small")
    axes[1].plot(t, info["mid_price"], color="black", linewidth=1.0, label="mid")
    sold = np.asarray(info.get("shares_sold", np.ones_like(inventory))) > 0
    price = info["execution_price"]
    axes[1].scatter(t[sold], price[sold], color=_LOSS, s=12, label="execution price")
    axes[1].set_ylabel("price")
    axes[1].legend(loc="upper right", fontsize="small")
    axes[2].plot(t, info["implementation_shortfall"], color=_LOSS, label="shortfall")
    axes[2].set_ylabel("shortfall")


_PANELS = {"trading": 4, "portfolio": 4, "market_making": 3, "execution": 3}
_TITLES = {
    "trading": "Trading",
    "portfolio": "Portfolio",
    "market_making": "Market making",
    "execution": "Optimal execution",
}


def plot_episode(
    env: Any,
    states: Any,
    actions: Any = None,
    *,
    env_index: int | None = None,
    figsize: tuple[float, float] | None = None,
) -> Any:
    """A matplotlib figure of one episode of a finance env.

    Args:
        env: the env the states come from (wrapped or not); OptimalExecution-v0 reads its
            `n_steps` and `params` for the Almgren-Chriss schedule.
        states: the states of an episode stacked over time, every leaf leading with the step
            axis (what a `lax.scan` over `env.step` collects), or a `parallax.Trajectory`
            (its `info` and `action`). Steps after the first one that ends the episode are
            not drawn. States of a vector env (`(steps, num_envs, ...)`) need `env_index`.
        actions: the actions, stacked alike (optional; the panels are drawn from `info`).
        env_index: which env of a batch of states to draw.
        figsize: the figure size in inches; `(8, 2 * panels)` by default.

    Returns:
        A `matplotlib.figure.Figure` (not attached to pyplot; display it in a notebook, or
        `fig.savefig(path)`), with one axes per panel sharing the step axis.

    Raises:
        ImportError: matplotlib is not installed (the message names the extra).
        TypeError: the states are not from a finance env.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import parallax
        >>> from parallax.finance import plot_episode
        >>> env = parallax.make("Trading-v0", episode_length=10, lookback=2)
        >>> def step(state, key):
        ...     state = env.step(state, jax.random.randint(key, (), 0, 3))
        ...     return state, state
        >>> _, states = jax.lax.scan(step, env.reset(key=jax.random.key(0)),
        ...                          jax.random.split(jax.random.key(1), 10))
        >>> fig = plot_episode(env, states)
        >>> [ax.get_ylabel() for ax in fig.axes]
        ['price', 'position', 'equity', 'drawdown']
    """
    figure_cls, canvas_cls = _matplotlib()
    info, _ = _episode(states, actions, env_index)
    kind = _kind(info, env)
    panels = _PANELS[kind]
    fig = figure_cls(figsize=figsize or (8.0, 2.0 * panels))
    canvas_cls(fig)
    axes = fig.subplots(panels, 1, sharex=True)
    if kind == "trading":
        _trading(axes, info)
    elif kind == "portfolio":
        _portfolio(axes, info)
    elif kind == "market_making":
        _market_making(axes, info)
    else:
        _execution(axes, info, env)
    axes[-1].set_xlabel("step")
    fig.suptitle(f"{_TITLES[kind]} episode ({type(getattr(env, 'unwrapped', env)).__name__})")
    fig.subplots_adjust(left=0.12, right=0.97, top=0.94, bottom=0.08, hspace=0.15)
    return fig


def render_episode(
    env: Any,
    states: Any,
    actions: Any = None,
    *,
    env_index: int | None = None,
    figsize: tuple[float, float] | None = None,
    dpi: int = 80,
) -> np.ndarray:
    """`plot_episode` drawn into an RGB image.

    Args:
        env, states, actions, env_index, figsize: as in `plot_episode`.
        dpi: pixels per inch; the image is `figsize * dpi` pixels.

    Returns:
        `uint8` array of shape `(height, width, 3)`.

    Example:
        >>> import jax
        >>> import parallax
        >>> from parallax.finance import render_episode
        >>> env = parallax.make("OptimalExecution-v0", n_steps=5)
        >>> def step(state, _):
        ...     state = env.step(state, jax.numpy.full((1,), 0.3))
        ...     return state, state
        >>> _, states = jax.lax.scan(step, env.reset(key=jax.random.key(0)), length=5)
        >>> image = render_episode(env, states, figsize=(4, 3), dpi=50)
        >>> image.shape, image.dtype.name
        ((150, 200, 3), 'uint8')
    """
    if isinstance(dpi, bool) or not isinstance(dpi, int) or dpi < 1:
        raise ValueError(f"render_episode: dpi must be a positive int, got {dpi!r}")
    fig = plot_episode(env, states, actions, env_index=env_index, figsize=figsize)
    fig.set_dpi(dpi)
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    return image


class EpisodeRender:
    """Mixin of the finance envs: `env.render(states)` is `render_episode(env, states)`."""

    def render(self, states: Any, actions: Any = None, **kwargs: Any) -> np.ndarray:
        """An RGB image (uint8, `(H, W, 3)`) of an episode of this env (`render_episode`).

        `states` is a stacked `State` (or `Trajectory`) from a rollout of this env; keyword
        arguments (`env_index=`, `figsize=`, `dpi=`) go to `render_episode`. For the
        matplotlib figure itself use `parallax.finance.plot_episode`. Needs matplotlib.
        """
        return render_episode(self, states, actions, **kwargs)
