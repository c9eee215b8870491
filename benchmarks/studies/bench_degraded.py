"""Degraded-mode accuracy of systematic codes: how well a query whose own (systematic)
worker is missing is decoded, design against design, on the same draws (issue 21,
section 3; the figures and what they say are in docs/degraded.rst).

Setting: K queries (MNIST test images) per batch through LeNet-5 (or the ViT),
N = round(r K) workers at resource level r in {1.1, 1.25, 1.5, 2}: K systematic workers
compute the raw queries, N - K parity workers coded inputs. Per trial,
m = max(1, round(0.05 K)) queries lose their systematic worker (5% of the queries missing)
and every parity worker straggles independently with probability 0.05. The *degraded-mode
relative accuracy* is the argmax agreement between the decoded estimate of f(x_k) and
f(x_k), over the decoded (missing) queries only, pooled over trials; *overall* is the
agreement over all K queries (a returned systematic result is exact).

Designs, ``<code>+<decoder>`` (all on the same batch, the same missing queries and the same
parity stragglers: the j-th parity worker along the code's line straggles in every design
or in none):

- codes: ``manifold``, :class:`~codedcomputing.ManifoldGCC` with ``degraded="spline"``
  (the baseline: chain order, arc spacing, inputs snapped onto Chebyshev worker points, the
  parities wherever the other points fall; GCC's decoder for every input); ``between``,
  the same order and spacing unsnapped with each parity midway between two neighbouring
  inputs (one per gap, the gaps spread evenly; more parities than gaps subdivide them),
  ``GCC(K, N, alpha=..., beta=...)``;
  ``group``, parity j the mean of the j-th run of consecutive inputs in the chain order;
  ``manifold-ref`` (``--reference-order M``), ManifoldGCC with M training images as
  reference;
- decoders: none (GCC's default decoder); ``invert``, the encoder being linear,
  ``z = E x``, the missing queries' outputs solve in least squares
  ``y_p - sum_{returned k} E_pk f(x_k) = sum_{missing k} E_pk f(x_k)`` over the returned
  parities with a weight of at least ``--local`` on a missing query (exact for an affine f;
  uncovered queries fall back to GCC's decoder, or to ``kernel`` for ``group``);
  ``kernel``, :func:`codedcomputing.codes.input_space.kernel_estimates` on the returned
  (coded input, output) pairs; ``kernel+ref``, the same with the ``--neighbours`` training
  images nearest the query and their outputs (computed once, offline) added;
- ``manifold+library``: ``ManifoldGCC(K, N)`` as users get it (``degraded="input-space"``,
  the default since this benchmark: the kernel decoder inside the bound code, with the
  library's amplitude, length and ridge (1e-6), not ``--amplitude``/``--length``;
  ``manifold+kernel`` is the same decoder at ridge 1e-8);
- ``surrogate``: those reference pairs alone (no code at all);
- ``replicate``: fractional replication at the same N (N - K random queries get a second
  copy): a missing query is exact if its copy returned, else unanswered (counted wrong).

``--pool-factor F`` draws each batch as one of the F groups of K consecutive queries in
the chain order of F K random queries (a server grouping similar queries from a queue).

Hyperparameters (``--local``, ``--amplitude``, ``--length``) were chosen on calibration
batches (``--calibrate``: the even-indexed test images, seed 1); reported figures use the
odd-indexed test images and seed 2.

    python benchmarks/studies/bench_degraded.py                 # --quick: K = 50, 40 trials
    python benchmarks/studies/bench_degraded.py --full          # K = 20, 50, 100, 200 trials
    python benchmarks/studies/bench_degraded.py --model vit --sizes 50 --trials 200 --pool-factor 4
    python benchmarks/studies/bench_degraded.py --calibrate     # the tuning split

Intervals: 95% paired bootstrap over trials (the same resampled trials for every design);
``diff`` is the design's degraded accuracy minus the baseline's on the same resamples.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import codedcomputing as cc
from codedcomputing.codes.input_space import AMPLITUDE, LENGTH, kernel_estimates
from codedcomputing.codes.layout import ChainLayout

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import say

LEVELS = (1.1, 1.25, 1.5, 2.0)
MISSING_SHARE = 0.05
PARITY_STRAGGLE = 0.05


def between_points(sorted_alpha: np.ndarray, parities: int) -> np.ndarray:
    """Parity points between neighbouring inputs' points (sorted): one per gap for gaps
    chosen evenly along the order; with more parities than gaps, gaps are subdivided (c
    parities in a gap at its j / (c + 1) fractions)."""
    gaps = sorted_alpha.size - 1
    counts = np.zeros(gaps, dtype=int)
    if parities <= gaps:
        # evenly spread gaps: gap i gets one where floor((i+1) P / G) steps up
        chosen = np.floor((np.arange(parities) + 0.5) * gaps / parities).astype(int)
        counts[chosen] += 1
    else:
        counts[:] = parities // gaps
        rest = parities - counts.sum()
        chosen = np.floor((np.arange(rest) + 0.5) * gaps / rest).astype(int) if rest else []
        counts[chosen] += 1
    points = []
    for i, c in enumerate(counts):
        a, b = sorted_alpha[i], sorted_alpha[i + 1]
        points.extend(a + (b - a) * np.arange(1, c + 1) / (c + 1))
    return np.asarray(points)


def encoder_matrix(code) -> np.ndarray:
    """E (N, K): worker n's coded input is sum_k E_nk x_k (the codes here are linear)."""
    return np.asarray(code.encode(np.eye(code.num_inputs)), dtype=np.float64)


