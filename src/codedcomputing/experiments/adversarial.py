"""Adversarially robust GCC: the error against N with q = ceil(N^a) lying workers.

For each function, attack, exponent ``a`` and N, the experiment draws fresh inputs per
trial, computes every worker's honest result, lets the attack corrupt ``q = ceil(N^a)`` of
them (:mod:`codedcomputing.adversaries`; all N workers return) and records every scheme's
MSE against ``f(x_k)`` and the master's decode time:

- ``gcc``: plain GCC (``lambda = 0``, the library's default decoder), ``bacc``;
- ``robust-gcc``: :class:`~codedcomputing.RobustGCC` with ``loss="squared"``, the published
  decoder (results clipped to the bound, the smoothing spline), its lambda picked at every
  decode by ``Config.squared_rules[0]`` (default ``lambda_rule="pilot"``); ``robust-gcc-paper``:
  the same with the paper's fixed schedule ``lambda(q, N)`` times the calibrated constant (one
  ``robust-gcc-<rule>`` per further rule); ``robust-gcc-huber`` and ``robust-gcc-tukey``:
  reweighted fits (our addition; Tukey is RobustGCC's default); ``robust-gcc-median``: the
  block medians joined linearly (a median-style decoder);
- ``approxifer``: the error-locating baseline (:class:`~codedcomputing.ApproxIFER`), for N up
  to ``approxifer_max_workers`` (its master cost grows like ``N (K + q)^2`` per output).

Each row carries its ``lambda_rule`` (the squared-loss schemes'; empty for the others) and the
``lambda_dec`` the decode used. The schedule's constant (``scale``) of the paper's rule is tuned
per function and robust loss on a calibration run of its own seed (N = 200, q = 10, the
concentrated and random attacks; 0 and the powers of ten from 1e-9 to 1), and the tuned scales
are written in the rows. The goal setting of the issue, N = 200 and q = 10 under the
concentrated attack, is run as its own block (``exponent`` empty).

Functions: ``xsinx``, f(x) = x sin x on sorted scalar inputs uniform on [-10, 10], bound M =
100 (the robust-spline paper's setting); ``lenet5``, LeNet-5 on MNIST test images, M 1.5
times the largest honest logit magnitude over a calibration batch's coded evaluations (a bound
the honest results keep: ``BOUND_MARGIN``).

Outputs: ``adversarial.csv`` (one row per function, attack, exponent, N, scheme, trial),
``adversarial_slopes.csv`` (least-squares slope of log mean MSE against log N per curve,
beside the theory ``(6/5)(a - 1)``) and the figures.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import adversaries, datasets, metrics, models
from .._progress import progress as show_progress
from ..codes import BACC, GCC, ApproxIFER, RobustGCC
from ..codes.robust import LAMBDA_RULES
from ..errors import NonFiniteResultWarning
from .records import (
    COUNT,
    NONNEGATIVE,
    SIZE,
    TEXT,
    Cell,
    Headline,
    band_note,
    means,
    pyplot,
    save_figure,
    summarise,
)

NAME = "adversarial"
SUMMARY = "robust GCC: MSE against N with q = ceil(N^a) liars, every attack; slopes"
FUNCTIONS = ("xsinx", "lenet5")
ATTACKS = tuple(adversaries.ATTACKS)
ROBUST = ("robust-gcc", "robust-gcc-paper", "robust-gcc-huber", "robust-gcc-tukey", "robust-gcc-median")
SCHEMES = ("gcc", "bacc", *ROBUST, "approxifer")
LOSS = {
    "robust-gcc": "squared",
    "robust-gcc-paper": "squared",
    "robust-gcc-pilot": "squared",
    "robust-gcc-gcv": "squared",
    "robust-gcc-huber": "huber",
    "robust-gcc-tukey": "tukey",
    "robust-gcc-median": "median",
}
SCALES = (0.0, *(10.0**p for p in range(-9, 1)))  # the calibration grid of the schedule's constant
GOAL = (200, 10)  # (N, q) of the goal setting
# LeNet-5's bound M over the calibration batch's largest honest logit: the largest alone was
# exceeded by some trials' honest logits at N = 2,000 (up to 1.2x), and the clip to M then
# corrupted honest results (MSE 0.014 against 3e-6 at q = 1)
BOUND_MARGIN = 1.5
CELLS = {
    "function": TEXT,
    "attack": TEXT,
    "scheme": TEXT,
    "exponent": Cell("number", low=0, optional=True),  # empty in the goal setting's rows
    "num_inputs": SIZE,
    "num_workers": SIZE,
    "lambda_dec": Cell("number", optional=True),  # empty for the codes without one
    "trial": COUNT,
    "mse": NONNEGATIVE,
    "decode_s": NONNEGATIVE,
}
COLUMNS = tuple(CELLS)


@dataclass(frozen=True)
class Config:
    functions: tuple[str, ...] = FUNCTIONS
    attacks: tuple[str, ...] = ATTACKS
    exponents: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75)
    num_workers: tuple[int, ...] = (50, 100, 200, 500, 1000, 2000)
    num_inputs: int = 9
    trials: int = 8
    calibration_trials: int = 3
    approxifer_max_workers: int = 500
    goal: bool = True
    # The squared loss's lambda rules (RobustGCC's lambda_rule): the first is "robust-gcc",
    # the others "robust-gcc-<rule>" ("paper": the fixed schedule with the calibrated scale).
    squared_rules: tuple[str, ...] = ("pilot", "paper")


QUICK = Config(
    functions=("xsinx",),
    exponents=(0.0, 0.5),
    num_workers=(50, 100, 200),
    trials=2,
    calibration_trials=1,
    approxifer_max_workers=200,
)


def _xsinx(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.sort(rng.uniform(-10.0, 10.0, (k, 1)), axis=0)


def _functions(config: Config, seed: int, progress: bool) -> dict:
    """``{name: (f, draw(rng, K) -> X, bound)}``."""
    out = {}
    for name in config.functions:
        if name == "xsinx":
            out[name] = (lambda x: x * np.sin(x), _xsinx, 100.0)
        elif name == "lenet5":
            f = models.numpy_function("lenet5", progress=progress)
            pool = datasets.mnist().test_x

            def draw(rng, k, pool=pool):
                return pool[rng.choice(len(pool), k, replace=False)]

            rng = np.random.default_rng([seed, 7])
            code = GCC(config.num_inputs, 200)
            honest = [f(code.encode(draw(rng, config.num_inputs))) for _ in range(4)]
            out[name] = (f, draw, BOUND_MARGIN * float(max(np.abs(y).max() for y in honest)))
        else:
            raise ValueError(f"functions: unknown function {name!r} (known: {', '.join(FUNCTIONS)})")
    return out


def _schemes(config: Config) -> tuple[str, ...]:
    """The robust schemes run: one squared-loss scheme per lambda rule, then the others."""
    squared = ["robust-gcc", *(f"robust-gcc-{rule}" for rule in config.squared_rules[1:])]
    return (*squared, "robust-gcc-huber", "robust-gcc-tukey", "robust-gcc-median")


def _rule(config: Config, scheme: str) -> str:
    """The lambda rule of a robust scheme ("paper" for the losses other than squared)."""
    if scheme == "robust-gcc":
        return config.squared_rules[0]
    return (
        scheme.removeprefix("robust-gcc-") if scheme.removeprefix("robust-gcc-") in LAMBDA_RULES else "paper"
    )


def _robust(k: int, n: int, q: int, bound: float, scheme: str, scale: float | None, rule: str = "paper"):
    return RobustGCC(
        k, n, q, bound, loss=LOSS[scheme], scale=None if rule != "paper" else scale, lambda_rule=rule
    )


def calibrate(f, draw, bound: float, k: int, trials: int, seed: int, config: Config) -> dict[str, float]:
    """The schedule's constant per robust scheme with the paper's rule: the grid value with the
    least mean log MSE at N = 200, q = 10 over the concentrated and random attacks (its own
    seed)."""
    rng = np.random.default_rng([seed, 11])
    n, q = GOAL
    code = GCC(k, n)
    cases = []
    for _ in range(trials):
        X = draw(rng, k)
        Y = f(code.encode(X))
        for attack in ("concentrated", "random"):
            corrupted = adversaries.make_attack(attack, q, bound).corrupt(code, Y, np.arange(n), rng)
            cases.append((f(X), corrupted.results))
    best = {}
    for scheme in _schemes(config):
        if LOSS[scheme] == "median" or _rule(config, scheme) != "paper":  # no constant to tune
            continue
        scores = []
        for scale in SCALES:
            robust = _robust(k, n, q, bound, scheme, scale)
            errors = [metrics.mse(robust.decode(Y, np.arange(n)), truth) for truth, Y in cases]
            scores.append(float(np.mean(np.log(np.maximum(errors, 1e-300)))))
        best[scheme] = SCALES[int(np.argmin(scores))]
    return best


def _settings(config: Config) -> list[tuple[float | str, int, int]]:
    """``(exponent, N, q)``: the sweep, then the goal setting (exponent "")."""
    out = [(a, n, math.ceil(n**a)) for a in config.exponents for n in config.num_workers]
    if config.goal:
        out.append(("", *GOAL))
    return out


def run(config: Config, seed: int, *, progress: bool = True) -> list[dict]:
    """The experiment's rows: one per (function, attack, exponent, N, scheme, trial)."""
    functions = _functions(config, seed, progress)
    k = config.num_inputs
    settings = _settings(config)
    rows = []
    steps = len(functions) * len(settings) * config.trials
    with show_progress("adversarial: functions x settings x trials", steps, enabled=progress) as step:
        for name, (f, draw, bound) in functions.items():
            scales = calibrate(f, draw, bound, k, config.calibration_trials, seed, config)
            rng = np.random.default_rng([seed, FUNCTIONS.index(name)])
            for exponent, n, q in settings:
                attacks = config.attacks if exponent != "" else ("concentrated",)
                codes = {"gcc": GCC(k, n), "bacc": BACC(k, n)}
                for scheme in _schemes(config):
                    codes[scheme] = _robust(k, n, q, bound, scheme, scales.get(scheme), _rule(config, scheme))
                if n <= config.approxifer_max_workers or exponent == "":
                    codes["approxifer"] = ApproxIFER(k, n, q)
                for trial in range(config.trials):
                    X = draw(rng, k)
                    truth = f(X)
                    honest = {"gcc": f(codes["gcc"].encode(X)), "bacc": f(codes["bacc"].encode(X))}
                    for attack in attacks:
                        attacker = adversaries.make_attack(attack, q, bound)
                        corrupted = {
                            encoder: attacker.corrupt(codes[encoder], Y, np.arange(n), rng).results
                            for encoder, Y in honest.items()
                        }
                        for scheme, code in codes.items():
                            Y = corrupted["bacc" if scheme in ("bacc", "approxifer") else "gcc"]
                            start = time.perf_counter()
                            with warnings.catch_warnings():  # garbage's NaN rows are erasures
                                warnings.simplefilter("ignore", NonFiniteResultWarning)
                                decoded = code.decode_details(Y, np.arange(n))
                            decode_s = time.perf_counter() - start
                            rows.append(
                                {
                                    "experiment": NAME,
                                    "function": name,
                                    "attack": attack,
                                    "scheme": scheme,
                                    "exponent": exponent,
                                    "num_inputs": k,
                                    "num_workers": n,
                                    "num_adversaries": q,
                                    "bound": bound,
                                    "lambda_dec": decoded.info.get(
                                        "lambda_dec", getattr(code, "lambda_dec", "")
                                    ),
                                    "lambda_rule": code.lambda_rule if LOSS.get(scheme) == "squared" else "",
                                    "scale": scales.get(scheme, ""),
                                    "trial": trial,
                                    "seed": seed,
                                    "mse": metrics.mse(decoded.estimates, truth),
                                    "decode_s": decode_s,
                                }
                            )
                    step()
    return rows


