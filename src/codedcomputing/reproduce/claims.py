"""The papers' claims, each checked against an experiment's rows.

A claim is one sentence fixed here; what it measured, in which setting, and whether it held
are computed from the rows of the experiment that tests it (as read back from its CSV), so a
report never states a figure that its CSV does not hold. :data:`CLAIMS` maps each experiment
to the function that reads its claims from its rows; :data:`PAPERS` names the papers.

Where a claim needs a threshold the paper does not give (a fitted slope "at the rate"), the
threshold is in the claim's sentence: a rate claim holds when the fitted slope is at most
the theory's plus 0.2 (the resolution of a log-log fit over a few sizes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..experiments import adversarial, gradient_coding, rates
from ..experiments.records import means

__all__ = ["CLAIMS", "PAPERS", "Claim", "Paper", "claims_of"]

SLOPE_TOLERANCE = 0.2
WHO = {"threads": "threads", "ray": "Ray actors"}
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


def _unmeasured(paper, experiment, claim, why) -> Claim:
    return Claim(paper, experiment, claim, why, "", None)


def stragglers_claims(rows: list[dict]) -> list[Claim]:
    """Fig. 2: GCC's mean MSE below BACC's at every S, per network."""
    mse = means(rows, ("model", "scheme", "num_stragglers"), "mse")
    out = []
    for model in dict.fromkeys(row["model"] for row in rows):
        s_values = sorted({s for m, scheme, s in mse if m == model and scheme == "gcc"})
        ratios = {s: mse[(model, "bacc", s)] / mse[(model, "gcc", s)] for s in s_values}
        worst = min(ratios, key=ratios.get)
        trials = len({row["trial"] for row in rows})
        out.append(
            Claim(
                "gcc",
                "stragglers",
                f"GCC's mean MSE is below BACC's at every number of stragglers ({model}).",
                f"BACC / GCC mean MSE >= {_fmt(ratios[worst])} (lowest at S = {worst}); "
                f"above 1 at {sum(r > 1 for r in ratios.values())} of {len(ratios)} S",
                f"K = {rows[0]['num_inputs']}, N = {rows[0]['num_workers']}, S = "
                f"{', '.join(map(str, s_values))}, {trials} trials",
                all(r > 1 for r in ratios.values()),
            )
        )
    return out


def polynomial_claims(rows: list[dict]) -> list[Claim]:
    """Fig. 3: LCC exact up to its threshold and unstable beyond it, where GCC is not."""
    mse = means(rows, ("scheme", "num_stragglers"), "mse")
    n, threshold = rows[0]["num_workers"], rows[0]["recovery_threshold"]
    last_exact = n - threshold
    s_values = sorted({s for scheme, s in mse if scheme == "lcc"})
    exact = [s for s in s_values if s <= last_exact]
    beyond = [s for s in s_values if s > last_exact]
    setting = f"K = {rows[0]['num_inputs']}, N = {n}, LCC's threshold {threshold} results"
    out = []
    if exact:
        worst = max(mse[("lcc", s)] for s in exact)
        out.append(
            Claim(
                "gcc",
                "polynomial",
                "LCC recovers the polynomial exactly (MSE below 1e-10) while at most N minus its "
                "recovery threshold workers straggle.",
                f"LCC's largest mean MSE for S <= {last_exact}: {_fmt(worst)}",
                setting + f", S = {exact[0]}..{exact[-1]}",
                worst < 1e-10,
            )
        )
    if beyond:
        ratios = [mse[("lcc", s)] / mse[("gcc", s)] for s in beyond]
        out.append(
            Claim(
                "gcc",
                "polynomial",
                "Beyond LCC's recovery threshold GCC's mean MSE is below LCC's at every S.",
                f"LCC / GCC mean MSE >= {_fmt(min(ratios))} (median {_fmt(float(np.median(ratios)))})",
                setting + f", S = {beyond[0]}..{beyond[-1]}",
                min(ratios) > 1,
            )
        )
    return out or [_unmeasured("gcc", "polynomial", "LCC's threshold", "no LCC rows")]


def _theory_slope(n_values, p) -> float:
    """The fitted log-log slope of log_{1/p}(N)^3 N^-3 over the grid's N (its local slope is
    -3 + 3 / ln N, shallower than -3 at these sizes)."""
    n = np.asarray(sorted(n_values), dtype=float)
    curve = (np.log(n) / np.log(1.0 / p)) ** 3 * n**-3.0
    return float(np.polyfit(np.log(n), np.log(curve), 1)[0])


def rates_claims(rows: list[dict]) -> list[Claim]:
    """Fig. 4: the worst-case rate N^-3, GCC faster than BACC, and the probabilistic rate."""
    slopes = rates.fit_slopes(rows)
    n_values = sorted({row["num_workers"] for row in rows})
    grid = f"N = {n_values[0]}..{n_values[-1]} ({len(n_values)} sizes), K = {rows[0]['num_inputs']}"
    worst = {row["scheme"]: row for row in slopes if row["panel"] == rates.WORST}
    out = []
    if "gcc" in worst:
        slope = worst["gcc"]["slope"]
        s = worst["gcc"]["num_stragglers"]
        out.append(
            Claim(
                "gcc",
                "rates",
                f"With at most S stragglers GCC's MSE decays at least as N^-3: its fitted log-log "
                f"slope is at most -3 + {SLOPE_TOLERANCE}.",
                f"slope {slope:.2f}",
                grid + f", S = {s} contiguous stragglers",
                slope <= -3.0 + SLOPE_TOLERANCE,
            )
        )
    if "gcc" in worst and "bacc" in worst:
        g, b = worst["gcc"]["slope"], worst["bacc"]["slope"]
        out.append(
            Claim(
                "gcc",
                "rates",
                "Under worst-case stragglers GCC's MSE decays faster in N than BACC's.",
                f"slopes GCC {g:.2f}, BACC {b:.2f}",
                grid,
                g < b,
            )
        )
    for row in slopes:
        if row["panel"] == rates.WORST or row["scheme"] != "gcc":
            continue
        p = float(row["p"])
        theory = _theory_slope(n_values, p)
        out.append(
            Claim(
                "gcc",
                "rates",
                f"With each worker straggling with probability p = {p:g}, GCC's MSE decays at least "
                f"as log_(1/p)(N)^3 N^-3: its fitted slope is at most that curve's over the same N "
                f"plus {SLOPE_TOLERANCE}.",
                f"slope {row['slope']:.2f} (the curve's {theory:.2f})",
                grid,
                row["slope"] <= theory + SLOPE_TOLERANCE,
            )
        )
    return out


def latency_claims(rows: list[dict]) -> list[Claim]:
    """Waiting for the fastest workers cuts the tail: GCC's p99 below uncoded's."""
    from ..experiments import latency

    stats = latency.percentiles(rows)
    out = []
    for (backend, delay, name), value in stats.items():
        uncoded = stats.get((backend, delay, "uncoded"))
        if not name.startswith("gcc ") or uncoded is None:
            continue
        ratio = value["p99"] / uncoded["p99"]
        out.append(
            Claim(
                "gcc",
                "latency",
                f"Waiting only for the fastest N - S workers, GCC's p99 latency ({name}) is below "
                "uncoded computation's, which waits for all K.",
                f"p99 {value['p99'] * 1e3:.0f} ms against {uncoded['p99'] * 1e3:.0f} ms ({ratio:.2f}x); "
                f"relative accuracy {value['rel_acc']:.3f}",
                f"{backend} backend, {delay} delays, {value['trials']} calls",
                ratio < 1,
            )
        )
    return out


def manifold_claims(rows: list[dict]) -> list[Claim]:
    """Manifold-aware encoding below standard GCC's MSE under stragglers, consistently."""
    keys = ("task", "num_inputs", "pattern", "scheme", "num_stragglers")
    mse = means(rows, keys, "mse")
    out = []
    for task in dict.fromkeys(row["task"] for row in rows):
        ratios = {
            (k, pattern, s): mse[(t, k, pattern, "manifold-gcc", s)] / mse[(t, k, pattern, "gcc", s)]
            for (t, k, pattern, scheme, s) in mse
            if t == task and scheme == "gcc" and (t, k, pattern, "manifold-gcc", s) in mse
        }
        if not ratios:
            continue
        worst = max(ratios, key=ratios.get)
        ks = sorted({k for k, _, _ in ratios})
        patterns = sorted({p for _, p, _ in ratios})
        out.append(
            Claim(
                "manifold",
                "manifold",
                f"Manifold-aware encoding gives a lower mean MSE than standard GCC under stragglers "
                f"({task}), in every setting.",
                f"ManifoldGCC / GCC mean MSE <= {_fmt(ratios[worst])} (highest at K = {worst[0]}, "
                f"{worst[1]}, S = {worst[2]}); below 1 in {sum(r < 1 for r in ratios.values())} of "
                f"{len(ratios)} settings",
                f"K = {', '.join(map(str, ks))}, N = 5K, {', '.join(patterns)} stragglers",
                all(r < 1 for r in ratios.values()),
            )
        )
    return out


