"""The papers' claims, each checked against an experiment's rows.

A claim is one sentence fixed here; what it measured, in which setting, and whether it held
are computed from the rows of the experiment that tests it (as read back from its CSV), so a
report never states a figure that its CSV does not hold. :data:`CLAIMS` maps each experiment
to the function that reads its claims from its rows; :data:`PAPERS` names the papers.
Which claims there are follows from the configuration that was run (a claim per network, p,
backend or task it runs): one whose rows are missing is "not measured", saying what is
missing, and is never left out.

Where a claim needs a threshold the paper does not give (a fitted slope "at the rate"), the
threshold is in the claim's sentence: a rate claim holds when the fitted slope is at most
the theory's plus 0.2 (the resolution of a log-log fit over a few sizes).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..experiments import adversarial, gradient_coding, rates
from ..experiments.records import means

__all__ = ["CLAIMS", "PAPERS", "Claim", "Paper", "claims_of"]

SLOPE_TOLERANCE = 0.2
WHO = {"threads": "threads", "ray": "Ray actors"}  # also the serving experiment's live backends
TIE = 0.05  # schemes closer than this on the simulated clock are tied in its ordering


@dataclass(frozen=True)
class Paper:
    """A paper the library implements: ``key``, ``authors``, ``title`` and the experiments
    that test its claims."""

    key: str
    authors: str
    title: str
    experiments: tuple[str, ...]


PAPERS = {
    paper.key: paper
    for paper in (
        Paper(
            "gcc",
            "P. Moradi, B. Tahmasebi, M. A. Maddah-Ali",
            "General Coded Computing (GCC): coded computing for resilient distributed computing, "
            "a learning-theoretic framework",
            ("stragglers", "polynomial", "rates", "latency"),
        ),
        Paper(
            "manifold",
            "P. Moradi, M. A. Maddah-Ali",
            "Manifold-aware encoding for general coded computing",
            ("manifold",),
        ),
        Paper(
            "robust",
            "P. Moradi, H. Akbarinodehi, M. A. Maddah-Ali",
            "Adversarially robust general coded computing",
            ("adversarial",),
        ),
        Paper(
            "pgc",
            "X. Su, J. Li",
            "Pipelined gradient coding (fractional and cyclic repetition)",
            ("gradient-coding",),
        ),
        Paper(
            "frontier",
            "this library (issue 21), against hedged requests (J. Dean, L. A. Barroso) and learned "
            "parity (J. Kosaian, K. V. Rashmi, S. Venkataraman: ParM)",
            "When does coding pay? Coded inference against replication, hedging and parity at equal "
            "resources, per query",
            ("frontier",),
        ),
        Paper(
            "serving",
            "this library (issue 23), against learned parity (J. Kosaian, K. V. Rashmi, S. Venkataraman: "
            "ParM) and hedged requests (J. Dean, L. A. Barroso)",
            "Coded inference as a service: a query stream on model replicas, coding against replication, "
            "hedging and learned parity at equal resources, under load",
            ("serving",),
        ),
    )
}


@dataclass(frozen=True)
class Claim:
    """One claim of a paper as an experiment measured it: ``held`` is True or False, or None
    when the rows do not hold what the claim needs (a smaller grid, a missing scheme)."""

    paper: str
    experiment: str
    claim: str
    measured: str
    setting: str
    held: bool | None

    def __post_init__(self):
        if self.held is not None:  # a numpy bool from a comparison becomes a plain one
            object.__setattr__(self, "held", bool(self.held))

    @property
    def verdict(self) -> str:
        return {True: "held", False: "not held", None: "not measured"}[self.held]


def _fmt(value: float) -> str:
    """Three significant digits."""
    return f"{value:.3g}"


class Unmeasured(Exception):
    """Raised while measuring a claim whose rows lack what it needs; the message says what."""


def _claim(
    paper: str, experiment: str, claim: str, measure: Callable[..., tuple], *args, where: str = ""
) -> Claim:
    """The claim as ``measure(*args)``, which returns ``(measured, setting, held)``, finds it;
    "not measured" when the rows lack what it needs, with what they lack as the measured text
    and ``where`` (the setting the claim is about) as its setting. A claim is never left out."""
    try:
        measured, setting, held = measure(*args)
    except Unmeasured as why:
        return Claim(paper, experiment, claim, str(why), where, None)
    except Exception as err:  # rows unlike the experiment's: said in the report, not raised
        return Claim(paper, experiment, claim, f"rows unreadable: {type(err).__name__}: {err}", where, None)
    return Claim(paper, experiment, claim, measured, setting, held)


def _need(table: dict, key, what: str):
    """``table[key]``, or :class:`Unmeasured` saying that there are no ``what`` rows."""
    try:
        return table[key]
    except KeyError:
        raise Unmeasured(f"no {what} rows") from None


def _present(rows: list[dict], value: Callable[[dict], object]) -> list:
    """The distinct ``value(row)`` over the rows, in order, skipping rows it cannot read."""
    found = {}
    for row in rows:
        try:
            found[value(row)] = None
        except (KeyError, TypeError, ValueError):
            continue
    return list(found)


def _some(rows: list[dict]) -> list[dict]:
    if not rows:
        raise Unmeasured("no rows")
    return rows


def stragglers_claims(rows: list[dict], config=None) -> list[Claim]:
    """Fig. 2: GCC's mean MSE below BACC's at every S, per network (``config.models``, or the
    networks in the rows)."""
    model_names = config.models if config is not None else _present(rows, lambda row: row["model"])

    def measure(model):
        mine = [row for row in rows if row.get("model") == model]
        if not mine:
            raise Unmeasured(f"no {model} rows")
        mse = means(mine, ("scheme", "num_stragglers"), "mse")
        s_values = sorted({s for scheme, s in mse if scheme == "gcc"})
        if not s_values:
            raise Unmeasured(f"no GCC rows for {model}")
        ratios = {s: _need(mse, ("bacc", s), f"BACC S = {s}") / mse[("gcc", s)] for s in s_values}
        worst = min(ratios, key=ratios.get)
        first = next(row for row in mine if row["scheme"] == "gcc")
        trials = len({row["trial"] for row in mine})
        return (
            f"BACC / GCC mean MSE >= {_fmt(ratios[worst])} (lowest at S = {worst}); "
            f"above 1 at {sum(r > 1 for r in ratios.values())} of {len(ratios)} S",
            f"K = {first['num_inputs']}, N = {first['num_workers']}, S = "
            f"{', '.join(map(str, s_values))}, {trials} trials",
            all(r > 1 for r in ratios.values()),
        )

    return [
        _claim(
            "gcc",
            "stragglers",
            f"GCC's mean MSE is below BACC's at every number of stragglers ({model}).",
            measure,
            model,
            where=str(model),
        )
        for model in model_names
    ]


def polynomial_claims(rows: list[dict], config=None) -> list[Claim]:
    """Fig. 3: LCC exact up to its threshold and unstable beyond it, where GCC is not."""

    @functools.cache
    def grid():
        first = _some(rows)[0]
        mse = means(rows, ("scheme", "num_stragglers"), "mse")
        n, threshold = first["num_workers"], first["recovery_threshold"]
        s_values = sorted({s for scheme, s in mse if scheme == "lcc"})
        setting = f"K = {first['num_inputs']}, N = {n}, LCC's threshold {threshold} results"
        return mse, n - threshold, s_values, setting

    def exact():
        mse, last_exact, s_values, setting = grid()
        exact = [s for s in s_values if s <= last_exact]
        if not exact:
            raise Unmeasured(f"no LCC rows with S <= {last_exact}")
        worst = max(mse[("lcc", s)] for s in exact)
        return (
            f"LCC's largest mean MSE for S <= {last_exact}: {_fmt(worst)}",
            setting + f", S = {exact[0]}..{exact[-1]}",
            worst < 1e-10,
        )

    def beyond():
        mse, last_exact, s_values, setting = grid()
        beyond = [s for s in s_values if s > last_exact]
        if not beyond:
            raise Unmeasured(f"no LCC rows with S > {last_exact}")
        ratios = [mse[("lcc", s)] / _need(mse, ("gcc", s), f"GCC S = {s}") for s in beyond]
        return (
            f"LCC / GCC mean MSE >= {_fmt(min(ratios))} (median {_fmt(float(np.median(ratios)))})",
            setting + f", S = {beyond[0]}..{beyond[-1]}",
            min(ratios) > 1,
        )

    return [
        _claim(
            "gcc",
            "polynomial",
            "LCC recovers the polynomial exactly (MSE below 1e-10) while at most N minus its "
            "recovery threshold workers straggle.",
            exact,
        ),
        _claim(
            "gcc",
            "polynomial",
            "Beyond LCC's recovery threshold GCC's mean MSE is below LCC's at every S.",
            beyond,
        ),
    ]


def _slope(row: dict) -> str:
    """A fitted slope with its 95% interval (the least-squares one of
    :func:`~codedcomputing.experiments.rates.slope_interval`), for a claim's measured text."""
    low, high = row.get("slope_low", float("nan")), row.get("slope_high", float("nan"))
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{row['slope']:.2f} (no interval: 2 sizes)"
    return f"{row['slope']:.2f} (95% CI {low:.2f} to {high:.2f})"