def theory_slope(exponent: float) -> float:
    """The robust-GCC bound's exponent of N: (q/N)^(6/5) with q = N^a."""
    return 1.2 * (float(exponent) - 1.0)


def fit_slopes(rows) -> list[dict]:
    """Least-squares slope of log(mean MSE over trials) against log N per (function, attack,
    scheme, exponent), from the sweep's rows (the goal block excluded), with its 95% interval
    (``slope_low``, ``slope_high``: :func:`~codedcomputing.experiments.rates.slope_interval`)."""
    from .rates import slope_interval

    sweep = [row for row in rows if row["exponent"] != ""]
    curves: dict[tuple, list[tuple[int, float]]] = {}
    keys = ("function", "attack", "scheme", "exponent", "num_workers")
    for (*curve, n), mean in means(sweep, keys, "mse").items():
        curves.setdefault(tuple(curve), []).append((int(n), mean))
    out = []
    for (function, attack, scheme, exponent), points in sorted(curves.items(), key=str):
        points = sorted((n, m) for n, m in points if m > 0)
        if len(points) < 2:
            continue
        slope, low, high = slope_interval(np.log([n for n, _ in points]), np.log([m for _, m in points]))
        out.append(
            {
                "function": function,
                "attack": attack,
                "scheme": scheme,
                "exponent": float(exponent),
                "slope": slope,
                "slope_low": low,
                "slope_high": high,
                "theory": theory_slope(exponent),
                "within_0.2_or_steeper": slope <= theory_slope(exponent) + 0.2,
                "num_workers": f"{points[0][0]}-{points[-1][0]}",
            }
        )
    return out


