"""The serving comparison ``coded demo`` prints: every scheme on the same replicas and stream.

R LeNet-5 replicas (:class:`~codedcomputing.serving.ThreadServer`, or
:class:`~codedcomputing.serving.RayServer` actors) serve one open-loop Poisson stream of real
MNIST test digits at a stated utilisation. Rare heavy stragglers are injected service times:
each task sleeps ``Bimodal(base=1, p, slowdown)`` clock units (one unit = ``unit_ms``) before
LeNet-5 runs, so a straggler takes ``slowdown`` times the usual time. Every scheme runs at equal
resources (the same R replicas), on the same arrivals, digits and service draws (the same seed):
none (load-balanced, power of two choices), replication (2 copies), hedging (a backup after
``hedge_delay``), the systematic codes (BACC and GCC over groups of ``group_size`` queries with
``parities`` parity tasks each, decoding a query once its own task has run, or waited behind a
running one, for ``tau``, and ``tau`` after its group's close: ``Coded``'s straggling rule) and
ParM (groups of 2 queries, one learned parity task, when its parity model is cached: the demo
does not train it).

Per scheme, one row: latency p50, p99 and p99.9 (ms, submit to answer), accuracy against the
labels, agreement (argmax) with the exact model on the same digits, the share of queries
decoded, and the work per query (``1 + extra_load``: service time spent on copies, hedges and
parities per second of the queries' own tasks). :func:`verdict` turns the rows into one line.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._validation import check_count, check_number, check_probability, check_seed

__all__ = ["QUICK", "DemoConfig", "load_model", "run", "schemes", "verdict"]


@dataclass(frozen=True)
class DemoConfig:
    """The demo's stream and schemes; times in clock units of ``unit_ms`` milliseconds."""

    replicas: int = 6
    queries: int = 1000
    utilisation: float = 0.5
    straggler_p: float = 0.02
    slowdown: float = 10.0
    unit_ms: float = 20.0
    group_size: int = 4
    parities: int = 2
    # chosen on tuning seed 99 (the simulated clock, 4,000 queries of this stream, LeNet-5's own
    # outputs): each scheme's lowest p99.9 among 1.5, 2, 3 and 4 service times (the coded
    # scheme's, at 96.5% agreement with the model; docs/getting-started.rst)
    tau: float = 1.5
    hedge_delay: float = 1.5
    max_group_wait: float = 2.0
    parm: bool = True

    def check(self) -> DemoConfig:
        check_count(self.replicas, "replicas", 2)
        check_count(self.queries, "queries", 1)
        check_number(self.utilisation, "utilisation", low=0.0, low_open=True, high=1.0, high_open=True)
        check_probability(self.straggler_p, "straggler_p")
        check_number(self.slowdown, "slowdown", low=1.0)
        check_number(self.unit_ms, "unit_ms", low=0.0, low_open=True)
        check_count(self.group_size, "group_size", 2)
        check_count(self.parities, "parities", 1)
        if self.group_size + self.parities > self.replicas:
            raise ValueError(
                f"group_size + parities must be at most replicas ({self.replicas}): a group's tasks go "
                f"to distinct replicas, got {self.group_size} + {self.parities}"
            )
        for name in ("tau", "hedge_delay", "max_group_wait"):
            check_number(getattr(self, name), name, low=0.0, low_open=True)
        return self


#: About a second per scheme: fewer queries (the p99.9 of 120 queries is their worst one).
QUICK = DemoConfig(queries=120)

#: Why a scheme of each kind wins on the tail, for :func:`verdict`.
_WHY = {
    "none": "no redundant scheme beat plain load balancing: their extra work lengthened the queues "
    "more than the stragglers did",
    "replication": "every query ran on two replicas and the first copy answered",
    "hedge": "a backup request answered the stragglers' queries, and only queries still waiting paid for it",
    "coded": "the stragglers' queries were decoded from their groups instead of waited for",
    "parm": "the stragglers' queries were rebuilt from their group's parity instead of waited for",
}