def _theory_slope(n_values, p) -> float:
    """The fitted log-log slope of log_{1/p}(N)^3 N^-3 over the grid's N (its local slope is
    -3 + 3 / ln N, shallower than -3 at these sizes)."""
    n = np.asarray(sorted(n_values), dtype=float)
    curve = (np.log(n) / np.log(1.0 / p)) ** 3 * n**-3.0
    return float(np.polyfit(np.log(n), np.log(curve), 1)[0])


def rates_claims(rows: list[dict], config=None) -> list[Claim]:
    """Fig. 4: the worst-case rate N^-3, GCC faster than BACC, and the probabilistic rate for
    each p (``config.probabilities``, or the p in the rows)."""
    if config is not None:
        probabilities = list(config.probabilities)
    else:
        bernoulli = [
            row for row in rows if row.get("panel") == rates.BERNOULLI and row.get("scheme") == "gcc"
        ]
        probabilities = sorted(p for p in _present(bernoulli, lambda row: row["p"]) if isinstance(p, float))

    @functools.cache
    def fitted():
        n_values = sorted({row["num_workers"] for row in _some(rows)})
        grid = f"N = {n_values[0]}..{n_values[-1]} ({len(n_values)} sizes), K = {rows[0]['num_inputs']}"
        slopes = rates.fit_slopes(rows)
        worst = {row["scheme"]: row for row in slopes if row["panel"] == rates.WORST}
        return slopes, worst, n_values, grid

    def worst_curve(scheme):
        worst = fitted()[1]
        if scheme not in worst:
            raise Unmeasured(f"no worst-case {scheme.upper()} curve over 2 or more N")
        return worst[scheme]

    def rate():
        gcc = worst_curve("gcc")
        return (
            f"slope {_slope(gcc)}",
            fitted()[3] + f", S = {gcc['num_stragglers']} contiguous stragglers",
            gcc["slope"] <= -3.0 + SLOPE_TOLERANCE,
        )

    def faster():
        g, b = worst_curve("gcc"), worst_curve("bacc")
        return f"slopes GCC {_slope(g)}, BACC {_slope(b)}", fitted()[3], g["slope"] < b["slope"]

    def probabilistic(p):
        slopes, _, n_values, grid = fitted()
        row = next(
            (r for r in slopes if r["panel"] != rates.WORST and r["scheme"] == "gcc" and r["p"] == p), None
        )
        if row is None:
            raise Unmeasured(f"no GCC curve at p = {p:g} over 2 or more N")
        theory = _theory_slope(n_values, p)
        return (
            f"slope {_slope(row)}; the curve's {theory:.2f}",
            grid,
            row["slope"] <= theory + SLOPE_TOLERANCE,
        )

    return [
        _claim(
            "gcc",
            "rates",
            f"With at most S stragglers GCC's MSE decays at least as N^-3: its fitted log-log "
            f"slope is at most -3 + {SLOPE_TOLERANCE}.",
            rate,
        ),
        _claim(
            "gcc", "rates", "Under worst-case stragglers GCC's MSE decays faster in N than BACC's.", faster
        ),
        *(
            _claim(
                "gcc",
                "rates",
                f"With each worker straggling with probability p = {p:g}, GCC's MSE decays at least "
                f"as log_(1/p)(N)^3 N^-3: its fitted slope is at most that curve's over the same N "
                f"plus {SLOPE_TOLERANCE}.",
                probabilistic,
                p,
            )
            for p in probabilities
        ),
    ]