def invert(E, Y, alive, systematic, missing, fallback, local):
    """The local inversion decoder (module docstring). ``systematic[k]``: worker of input
    k; ``Y`` rows in worker order (all workers; only ``alive`` rows are read)."""
    estimates = fallback.copy()
    alive_set = np.zeros(E.shape[0], dtype=bool)
    alive_set[alive] = True
    is_systematic = np.zeros(E.shape[0], dtype=bool)
    is_systematic[systematic] = True
    parities = np.flatnonzero(alive_set & ~is_systematic)
    known = np.setdiff1d(np.arange(E.shape[1]), missing)
    weights = E[np.ix_(parities, missing)]
    use = np.max(np.abs(weights), axis=1) >= local
    covered = np.max(np.abs(weights[use]), axis=0, initial=0.0) >= local
    if not np.any(use) or not np.any(covered):
        return estimates
    rows = parities[use]
    rhs = Y[rows] - E[np.ix_(rows, known)] @ Y[systematic[known]]
    solved = np.linalg.lstsq(
        E[np.ix_(rows, missing[covered])],
        rhs - E[np.ix_(rows, missing[~covered])] @ fallback[missing[~covered]],
        rcond=None,
    )[0]
    estimates[missing[covered]] = solved
    return estimates


def systematic_workers(code) -> np.ndarray:
    """Worker of each input: the one whose point is the input's point (-1: none)."""
    where = {float(b): n for n, b in enumerate(code.beta)}
    return np.array([where.get(float(a), -1) for a in code.alpha])


@dataclass(frozen=True)
class Coded:
    """One code's batch: coded inputs ``Z`` (N, ...), the linear encoder ``E`` (N, K), the
    systematic worker of each input, the parity workers along the line, and the GCC that
    decodes it (None: the group code, which has no spline decoder)."""

    Z: np.ndarray
    E: np.ndarray
    systematic: np.ndarray
    parities: np.ndarray
    gcc: cc.GCC | None


def of_gcc(code: cc.GCC, X: np.ndarray) -> Coded:
    systematic = systematic_workers(code)
    if np.any(systematic < 0):
        raise RuntimeError("an input is not on a worker's point")
    others = np.setdiff1d(np.arange(code.num_workers), systematic)
    others = others[np.argsort(code.beta[others], kind="stable")]
    return Coded(np.asarray(code.encode(X)), encoder_matrix(code), systematic, others, code)