def derived(rows: list[dict]) -> dict[str, list[dict]]:
    """Tables computed from the rows, written beside the CSV: ``adversarial_slopes.csv``."""
    return {f"{NAME}_slopes": fit_slopes(rows)}


def goal_table(rows: list[dict]) -> list[tuple]:
    """The goal setting per function: each scheme's mean MSE and median decode time."""
    goal = [row for row in rows if row["exponent"] == ""]
    mse = means(goal, ("function", "scheme"), "mse")
    out = []
    for function in sorted({row["function"] for row in goal}):
        for scheme in SCHEMES:
            mine = [row for row in goal if (row["function"], row["scheme"]) == (function, scheme)]
            times = [row["decode_s"] for row in mine]
            if times:
                out.append((function, scheme, mse[(function, scheme)], float(np.median(times)) * 1e3))
    return out


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """``adversarial.png``: per function (rows) and attack (columns), robust GCC's mean MSE
    against N on log-log axes, one line per exponent a (its fitted slope in the label) with
    the theory's slope (6/5)(a - 1) dashed through its first point; ``adversarial_schemes.png``:
    every scheme at a = 0.5 (or the nearest exponent run)."""
    plt = pyplot()
    sweep = [row for row in rows if row["exponent"] != ""]
    known = {function: i for i, function in enumerate(FUNCTIONS)}  # others (a damaged CSV's) last
    functions = sorted({row["function"] for row in sweep}, key=lambda f: (known.get(f, len(known)), str(f)))
    attacks = [a for a in ATTACKS if any(row["attack"] == a for row in sweep)]
    exponents = sorted({float(row["exponent"]) for row in sweep})
    slopes = {(r["function"], r["attack"], r["scheme"], r["exponent"]): r["slope"] for r in fit_slopes(rows)}
    trials = len({row["trial"] for row in rows})
    paths = []
    for figure, schemes_of in (
        ("", lambda: [("robust-gcc-tukey", a) for a in exponents]),
        ("_schemes", lambda: [(s, min(exponents, key=lambda e: abs(e - 0.5))) for s in SCHEMES]),
    ):
        fig, axes = plt.subplots(
            len(functions), len(attacks), figsize=(4.2 * len(attacks), 3.6 * len(functions)), squeeze=False
        )
        for i, function in enumerate(functions):
            for j, attack in enumerate(attacks):
                ax = axes[i][j]
                colours = plt.get_cmap("viridis")(np.linspace(0, 0.85, max(len(exponents), len(SCHEMES))))
                for c, (scheme, exponent) in enumerate(schemes_of()):
                    mine = [
                        row
                        for row in sweep
                        if (row["function"], row["attack"], row["scheme"]) == (function, attack, scheme)
                        and float(row["exponent"]) == exponent
                    ]
                    if not mine:
                        continue
                    band = summarise(mine, ("num_workers",), "mse")
                    n_values = sorted(band, key=lambda key: int(key[0]))
                    x = [int(key[0]) for key in n_values]
                    middle = [band[key].estimate for key in n_values]
                    slope = slopes.get((function, attack, scheme, exponent), float("nan"))
                    label = f"a = {exponent:g}" if figure == "" else scheme
                    line = ax.plot(
                        x, middle, marker="o", ms=3, color=colours[c], label=f"{label} ({slope:.2f})"
                    )
                    ax.fill_between(
                        x,
                        [band[key].low for key in n_values],
                        [band[key].high for key in n_values],
                        color=line[0].get_color(),
                        alpha=0.15,
                        lw=0,
                    )
                    if figure == "":
                        theory = theory_slope(exponent)
                        ax.plot(
                            x,
                            middle[0] * (np.asarray(x) / x[0]) ** theory,
                            ls="--",
                            lw=0.8,
                            color=line[0].get_color(),
                        )
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_title(f"{function}: {attack}", fontsize=9)
                ax.set_xlabel("N (workers)")
                ax.set_ylabel("MSE against f(x)")
                ax.legend(fontsize=6, title="fitted slope in ()", title_fontsize=6)
        what = (
            "robust GCC (Tukey loss), one line per a, q = ceil(N^a); dashed: slope (6/5)(a - 1)"
            if figure == ""
            else "every scheme at one exponent"
        )
        fig.suptitle(f"adversarial workers: {what}", fontsize=10)
        paths.append(save_figure(fig, out_dir, f"{NAME}{figure}", band_note(trials)))
    return paths


def headline(rows: list[dict]) -> Headline:
    """Robust GCC's fitted slopes against theory (every attack and a, Tukey and squared
    losses), and the goal setting's MSE and decode times."""
    table = []
    for row in fit_slopes(rows):
        if row["scheme"] in ("robust-gcc", "robust-gcc-tukey", "gcc"):
            table.append(
                (
                    f"{row['function']} {row['attack']} a={row['exponent']:g}",
                    row["scheme"],
                    row["slope"],
                    row["theory"],
                )
            )
    for function, scheme, mse, ms in goal_table(rows):
        table.append((f"{function} goal N=200 q=10 concentrated", scheme, mse, ms))
    return Headline(
        title="adversarial: slope of log mean MSE against log N (theory (6/5)(a - 1)); goal: MSE, decode ms",
        columns=("curve", "scheme", "slope / MSE", "theory / ms"),
        rows=table,
    )