def latency_claims(rows: list[dict], config=None) -> list[Claim]:
    """Waiting for the fastest workers cuts the tail: GCC's p99 below uncoded's, per backend,
    delay model and S (those ``config`` runs, or those in the rows)."""
    from ..experiments import latency

    if config is not None:
        settings = [
            (backend, delay, latency.scheme_label("gcc", s))
            for backend in config.backends
            for delay in latency.delay_models(config, backend)
            for s in latency.grid(config, backend)[2]
        ]
    else:
        settings = _present(
            [row for row in rows if row.get("scheme") == "gcc"],
            lambda row: (row["backend"], row["delay_model"], latency.label(row)),
        )

    @functools.cache
    def stats():
        return latency.percentiles(rows)

    def measure(backend, delay, name):
        value = _need(stats(), (backend, delay, name), f"{name} {backend} {delay}")
        uncoded = _need(stats(), (backend, delay, "uncoded"), f"uncoded {backend} {delay}")
        ratio = value["p99"] / uncoded["p99"]
        return (
            f"p99 {value['p99'] * 1e3:.0f} ms against {uncoded['p99'] * 1e3:.0f} ms ({ratio:.2f}x); "
            f"relative accuracy {value['rel_acc']:.3f}",
            f"{backend} backend, {delay} delays, {value['trials']} calls",
            ratio < 1,
        )

    return [
        _claim(
            "gcc",
            "latency",
            f"Waiting only for the fastest N - S workers, GCC's p99 latency ({name}) is below "
            "uncoded computation's, which waits for all K.",
            measure,
            backend,
            delay,
            name,
            where=f"{backend} backend, {delay} delays",
        )
        for backend, delay, name in settings
    ]


def manifold_claims(rows: list[dict], config=None) -> list[Claim]:
    """Manifold-aware encoding below standard GCC's MSE under stragglers, consistently, per
    task (``config.tasks``, or the tasks in the rows)."""
    tasks = config.tasks if config is not None else _present(rows, lambda row: row["task"])
    keys = ("task", "num_inputs", "pattern", "scheme", "num_stragglers")

    @functools.cache
    def mse():
        return means(rows, keys, "mse")

    def measure(task):
        table = mse()
        ratios = {
            (k, pattern, s): table[(t, k, pattern, "manifold-gcc", s)] / table[(t, k, pattern, "gcc", s)]
            for (t, k, pattern, scheme, s) in table
            if t == task and scheme == "gcc" and (t, k, pattern, "manifold-gcc", s) in table
        }
        if not ratios:
            raise Unmeasured(f"no {task} rows of both GCC and ManifoldGCC at one setting")
        worst = max(ratios, key=ratios.get)
        ks = sorted({k for k, _, _ in ratios})
        patterns = sorted({p for _, p, _ in ratios})
        return (
            f"ManifoldGCC / GCC mean MSE <= {_fmt(ratios[worst])} (highest at K = {worst[0]}, "
            f"{worst[1]}, S = {worst[2]}); below 1 in {sum(r < 1 for r in ratios.values())} of "
            f"{len(ratios)} settings",
            f"K = {', '.join(map(str, ks))}, N = 5K, {', '.join(patterns)} stragglers",
            all(r < 1 for r in ratios.values()),
        )

    return [
        _claim(
            "manifold",
            "manifold",
            f"Manifold-aware encoding gives a lower mean MSE than standard GCC under stragglers "
            f"({task}), in every setting.",
            measure,
            task,
            where=str(task),
        )
        for task in tasks
    ]