def group_code(X: np.ndarray, order: np.ndarray, N: int) -> Coded:
    """Systematic workers 0..K-1; parity j = mean of the j-th run of consecutive inputs in
    ``order`` (N - K runs, sizes as equal as possible)."""
    K = len(X)
    E = np.zeros((N, K))
    E[np.arange(K), np.arange(K)] = 1.0
    for j, members in enumerate(np.array_split(order, N - K)):
        E[K + j, members] = 1.0 / members.size
    Z = (E @ X.reshape(K, -1).astype(np.float64)).reshape((N, *X.shape[1:])).astype(X.dtype)
    return Coded(Z, E, np.arange(K), np.arange(K, N), None)


def reference_decode(X, missing, coded, Y, alive, bank, neighbours, amplitude, length, with_code):
    """The kernel decoder on the ``neighbours`` reference images nearest each missing input
    (their outputs computed once, offline), with the code's returned pairs or without."""
    bank_x, bank_y = bank
    flat = coded.Z.reshape(len(coded.Z), -1).astype(np.float64)
    out = np.empty((missing.size, bank_y.shape[1]))
    for i, k in enumerate(missing):
        x = X[k].reshape(1, -1).astype(np.float64)
        near = np.argpartition(np.sum((bank_x - x) ** 2, axis=1), neighbours)[:neighbours]
        if with_code:
            inputs = np.r_[flat, bank_x[near]]
            outputs = np.r_[Y.astype(np.float64), bank_y[near]]
            rows = np.r_[alive, len(flat) + np.arange(neighbours)]
        else:
            inputs, outputs, rows = bank_x[near], bank_y[near], np.arange(neighbours)
        out[i] = kernel_estimates(inputs, outputs[rows], rows, x, amplitude=amplitude, length=length)[0]
    return out


def draw_batch(pool: np.ndarray, K: int, factor: int, rng) -> np.ndarray:
    """K queries: drawn at random (``factor`` 1), or the queries of one of the ``factor``
    groups of K consecutive ones in the chain order of ``factor x K`` random queries (a
    server that holds a queue of that many and groups similar ones)."""
    if factor == 1:
        return pool[rng.choice(len(pool), K, replace=False)]
    queue = pool[rng.choice(len(pool), factor * K, replace=False)]
    order = cc.ManifoldGCC(len(queue), len(queue), systematic=False).bind(queue).layout.order
    group = rng.integers(factor)
    return queue[np.sort(order[group * K : (group + 1) * K])]


# design -> (code, decoder)
DESIGNS = {
    "manifold": ("manifold", "gcc"),
    "manifold+invert": ("manifold", "invert"),
    "manifold+kernel": ("manifold", "kernel"),
    "manifold+library": ("manifold", "library"),
    "between": ("between", "gcc"),
    "between+invert": ("between", "invert"),
    "between+kernel": ("between", "kernel"),
    "group+invert": ("group", "invert"),
    "group+kernel": ("group", "kernel"),
    "surrogate": ("between", "surrogate"),
    "between+kernel+ref": ("between", "kernel+ref"),
    "replicate": (None, None),
    # with --reference-order only
    "manifold-ref": ("manifold-ref", "gcc"),
    "manifold-ref+kernel": ("manifold-ref", "kernel"),
}
BASELINE = "manifold"