def adversarial_claims(rows: list[dict]) -> list[Claim]:
    """The (q/N)^(6/5) rate, the error vanishing for sublinear q, and the master's cost
    against an error-locating decoder."""
    slopes = adversarial.fit_slopes(rows)
    n_values = sorted({row["num_workers"] for row in rows if row["exponent"] != ""})
    grid = f"N = {n_values[0]}..{n_values[-1]}, q = ceil(N^a)" if n_values else ""
    out = []
    for scheme, who in (
        ("robust-gcc", "the published squared-loss decoder"),
        ("robust-gcc-tukey", "this library's Tukey decoder"),
    ):
        mine = [row for row in slopes if row["scheme"] == scheme]
        if not mine:
            continue
        within = [row for row in mine if row["slope"] <= row["theory"] + SLOPE_TOLERANCE]
        misses = sorted(
            (row for row in mine if row not in within), key=lambda r: r["slope"] - r["theory"], reverse=True
        )
        miss = (
            f"; furthest: {misses[0]['function']} {misses[0]['attack']} a = {misses[0]['exponent']:g}, "
            f"slope {misses[0]['slope']:.2f} against {misses[0]['theory']:.2f}"
            if misses
            else ""
        )
        out.append(
            Claim(
                "robust",
                "adversarial",
                f"With q = N^a adversaries the error of robust GCC ({who}) decays as (q/N)^(6/5): "
                f"every fitted slope is at most (6/5)(a - 1) + {SLOPE_TOLERANCE}.",
                f"{len(within)} of {len(mine)} (function, attack, a) curves{miss}",
                grid + f", attacks {', '.join(sorted({r['attack'] for r in mine}))}",
                len(within) == len(mine),
            )
        )
    published = [row for row in slopes if row["scheme"] == "robust-gcc" and row["exponent"] < 1]
    if published:
        steepest_flat = max(published, key=lambda r: r["slope"])
        out.append(
            Claim(
                "robust",
                "adversarial",
                "The error vanishes as N grows whenever q grows sublinearly (a < 1): every fitted "
                "slope of the published decoder is negative.",
                f"{sum(r['slope'] < 0 for r in published)} of {len(published)} slopes negative; "
                f"the flattest {steepest_flat['slope']:.2f}",
                grid,
                all(r["slope"] < 0 for r in published),
            )
        )
    goal = adversarial.goal_table(rows)
    for function in dict.fromkeys(f for f, *_ in goal):
        cells = {scheme: (m, ms) for f, scheme, m, ms in goal if f == function}
        if "approxifer" not in cells or "robust-gcc" not in cells:
            continue
        ratio = cells["robust-gcc"][1] / cells["approxifer"][1]
        out.append(
            Claim(
                "robust",
                "adversarial",
                f"Robust GCC locates no one, so its master-side decode costs less than the "
                f"error-locating ApproxIFER's ({function}).",
                f"median decode {cells['robust-gcc'][1]:.3g} ms against {cells['approxifer'][1]:.3g} ms "
                f"({ratio:.2f}x)",
                f"N = {adversarial.GOAL[0]}, q = {adversarial.GOAL[1]}, concentrated attack",
                ratio < 1,
            )
        )
    return out