def adversarial_claims(rows: list[dict], config=None) -> list[Claim]:
    """The (q/N)^(6/5) rate (the published decoder under the per-decode pilot rule, under the
    paper's fixed schedule, and the Tukey decoder), the error vanishing for sublinear q, and
    the master's cost against an error-locating decoder (per function of the goal setting:
    ``config.functions`` when it runs the goal, or the functions of the goal rows)."""
    if config is not None:
        functions = list(config.functions) if config.goal else []
    else:
        functions = _present([row for row in rows if row.get("exponent") == ""], lambda row: row["function"])

    @functools.cache
    def fitted():
        slopes = adversarial.fit_slopes(rows)
        n_values = sorted({row["num_workers"] for row in rows if row["exponent"] != ""})
        grid = f"N = {n_values[0]}..{n_values[-1]}, q = ceil(N^a)" if n_values else ""
        return slopes, grid

    def rule_of(scheme):
        """The lambda rule the rows name for ``scheme`` (rows from before the rules: "")."""
        named = sorted({str(row.get("lambda_rule", "")) for row in rows if row["scheme"] == scheme} - {""})
        return "/".join(named)

    def rate(scheme, share):
        slopes, grid = fitted()
        mine = [row for row in slopes if row["scheme"] == scheme]
        if not mine:
            raise Unmeasured(f"no {scheme} curve over 2 or more N")
        within = [row for row in mine if row["slope"] <= row["theory"] + SLOPE_TOLERANCE]
        misses = sorted(
            (row for row in mine if row not in within), key=lambda r: r["slope"] - r["theory"], reverse=True
        )
        miss = (
            f"; furthest: {misses[0]['function']} {misses[0]['attack']} a = {misses[0]['exponent']:g}, "
            f"slope {_slope(misses[0])} against {misses[0]['theory']:.2f}"
            if misses
            else ""
        )
        rule = rule_of(scheme)  # the squared-loss schemes' rows name theirs
        return (
            f"{len(within)} of {len(mine)} (function, attack, a) curves{miss}",
            grid
            + f", attacks {', '.join(sorted({r['attack'] for r in mine}))}"
            + (f", lambda_rule {rule}" if rule else ""),
            len(within) >= share * len(mine) - 1e-9,
        )

    def vanishing():
        slopes, grid = fitted()
        published = [row for row in slopes if row["scheme"] == "robust-gcc" and row["exponent"] < 1]
        if not published:
            raise Unmeasured("no robust-gcc curve with a < 1 over 2 or more N")
        flattest = max(published, key=lambda r: r["slope"])
        return (
            f"{sum(r['slope'] < 0 for r in published)} of {len(published)} slopes negative; "
            f"the flattest {_slope(flattest)}",
            grid,
            all(r["slope"] < 0 for r in published),
        )

    def cost(function):
        cells = {scheme: (m, ms) for f, scheme, m, ms in adversarial.goal_table(rows) if f == function}
        robust = _need(cells, "robust-gcc-tukey", f"goal-setting robust-gcc-tukey {function}")[1]
        approxifer = _need(cells, "approxifer", f"goal-setting approxifer {function}")[1]
        ratio = robust / approxifer
        return (
            f"median decode {robust:.3g} ms against {approxifer:.3g} ms ({ratio:.2f}x)",
            f"N = {adversarial.GOAL[0]}, q = {adversarial.GOAL[1]}, concentrated attack",
            ratio < 1,
        )

    out = [
        _claim(
            "robust",
            "adversarial",
            f"With q = N^a adversaries the error of robust GCC ({who}) decays as (q/N)^(6/5): "
            f"{how} fitted slope is at most (6/5)(a - 1) + {SLOPE_TOLERANCE}.",
            rate,
            scheme,
            share,
        )
        for scheme, who, how, share in (
            (
                "robust-gcc",
                "the published squared-loss decoder, its lambda picked at every decode by the pilot rule",
                "at least 9 in 10 of the (function, attack, a) curves'",
                0.9,
            ),
            (
                "robust-gcc-paper",
                "the published squared-loss decoder, the paper's fixed lambda schedule",
                "every",
                1.0,
            ),
            ("robust-gcc-tukey", "this library's Tukey decoder, RobustGCC's default", "every", 1.0),
        )
    ]
    out.append(
        _claim(
            "robust",
            "adversarial",
            "The error vanishes as N grows whenever q grows sublinearly (a < 1): every fitted "
            "slope of the published decoder (pilot rule) is negative.",
            vanishing,
        )
    )
    out += [
        _claim(
            "robust",
            "adversarial",
            f"Robust GCC (its default, Tukey decoder) locates no one, so its master-side decode costs "
            f"less than the error-locating ApproxIFER's ({function}).",
            cost,
            function,
            where=f"N = {adversarial.GOAL[0]}, q = {adversarial.GOAL[1]}, concentrated attack",
        )
        for function in functions
    ]
    return out