def trial(f, X, N, rng, params) -> dict:
    """Correct decoded queries per design for one batch (module docstring)."""
    K = len(X)
    fX = f(X)
    missing = np.sort(rng.choice(K, max(1, round(MISSING_SHARE * K)), replace=False))
    mask = rng.random(N - K) < PARITY_STRAGGLE  # the j-th parity along the line straggles
    copied = rng.permutation(K)[: N - K]  # replication: these queries get a second copy
    loose = cc.ManifoldGCC(K, N, systematic=False).bind(X)  # the same order, unsnapped
    parity = between_points(np.sort(loose.alpha), N - K)
    codes = {
        "manifold": of_gcc(cc.ManifoldGCC(K, N, degraded="spline").bind(X), X),
        "between": of_gcc(cc.GCC(K, N, alpha=loose.alpha, beta=np.sort(np.r_[loose.alpha, parity])), X),
        "group": group_code(X, loose.layout.order, N),
    }
    if params["reference_code"] is not None:  # the chain on geodesics through training images
        codes["manifold-ref"] = of_gcc(params["reference_code"].bind(X), X)
    estimates = {}
    for name, coded in codes.items():
        dead = np.r_[coded.systematic[missing], coded.parities[mask]]
        alive = np.setdiff1d(np.arange(N), dead)
        Y = f(coded.Z)
        targets = X.reshape(K, -1)[missing].astype(np.float64)
        flat = coded.Z.reshape(N, -1).astype(np.float64)
        kernel = kernel_estimates(
            flat, Y[alive], alive, targets, amplitude=params["amplitude"], length=params["length"]
        )
        if coded.gcc is not None:
            spline = np.asarray(coded.gcc.decode(Y[alive], alive))
        else:  # the group code has no line: the kernel decoder is the fallback
            spline = Y[coded.systematic].astype(np.float64)
            spline[missing] = kernel
        for design, (code_name, decoder) in DESIGNS.items():
            if code_name != name:
                continue
            if decoder == "gcc":
                estimates[design] = spline[missing]
            elif decoder == "invert":
                inverted = invert(coded.E, Y, alive, coded.systematic, missing, spline, params["local"])
                estimates[design] = inverted[missing]
            elif decoder == "kernel":
                estimates[design] = kernel
            elif decoder == "library":  # the bound code's own decode, as run_queries calls it
                estimates[design] = np.asarray(cc.ManifoldGCC(K, N).bind(X).decode(Y[alive], alive))[missing]
            else:
                estimates[design] = reference_decode(
                    X,
                    missing,
                    coded,
                    Y,
                    alive,
                    params["bank"],
                    params["neighbours"],
                    params["amplitude"],
                    params["length"],
                    with_code=decoder == "kernel+ref",
                )
    truth = np.argmax(fX[missing], axis=1)
    correct = {d: int(np.sum(np.argmax(e, axis=1) == truth)) for d, e in estimates.items()}
    # replication: a missing query is answered (exactly) by its copy when it has one that returned
    copies_back = copied[~mask[: copied.size]]
    correct["replicate"] = int(np.sum(np.isin(missing, copies_back)))
    return correct