def gradient_coding_claims(rows: list[dict]) -> list[Claim]:
    """PGC against GC (training time), against every baseline, and its convergence in steps;
    the simulated clock's ordering against real threads."""
    reach = gradient_coding.times_to_target(rows)
    target = gradient_coding.target_loss(rows)
    settings = sorted({(s, ratio) for _, s, ratio in reach})
    where = (
        f"n = {rows[0]['num_workers']}, s = {', '.join(str(s) for s in sorted({s for s, _ in settings}))}, "
        f"delay mean {', '.join(f'{r:g}' for r in sorted({r for _, r in settings}))} x compute, "
        f"{rows[0].get('model', 'logistic')} on {rows[0]['dataset']}, target loss {target:.3f} "
        "(simulated clock)"
    )
    out = []
    for code in ("fr", "cr"):
        ratios = {key: reach[(f"gc-{code}", *key)][0] / reach[(f"pgc-{code}", *key)][0] for key in settings}
        worst = min(ratios, key=ratios.get)
        out.append(
            Claim(
                "pgc",
                "gradient-coding",
                f"Pipelined GC reaches the target training loss sooner than GC ({code.upper()}) at every "
                "s and delay.",
                f"GC / PGC time >= {ratios[worst]:.2f}x (s = {worst[0]}, delay {worst[1]:g}x); "
                f"max {max(ratios.values()):.2f}x",
                where,
                all(r > 1 for r in ratios.values()),
            )
        )
    baselines = ("dgd", "is-sgd", "is-gc")
    for pgc in ("pgc-fr", "pgc-cr"):
        losses = [
            (b, key, reach[(b, *key)][0] / reach[(pgc, *key)][0])
            for b in baselines
            for key in settings
            if np.isfinite(reach[(b, *key)][0])
        ]
        behind = [entry for entry in losses if entry[2] <= 1]
        closest = min(losses, key=lambda e: e[2])
        out.append(
            Claim(
                "pgc",
                "gradient-coding",
                f"{pgc.upper()} reaches the target sooner than DGD, IS-SGD and IS-GC at every s and delay.",
                f"baseline / {pgc} time >= {closest[2]:.3f}x ({closest[0]}, s = {closest[1][0]}, "
                f"delay {closest[1][1]:g}x); behind in {len(behind)} of {len(losses)}",
                where,
                not behind,
            )
        )
    steps = {key: (reach[("pgc-cr", *key)][1], reach[("gc-cr", *key)][1]) for key in settings}
    slower = [key for key, (p, g) in steps.items() if p > g]
    out.append(
        Claim(
            "pgc",
            "gradient-coding",
            "PGC-CR's approximate decoding (stale sums, averaged) takes no more steps to the target "
            "than GC-CR's exact decoding.",
            f"steps PGC-CR {min(p for p, _ in steps.values()):.0f}-{max(p for p, _ in steps.values()):.0f} "
            f"against GC-CR {min(g for _, g in steps.values()):.0f}-{max(g for _, g in steps.values()):.0f}; "
            f"more in {len(slower)} of {len(steps)}",
            where,
            not slower,
        )
    )
    for backend in ("threads", "ray"):
        real = gradient_coding.times_to_target(rows, backend=backend)
        if not real:
            continue
        out.append(_ordering_claim(backend, real, reach, rows))
    return out