def load_model(name: str = "lenet5", say: Callable[[str], None] | None = None) -> Callable:
    """Model ``name`` (from :data:`~codedcomputing.models.MODELS`) as a numpy batch function:
    the weights shipped with the package, else loaded from the cache or trained and cached
    first; ``say`` gets one line saying which, with the model's held-out accuracy (a damaged
    cache entry is retrained: its warning is passed on and the line says "trained")."""
    from .. import models
    from ..errors import DamagedCacheWarning

    is_shipped = models.is_shipped(name)
    cached = models.is_cached(name)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = models.load(name, progress=True)
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    damaged = any(issubclass(warning.category, DamagedCacheWarning) for warning in caught)
    weights = models.weights_path(name, models.MODELS[name][1])
    if is_shipped and not damaged:
        how = "the weights shipped with the package"
    elif cached and not damaged:
        how = f"loaded from the cache ({weights})"
    else:
        how = f"trained in {time.perf_counter() - start:.0f} s and cached ({weights})"
    if say is not None:
        say(f"demo: {name} {how}; held-out accuracy {model.test_accuracy:.2%}")
    return models.numpy_function(model)


def schemes(config: DemoConfig, parity_f: Callable | None = None) -> list[tuple[str, str, object]]:
    """``(label, kind, scheme)`` for every scheme of the demo (ParM only with ``parity_f``)."""
    from ..codes import BACC, GCC
    from ..serving import Coded, Hedge, NoRedundancy, ParM, Replication

    unit = config.unit_ms
    k, n = config.group_size, config.group_size + config.parities
    chosen = [
        ("none", "none", NoRedundancy()),
        ("replication x2", "replication", Replication(2)),
        (f"hedge after {config.hedge_delay * unit:g} ms", "hedge", Hedge(config.hedge_delay)),
    ]
    for code in (BACC, GCC):
        scheme = Coded(code(k, n, systematic=True), tau=config.tau, max_group_wait=config.max_group_wait)
        chosen.append((f"coded {code.__name__} {k}+{config.parities}", "coded", scheme))
    if parity_f is not None:
        chosen.append(("ParM k=2", "parm", ParM(2, max_group_wait=config.max_group_wait, parity_f=parity_f)))
    return chosen