def accuracy_rows(correct: dict, m: int, K: int, draws: int, rng) -> list[tuple]:
    """Per design: degraded accuracy with a 95% interval, overall accuracy, and the paired
    difference to the baseline with its interval (the same resampled trials for all)."""
    trials = len(correct[BASELINE])
    picks = rng.integers(0, trials, size=(draws, trials))
    base = np.asarray(correct[BASELINE], dtype=float)
    base_boot = base[picks].sum(axis=1) / (m * trials)
    rows = []
    for design, counts in correct.items():
        c = np.asarray(counts, dtype=float)
        acc = c.sum() / (m * trials)
        boot = c[picks].sum(axis=1) / (m * trials)
        diff = boot - base_boot
        overall = 1 - (m * trials - c.sum()) / (K * trials)
        rows.append(
            (
                design,
                acc,
                *np.percentile(boot, [2.5, 97.5]),
                overall,
                acc - base.sum() / (m * trials),
                *np.percentile(diff, [2.5, 97.5]),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the default: K = 50, 40 trials")
    parser.add_argument("--full", action="store_true", help="K = 20, 50, 100 and 200 trials")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--levels", type=float, nargs="+", default=list(LEVELS))
    parser.add_argument("--model", default="lenet5", choices=("lenet5", "vit"))
    parser.add_argument("--calibrate", action="store_true", help="the tuning split and seed")
    parser.add_argument("--seed", type=int, default=None, help="default: 1 with --calibrate, else 2")
    parser.add_argument("--local", type=float, default=0.2, help="inversion: least parity weight")
    parser.add_argument("--amplitude", type=float, default=AMPLITUDE, help="kernel: RBF amplitude a")
    parser.add_argument("--length", type=float, default=LENGTH, help="kernel: RBF length l (times s)")
    parser.add_argument("--neighbours", type=int, default=20, help="reference images per missing query")
    parser.add_argument(
        "--pool-factor",
        type=int,
        default=1,
        help="> 1: each batch is one of the groups of K cut from the chain order of a pool of "
        "factor x K queries (queries grouped by similarity); 1: K queries drawn at random",
    )
    parser.add_argument(
        "--reference-order",
        type=int,
        default=0,
        help="> 0: also ManifoldGCC with this many training images as reference (geodesic order)",
    )
    parser.add_argument("--designs", nargs="+", default=None, help="a subset to print (all are run)")
    parser.add_argument("--bootstrap", type=int, default=2000)
    args = parser.parse_args()
    trials = args.trials or (200 if args.full else 40)
    sizes = args.sizes or ([20, 50, 100] if args.full else [50])
    f = cc.models.numpy_function(args.model, progress=False)
    data = cc.datasets.mnist()
    # calibration and report draw from disjoint halves of the test images, with other seeds
    pool = data.test_x[0::2] if args.calibrate else data.test_x[1::2]
    seed = args.seed if args.seed is not None else (1 if args.calibrate else 2)
    start = time.perf_counter()
    bank = (
        data.train_x.reshape(len(data.train_x), -1).astype(np.float64),
        f(data.train_x).astype(np.float64),
    )
    say(
        f"model {args.model}; {'calibration' if args.calibrate else 'report'} split, seed {seed}; "
        f"batches: {'random' if args.pool_factor == 1 else f'grouped from queues of {args.pool_factor} K'}; "
        f"reference bank: {len(bank[0])} training images' outputs in {time.perf_counter() - start:.1f} s"
    )
    reference = None
    if args.reference_order:
        picks = np.random.default_rng(seed).choice(len(data.train_x), args.reference_order, replace=False)
        reference = data.train_x[picks]
    params = {
        "local": args.local,
        "amplitude": args.amplitude,
        "length": args.length,
        "bank": bank,
        "neighbours": args.neighbours,
    }
    say(
        f"{'design':<20} {'K':>4} {'level':>5} {'N':>4} {'degraded':>8} {'95% CI':>15} "
        f"{'overall':>7} {'diff':>7} {'95% CI (paired)':>17}"
    )
    for K in sizes:
        m = max(1, round(MISSING_SHARE * K))
        for level in args.levels:
            N = round(level * K)
            if K < 3 or N <= K:
                parser.error(f"K = {K} at {level}x gives N = {N}: need K >= 3 and N > K")
            rng = np.random.default_rng([seed, K, N])
            params["reference_code"] = (
                cc.ManifoldGCC(K, N, layout=ChainLayout(reference=reference), degraded="spline")
                if reference is not None
                else None
            )
            correct = {d: [] for d in DESIGNS if reference is not None or not d.startswith("manifold-ref")}
            start = time.perf_counter()
            for _ in range(trials):
                X = draw_batch(pool, K, args.pool_factor, rng)
                for design, count in trial(f, X, N, rng, params).items():
                    correct[design].append(count)
            seconds = time.perf_counter() - start
            for row in accuracy_rows(correct, m, K, args.bootstrap, np.random.default_rng([seed, K, N, 99])):
                design, acc, lo, hi, overall, diff, dlo, dhi = row
                if args.designs and design not in args.designs:
                    continue
                say(
                    f"{design:<20} {K:>4} {level:>5.2f} {N:>4} {acc:>8.3f} [{lo:.3f}, {hi:.3f}] "
                    f"{overall:>7.4f} {diff:>+7.3f} [{dlo:+.3f}, {dhi:+.3f}]"
                )
            say(f"# K = {K}, N = {N}: {trials} trials x {m} missing queries, {seconds:.1f} s")


if __name__ == "__main__":
    main()