def gradient_coding_claims(rows: list[dict], config=None) -> list[Claim]:
    """PGC against GC (training time), against every baseline, and its convergence in steps;
    the simulated clock's ordering against each real backend (``config.backends``, or those
    in the rows)."""
    if config is not None:
        backends = list(config.backends)
    else:
        backends = [b for b in gradient_coding.BACKENDS if any(row.get("backend") == b for row in rows)]

    @functools.cache
    def simulated():
        first = _some(rows)[0]
        try:
            target = gradient_coding.target_loss(rows)
        except ValueError as err:  # no simulated rows to set the target: nothing to time against it
            raise Unmeasured(str(err)) from None
        reach = gradient_coding.times_to_target(rows)
        settings = sorted({(s, ratio) for _, s, ratio in reach})
        where = (
            f"n = {first['num_workers']}, s = {', '.join(str(s) for s in sorted({s for s, _ in settings}))}, "
            f"delay mean {', '.join(f'{r:g}' for r in sorted({r for _, r in settings}))} x compute, "
            f"{first.get('model', 'logistic')} on {first['dataset']}, target loss {target:.3f} "
            "(simulated clock)"
        )
        return reach, settings, where

    def time_of(reach, scheme, key):
        return _need(reach, (scheme, *key), f"{scheme} s = {key[0]}, delay {key[1]:g}")

    def sooner_than_gc(code):
        reach, settings, where = simulated()
        ratios = {
            key: time_of(reach, f"gc-{code}", key)[0] / time_of(reach, f"pgc-{code}", key)[0]
            for key in settings
        }
        worst = min(ratios, key=ratios.get)
        return (
            f"GC / PGC time >= {ratios[worst]:.2f}x (s = {worst[0]}, delay {worst[1]:g}x); "
            f"max {max(ratios.values()):.2f}x",
            where,
            all(r > 1 for r in ratios.values()),
        )

    def sooner_than_baselines(pgc):
        reach, settings, where = simulated()
        losses = [
            (b, key, time_of(reach, b, key)[0] / time_of(reach, pgc, key)[0])
            for b in ("dgd", "is-sgd", "is-gc")
            for key in settings
            if np.isfinite(time_of(reach, b, key)[0])
        ]
        if not losses:
            raise Unmeasured("no baseline reached the target")
        behind = [entry for entry in losses if entry[2] <= 1]
        closest = min(losses, key=lambda e: e[2])
        return (
            f"baseline / {pgc} time >= {closest[2]:.3f}x ({closest[0]}, s = {closest[1][0]}, "
            f"delay {closest[1][1]:g}x); behind in {len(behind)} of {len(losses)}",
            where,
            not behind,
        )

    def steps():
        reach, settings, where = simulated()
        steps = {key: (time_of(reach, "pgc-cr", key)[1], time_of(reach, "gc-cr", key)[1]) for key in settings}
        slower = [key for key, (p, g) in steps.items() if p > g]
        return (
            f"steps PGC-CR {min(p for p, _ in steps.values()):.0f}-{max(p for p, _ in steps.values()):.0f} "
            f"against GC-CR {min(g for _, g in steps.values()):.0f}-{max(g for _, g in steps.values()):.0f}; "
            f"more in {len(slower)} of {len(steps)}",
            where,
            not slower,
        )

    def ordering(backend):
        reach = simulated()[0]
        real = gradient_coding.times_to_target(rows, backend=backend)
        if not real:
            raise Unmeasured(f"no rows on {backend}")
        return _ordering(backend, real, reach, rows)

    out = [
        _claim(
            "pgc",
            "gradient-coding",
            f"Pipelined GC reaches the target training loss sooner than GC ({code.upper()}) at every "
            "s and delay.",
            sooner_than_gc,
            code,
        )
        for code in ("fr", "cr")
    ]
    out += [
        _claim(
            "pgc",
            "gradient-coding",
            f"{pgc.upper()} reaches the target sooner than DGD, IS-SGD and IS-GC at every s and delay.",
            sooner_than_baselines,
            pgc,
        )
        for pgc in ("pgc-fr", "pgc-cr")
    ]
    out.append(
        _claim(
            "pgc",
            "gradient-coding",
            "PGC-CR's approximate decoding (stale sums, averaged) takes no more steps to the target "
            "than GC-CR's exact decoding.",
            steps,
        )
    )
    out += [
        _claim(
            "pgc",
            "gradient-coding",
            _ordering_sentence(backend),
            ordering,
            backend,
            where=f"on {backend}",
        )
        for backend in backends
    ]
    return out


def _ordering_sentence(backend: str) -> str:
    return (
        f"The simulated clock orders the schemes by time to target as real {WHO[backend]} do: every "
        f"pair it puts more than {TIE:.0%} apart in the same order (one setting; this library's "
        "check of its simulator)."
    )