def _ordering_claim(backend, real, reach, rows) -> Claim:
    """The real backend orders every pair of schemes that the simulated clock separates by
    more than :data:`TIE` (relative) as the simulated clock does; closer pairs are ties."""
    (s, ratio) = next(iter({(s, r) for _, s, r in real}))
    schemes = gradient_coding.SCHEMES
    trials = len({r["trial"] for r in rows if r.get("backend") == backend})
    claim = (
        f"The simulated clock orders the schemes by time to target as real {WHO[backend]} do: every "
        f"pair it puts more than {TIE:.0%} apart in the same order (one setting; this library's "
        "check of its simulator)."
    )
    setting = f"s = {s}, delay mean = compute, {trials} trial(s) on {backend}"
    real_order = sorted(schemes, key=lambda k: real[(k, s, ratio)][0])
    if (schemes[0], s, ratio) not in reach:
        return Claim(
            "pgc",
            "gradient-coding",
            claim,
            f"{backend}: {' < '.join(real_order)}; simulated: not run",
            setting,
            None,
        )
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
    return Claim("pgc", "gradient-coding", claim, measured, setting, separated_swaps == 0)


CLAIMS: dict[str, Callable[[list[dict]], list[Claim]]] = {
    "stragglers": stragglers_claims,
    "polynomial": polynomial_claims,
    "rates": rates_claims,
    "latency": latency_claims,
    "manifold": manifold_claims,
    "adversarial": adversarial_claims,
    "gradient-coding": gradient_coding_claims,
}


def claims_of(name: str, rows: list[dict]) -> list[Claim]:
    """The claims experiment ``name`` checks, read from its ``rows``; an experiment no paper
    makes a claim about gives none."""
    reader = CLAIMS.get(name)
    return reader(rows) if reader is not None else []