def run(
    config: DemoConfig,
    f: Callable,
    images: np.ndarray,
    labels: np.ndarray,
    seed: int,
    *,
    parity_f: Callable | None = None,
    backend: str = "thread",
    address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per scheme (module docstring): the same stream served by each in turn.

    ``f``: the model as a batch function (images ``(B, 1, 28, 28)`` -> logits); ``images`` and
    ``labels``: the digits the queries draw from (a seeded permutation, repeated if
    ``config.queries`` is larger); ``backend``: ``"thread"`` or ``"ray"`` (``address``: a
    running cluster's, else a local Ray this call starts and stops); ``progress``: called with a
    line before and after each scheme.
    """
    from .. import serving
    from ..runtime.delays import Bimodal

    config.check()
    seed = check_seed(seed, "seed")
    if backend not in ("thread", "ray"):
        raise ValueError(f"backend must be 'thread' or 'ray', got {backend!r}")
    if address is not None and backend != "ray":
        raise ValueError("address needs backend='ray'")
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim < 2 or labels.shape != images.shape[:1]:
        raise ValueError(
            f"images and labels must have one row each per digit, got {images.shape}, {labels.shape}"
        )
    say = progress or (lambda line: None)
    arrivals_rng, digits_rng = np.random.SeedSequence(seed).spawn(2)
    service = Bimodal(base=1.0, p=config.straggler_p, slowdown=config.slowdown, jitter=0.1)
    arrivals = serving.poisson_arrivals(
        config.queries, config.utilisation, config.replicas, service, rng=np.random.default_rng(arrivals_rng)
    )
    order = np.random.default_rng(digits_rng).permutation(len(images))
    pick = order[np.arange(config.queries) % len(images)]
    inputs, truth = images[pick], labels[pick]
    exact_logits = f(inputs)
    exact_class = exact_logits.argmax(axis=1)
    unit_s = config.unit_ms / 1e3
    rate = config.queries / (arrivals[-1] * unit_s)
    chosen = schemes(config, parity_f)
    started_ray = _start_ray(address, config.replicas) if backend == "ray" else False
    rows = []
    try:
        for i, (label, kind, scheme) in enumerate(chosen, 1):
            say(
                f"demo [{i}/{len(chosen)}] {label}: {config.queries} digits at {rate:.0f}/s "
                f"(~{arrivals[-1] * unit_s:.0f} s) on {config.replicas} {backend} replicas"
            )
            start = time.perf_counter()
            options = {"service": service, "time_unit": unit_s, "seed": seed}
            if backend == "ray":
                server = serving.RayServer(f, config.replicas, scheme, address=address, **options)
            else:
                server = serving.ThreadServer(f, config.replicas, scheme, **options)
            record = server.run(arrivals, inputs, timeout=60.0)
            row = _row(label, kind, record, truth, exact_class, config.unit_ms)
            rows.append(row)
            say(
                f"demo [{i}/{len(chosen)}] {label}: done in {time.perf_counter() - start:.1f} s: p50 "
                f"{row['p50_ms']:.0f} ms, p99.9 {row['p99.9_ms']:.0f} ms, accuracy {row['accuracy']:.1%}"
            )
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    return rows


def _start_ray(address: str | None, replicas: int) -> bool:
    """Join ``address`` or start a local Ray once for every scheme; whether this call started it."""
    import ray

    if ray.is_initialized():
        return False
    ray.init(
        address="local" if address is None else address,
        num_cpus=replicas if address is None else None,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    return True


def _row(label: str, kind: str, record, truth: np.ndarray, exact_class: np.ndarray, unit_ms: float) -> dict:
    estimates = np.asarray(record.estimates, dtype=np.float64)
    answered = np.isfinite(estimates).all(axis=1)
    predicted = np.where(answered, np.nan_to_num(estimates).argmax(axis=1), -1)
    p50, p99, p999 = (record.percentile(q) * unit_ms for q in (50, 99, 99.9))
    counts = record.counts()
    return {
        "scheme": label,
        "kind": kind,
        "queries": record.num_queries,
        "p50_ms": p50,
        "p99_ms": p99,
        "p99.9_ms": p999,
        "accuracy": float(np.mean(predicted == truth)),
        "exact_accuracy": float(np.mean(exact_class == truth)),
        "agreement": float(np.mean(predicted == exact_class)),
        "decoded": counts["decoded"] / record.num_queries,
        "failed": counts["failed"],
        "extra_load": float(record.extra_load),
    }


def verdict(rows: list[dict]) -> str:
    """One line from the rows: the scheme with the lowest p99.9, what it beat, what it cost, and why.

    A runner-up within 10% of the winner's p99.9 is called as good as a tie.

    Each row needs ``scheme``, ``kind`` (a key of the reasons: none, replication, hedge, coded,
    parm), ``p99.9_ms``, ``accuracy``, ``exact_accuracy``, ``decoded`` and ``extra_load``."""
    ranked = sorted((row for row in rows if math.isfinite(row["p99.9_ms"])), key=lambda row: row["p99.9_ms"])
    if not ranked:
        return "no scheme answered its queries: nothing to compare"
    best = ranked[0]
    if len(ranked) == 1:
        return f"{best['scheme']} alone answered: p99.9 {best['p99.9_ms']:.0f} ms"
    runner = ranked[1]
    against = f"against {runner['p99.9_ms']:.0f} ms for {runner['scheme']}"
    if runner["p99.9_ms"] < 1.1 * best["p99.9_ms"]:  # one run's tail moves more than that
        against += ", within 10%: as good as a tie"
    plain = next((row for row in rows if row["kind"] == "none"), None)
    if plain is not None and best["kind"] != "none" and plain is not runner:
        against += f" and {plain['p99.9_ms']:.0f} ms for none"
    if best["kind"] == "none":
        return f"none had the lowest p99.9 ({best['p99.9_ms']:.0f} ms, {against}): {_WHY['none']}"
    cost = 100.0 * (best["exact_accuracy"] - best["accuracy"])
    spent = f"{cost:.1f} points of accuracy" if abs(cost) >= 0.05 else "no accuracy"
    decoded = f" ({best['decoded']:.1%} of queries decoded)" if best["kind"] in ("coded", "parm") else ""
    return (
        f"{best['scheme']} had the lowest p99.9 ({best['p99.9_ms']:.0f} ms, {against}) at {spent} "
        f"and {best['extra_load']:.0%} extra work: {_WHY[best['kind']]}{decoded}"
    )