def _ordering(backend, real, reach, rows) -> tuple[str, str, bool | None]:
    """The real backend orders every pair of schemes that the simulated clock separates by
    more than :data:`TIE` (relative) as the simulated clock does; closer pairs are ties."""
    (s, ratio) = next(iter({(s, r) for _, s, r in real}))
    schemes = gradient_coding.SCHEMES
    trials = len({r["trial"] for r in rows if r.get("backend") == backend})
    setting = f"s = {s}, delay mean = compute, {trials} trial(s) on {backend}"
    real_order = sorted(schemes, key=lambda k: real[(k, s, ratio)][0])
    if (schemes[0], s, ratio) not in reach:
        return f"{backend}: {' < '.join(real_order)}; simulated: not run", setting, None
    sim = {k: reach[(k, s, ratio)][0] for k in schemes}
    sim_order = sorted(schemes, key=sim.get)
    swapped, separated_swaps = [], 0
    for a, b in itertools.combinations(schemes, 2):
        if (sim[a] < sim[b]) != (real[(a, s, ratio)][0] < real[(b, s, ratio)][0]):
            gap = abs(sim[a] - sim[b]) / min(sim[a], sim[b])
            swapped.append(f"{a}/{b} {gap:.1%} apart simulated")
            separated_swaps += gap > TIE
    measured = (
        f"{backend}: {' < '.join(real_order)}; simulated: {' < '.join(sim_order)}; "
        f"{len(swapped)} of 21 pairs swapped" + (f" ({', '.join(swapped)})" if swapped else "")
    )
    return measured, setting, separated_swaps == 0


GOAL_REGIMES = ("bimodal-p0.02-x10", "bimodal-p0.05-x10")  # the goal: rare heavy stragglers
GOAL_LEVEL = 1.5


def frontier_claims(rows: list[dict], config=None) -> list[Claim]:
    """Where coding wins and where it loses at equal resources: per regime (``config.regimes``,
    or those in the rows), whether a code within 1 point of the exact model's accuracy has a
    lower p99.9 than replication and level-matched hedging at every level; and the issue's
    goal at 1.5x under rare heavy stragglers (p = 0.02 and 0.05, 10x)."""
    from ..experiments import frontier

    if config is not None:
        regimes, levels = list(config.regimes), [level for level in config.levels if level > 1]
    else:
        regimes = _present(rows, lambda row: row["regime"])
        levels = sorted({level for level in _present(rows, lambda row: row["level"]) if level > 1})

    @functools.cache
    def table():
        return {(e["regime"], e["level"]): e for e in frontier.frontier_table(_some(rows))}

    def entry(regime, level):
        return _need(table(), (regime, level), f"{regime} {level:g}x replication, hedge and coded")

    def setting(e):
        return (
            f"K = {_some(rows)[0]['num_inputs']}, {e['queries']} held-out queries per scheme "
            f"(its knob chosen on the other {e['select_queries']}), {_some(rows)[0]['task']}, decoding "
            f"{_some(rows)[0].get('decode_cost', 0.0):g} service times"
        )

    def describe(e):
        ratio, low, high = e["vs_replication"]
        hedge, hedge_low, hedge_high = e["vs_hedge"]
        knob = f" {e['knob']} = {e['knob_value']:g}" if e["knob"] else ""
        return (
            f"{e['scheme']}{knob}: p99.9 {e['p999']:.3g}, accuracy {e['accuracy']:.3f} (model "
            f"{e['model_acc']:.3f}); / replication {ratio:.3g} [{low:.3g}, {high:.3g}], / hedge "
            f"{hedge:.3g} [{hedge_low:.3g}, {hedge_high:.3g}] (its extra load {e['hedge_extra_load']:.3f})"
        )

    def goal(regime):
        e = entry(regime, GOAL_LEVEL)
        held = e["keeps_accuracy"] and e["vs_replication"][0] <= 0.2 and e["vs_hedge"][0] <= 0.6
        return describe(e), f"{regime}, {GOAL_LEVEL:g}x, " + setting(e), held

    def everywhere(regime):
        found = [table()[(regime, level)] for level in levels if (regime, level) in table()]
        if not found:
            raise Unmeasured(f"no {regime} rows with replication, hedging and a code at one level")
        said = [
            f"{e['level']:g}x {e['verdict']} ({e['scheme']} {e['p999']:.3g} at accuracy {e['accuracy']:.3f}; "
            f"replication {e['replication_p999']:.3g}, hedge {e['hedge_p999']:.3g})"
            for e in found
        ]
        missing = [f"{level:g}x" for level in levels if (regime, level) not in table()]
        return (
            "; ".join(said) + (f"; not measured at {', '.join(missing)}" if missing else ""),
            f"{regime}, " + setting(found[0]),
            all(e["wins"] for e in found) and not missing,
        )

    def against_parm(regime):
        e = entry(regime, GOAL_LEVEL)
        if not e["parm"]:
            raise Unmeasured(f"no ParM rows at {regime} {GOAL_LEVEL:g}x")
        parm_keeps = e["parm_accuracy"] >= e["model_acc"] - frontier.TOLERANCE
        held = e["keeps_accuracy"] and (not parm_keeps or e["p999"] <= e["parm_p999"])
        return (
            f"{e['scheme']}: p99.9 {e['p999']:.3g} at accuracy {e['accuracy']:.3f}; {e['parm']}: p99.9 "
            f"{e['parm_p999']:.3g} at accuracy {e['parm_accuracy']:.3f} (model {e['model_acc']:.3f})",
            f"{regime}, {GOAL_LEVEL:g}x, " + setting(e),
            held,
        )

    out = [
        _claim(
            "frontier",
            "frontier",
            f"Goal: under rare heavy stragglers ({regime}) at {GOAL_LEVEL:g}x resources, the best code "
            "within 1 point of the exact model's accuracy has a p99.9 at most 1/5 of replication's and "
            "at most 0.6x that of hedging at the same extra load.",
            goal,
            regime,
            where=f"{regime}, {GOAL_LEVEL:g}x",
        )
        for regime in regimes
        if regime in GOAL_REGIMES
    ]
    out += [
        _claim(
            "frontier",
            "frontier",
            f"At every resource level, a code within 1 point of the exact model's accuracy has a lower "
            f"per-query p99.9 than both replication and hedging at the same extra load ({regime}).",
            everywhere,
            regime,
            where=str(regime),
        )
        for regime in regimes
    ]
    out += [
        _claim(
            "frontier",
            "frontier",
            f"At {GOAL_LEVEL:g}x, a code within 1 point of the exact model's accuracy has a p99.9 no higher "
            f"than learned parity's (ParM, k = 2) where ParM keeps that accuracy too ({regime}).",
            against_parm,
            regime,
            where=f"{regime}, {GOAL_LEVEL:g}x",
        )
        for regime in regimes
        if GOAL_LEVEL in levels
    ]
    return out


GOAL_UTILISATION = 0.5
GOAL_RATIO = 1 / 3
LIVE_TOLERANCE = 0.25  # live p50 within 25% of the simulated clock's; p99 orders of pairs 25% apart


def serving_claims(rows: list[dict], config=None) -> list[Claim]:
    """The issue's goal at 1.5x, 50% utilisation, rare heavy stragglers; whether coding's
    advantage holds at higher load, per regime (``config.regimes``, or those in the rows); coding
    against ParM; and the simulated clock against each live backend (``config.live_backends``,
    or those in the rows). ParM's own claim is a group of this paper, not ParM's paper: ParM's
    claim (a learned parity model at equal resources beats replication's tail) is tested here
    against this library's codes, on the same replicas."""
    from ..experiments import serving

    if config is not None:
        regimes, live = list(config.regimes), list(config.live_backends)
    else:
        regimes = _present([r for r in rows if r.get("grid") == "full"], lambda row: row["regime"])
        live = [b for b in serving.LIVE if any(r.get("backend") == b for r in rows)]

    @functools.cache
    def table():
        return serving.cells(_some(rows))

    def at(regime, utilisation):
        try:
            return serving.compare(table(), regime, utilisation)
        except KeyError:
            raise Unmeasured(
                f"no {regime} rows at utilisation {utilisation:g} with a baseline and a code"
            ) from None

    def setting(regime):
        full = [r for r in rows if r.get("grid") == "full" and r.get("regime") == regime] or _some(rows)
        first = full[0]
        replicates = len({r["replicate"] for r in full})
        return (
            f"{regime}, R = {first['num_replicas']} replicas for every scheme, codes "
            f"K = {first['group_size']}, N = {first['num_workers']}, {first['queries']} "
            f"{first.get('arrivals', 'poisson')} queries x "
            f"{replicates} replicate(s), simulated clock"
        )

    def describe(c):
        code, ratio = c["code_entry"], c["ratio"]
        return (
            f"{c['code']}: p99.9 {code['p999']:.3g} against {c['baseline']} {c['baseline_p999']:.3g}, ratio "
            f"{ratio.estimate:.3g} [{ratio.low:.3g}, {ratio.high:.3g}]; accuracy {code['accuracy']:.3f} "
            f"(model {code['model_acc']:.3f}, decoded queries included)"
        )

    def goal(regime):
        c = at(regime, GOAL_UTILISATION)
        held = c["keeps_accuracy"] and c["ratio"].estimate <= GOAL_RATIO
        return describe(c), setting(regime) + f", utilisation {GOAL_UTILISATION:g}", held

    def higher_load(regime):
        utilisations = sorted(
            {u for (b, g, reg, u, _) in table() if (b, g, reg) == ("simulated", "full", regime)}
        )
        found = {}
        for u in utilisations:
            try:
                found[u] = serving.compare(table(), regime, u)
            except KeyError:
                continue
        if not found:
            raise Unmeasured(f"no {regime} rows with a baseline and a code at one utilisation")
        wins = [u for u, c in found.items() if c["wins"]]
        tail = [u for u, c in found.items() if c["code_entry"]["p999"] < c["baseline_p999"]]
        lost = [u for u in found if u not in wins and u > min(wins, default=-1.0)]
        said = ", ".join(
            f"{u:g}: {c['ratio'].estimate:.2g} at accuracy {c['code_entry']['accuracy']:.3f}"
            for u, c in found.items()
        )
        crossover = (
            f"advantage at {', '.join(f'{u:g}' for u in wins)}, lost from {min(lost):g}"
            if wins and lost
            else ("advantage at every utilisation" if wins else "no advantage at any utilisation")
        )
        tail_text = f"p99.9 below the baseline's at {', '.join(f'{u:g}' for u in tail) or 'none'}"
        return (
            f"{crossover}; {tail_text}; code / baseline p99.9 (the code's accuracy) at {said}",
            setting(regime),
            len(wins) == len(found),
        )

    def against_parm(regime):
        c = at(regime, GOAL_UTILISATION)
        if c["parm"] is None:
            raise Unmeasured(
                "no ParM rows (a run that trains no parity model leaves ParM out when it is not cached)"
            )
        parm, code = c["parm_entry"], c["code_entry"]
        parm_keeps = serving.keeps_accuracy(parm)
        held = c["keeps_accuracy"] and (not parm_keeps or code["p999"] <= parm["p999"])
        return (
            f"{c['code']}: p99.9 {code['p999']:.3g} at accuracy {code['accuracy']:.3f}; {c['parm']}: p99.9 "
            f"{parm['p999']:.3g} at accuracy {parm['accuracy']:.3f} (model {code['model_acc']:.3f})",
            setting(regime) + f", utilisation {GOAL_UTILISATION:g}",
            held,
        )

    def live_check(backend):
        small = {k: e for k, e in table().items() if k[1] == "small"}
        pairs = [
            (k, e, small[("simulated", "small", *k[2:])])
            for k, e in small.items()
            if k[0] == backend and ("simulated", "small", *k[2:]) in small
        ]
        if not pairs:
            raise Unmeasured(f"no small-grid rows on {backend} and the simulated clock")
        off = [
            f"{k[4]} at {k[3]:g}: {e['p50']:.2f} vs {sim['p50']:.2f}"
            for k, e, sim in pairs
            if abs(e["p50"] / sim["p50"] - 1) > LIVE_TOLERANCE
        ]
        swapped, separated = [], 0
        by_setting: dict[tuple, list] = {}
        for k, e, sim in pairs:
            by_setting.setdefault(k[2:4], []).append((k[4], e["p99"], sim["p99"]))
        total = 0
        for (_, u), schemes in by_setting.items():
            for (a, live_a, sim_a), (b, live_b, sim_b) in itertools.combinations(schemes, 2):
                total += 1
                if (sim_a < sim_b) != (live_a < live_b):
                    gap = abs(sim_a - sim_b) / min(sim_a, sim_b)
                    swapped.append(f"{a}/{b} at {u:g} ({gap:.0%} apart simulated)")
                    separated += gap > LIVE_TOLERANCE
        first = next(r for r in rows if r.get("backend") == backend and r.get("grid") == "small")
        replicates = len({r["replicate"] for r in rows if r.get("backend") == backend})
        return (
            f"p50 within {LIVE_TOLERANCE:.0%}: {len(pairs) - len(off)} of {len(pairs)}"
            + (f" (off: {'; '.join(off)})" if off else "")
            + f"; p99 order: {len(swapped)} of {total} pairs swapped"
            + (f" ({', '.join(swapped)})" if swapped else ""),
            f"{first['regime']}, R = {first['num_replicas']}, "
            f"BACC {first['group_size']}/{first['num_workers']}, "
            f"{first['queries']} queries x {replicates} replicate(s) at utilisation "
            f"{', '.join(f'{u:g}' for u in sorted({k[3] for k, _, _ in pairs}))}, one clock unit "
            f"{first.get('time_unit_s', '')} s, the same draws on both",
            not off and separated == 0,
        )

    out = [
        _claim(
            "serving",
            "serving",
            f"Goal: at 1.5x resources, {GOAL_UTILISATION:.0%} utilisation and rare heavy stragglers "
            f"({regime}), the coded scheme's p99.9 is at most 1/3 of the best equal-resources baseline's "
            "(replication or hedging), with accuracy within 1 point of the exact model.",
            goal,
            regime,
            where=f"{regime}, utilisation {GOAL_UTILISATION:g}",
        )
        for regime in regimes
        if regime == serving.HEADLINE_REGIME
    ]
    out += [
        _claim(
            "serving",
            "serving",
            f"Coding's advantage holds at higher load: at every utilisation run, a code within 1 point of "
            f"the model's accuracy has a lower p99.9 than the best equal-resources baseline ({regime}).",
            higher_load,
            regime,
            where=str(regime),
        )
        for regime in regimes
    ]
    out += [
        _claim(
            "serving",
            "serving",
            f"At {GOAL_UTILISATION:.0%} utilisation, a code within 1 point of the model's accuracy has a "
            f"p99.9 no higher than learned parity's (ParM) where ParM keeps that accuracy too ({regime}).",
            against_parm,
            regime,
            where=f"{regime}, utilisation {GOAL_UTILISATION:g}",
        )
        for regime in regimes
        if regime == serving.HEADLINE_REGIME
    ]
    out += [
        _claim(
            "serving",
            "serving",
            f"The simulated clock predicts live {WHO.get(backend, backend)}: every scheme's p50 within "
            f"{LIVE_TOLERANCE:.0%} of the simulated one, and every pair of schemes it puts more than "
            f"{LIVE_TOLERANCE:.0%} apart in p99 in the same order (small grid, the same draws).",
            live_check,
            backend,
            where=f"on {backend}",
        )
        for backend in live
    ]
    return out


CLAIMS: dict[str, Callable[..., list[Claim]]] = {
    "stragglers": stragglers_claims,
    "polynomial": polynomial_claims,
    "rates": rates_claims,
    "latency": latency_claims,
    "manifold": manifold_claims,
    "adversarial": adversarial_claims,
    "gradient-coding": gradient_coding_claims,
    "frontier": frontier_claims,
    "serving": serving_claims,
}


def claims_of(name: str, rows: list[dict], config=None) -> list[Claim]:
    """The claims experiment ``name`` checks, read from its ``rows``; an experiment no paper
    makes a claim about gives none.

    With its ``config`` (the configuration that wrote the rows) every claim that configuration
    sets out to test is there, each network, p, backend or task it runs; those the rows lack are
    "not measured", saying what is missing. Without it, the claims of what the rows hold."""
    reader = CLAIMS.get(name)
    return reader(rows, config) if reader is not None else []
