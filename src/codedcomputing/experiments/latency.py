"""End-to-end latency and accuracy of coded inference on real clusters (``coded experiment latency``).

LeNet-5 on MNIST test images: each call codes K = 10 images for N = 50 workers, each
worker runs the network on its one coded image, and the master decodes. Delays are
injected per worker (:mod:`codedcomputing.runtime.delays`), seeded:

- ``shifted-exp``: ``T = 50 ms * (1 + Exp(1))``;
- ``pareto``: ``T = 50 ms * Pareto(alpha = 1.5)`` (minimum 50 ms, heavy tail).

50 ms, not less, because on the embedded cluster the workers share the machine's CPUs:
50 single-image LeNet-5 forwards take ~40 ms on 2 cores, and the delays must dominate
that for the run to model N machines rather than one busy one.

Schemes, all on the same cluster:

- ``uncoded``: K workers, one image each, waiting for all K;
- ``replication``: N workers (N / K copies of each image), waiting until every image has
  its first copy;
- ``bacc``, ``gcc``: N coded workers, waiting for the fastest N - S, S = 10 and 20 (20%
  and 40% of N): fewer results cut the wait and cost accuracy.

Backends: ``thread`` (:class:`~codedcomputing.runtime.ThreadCluster`, one thread per CPU) and
``ray`` (:class:`~codedcomputing.runtime.RayCluster`, local, skipped with a message when Ray
is not installed) measure wall-clock time; ``simulated``
(:class:`~codedcomputing.runtime.SimulatedCluster`) runs K = 100, N = 500, S = 100 and 200 on a
virtual clock (the master's encode and decode are still timed for real). Each row's
``latency_s`` is the end-to-end time of one call: encode + wait + decode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import datasets, metrics, models
from ..codes import BACC, GCC, Replication, Uncoded
from ..runtime import CodedExecutor, RayCluster, SimulatedCluster, ThreadCluster
from ..runtime.delays import Pareto, ShiftedExponential
from .records import figure_dir, output_dir, progress, pyplot, read_csv, save_figure, write_csv

NAME = "latency"
SCHEMES = ("uncoded", "replication", "bacc", "gcc")
BACKENDS = ("thread", "ray", "simulated")
DELAY_SCALE = 0.05  # seconds: the fastest a worker ever answers
DELAY_MODELS = {
    "shifted-exp": lambda: ShiftedExponential(DELAY_SCALE, rate=1.0),
    "pareto": lambda: Pareto(DELAY_SCALE, alpha=1.5),
}


@dataclass(frozen=True)
class Config:
    num_inputs: int = 10
    num_workers: int = 50
    stragglers: tuple[int, ...] = (10, 20)
    delay_models: tuple[str, ...] = tuple(DELAY_MODELS)  # on the real backends
    trials: int = 150
    backends: tuple[str, ...] = BACKENDS
    ray_trials: int = 100
    sim_inputs: int = 100
    sim_workers: int = 500
    sim_stragglers: tuple[int, ...] = (100, 200)
    sim_trials: int = 200


# Quick: real time only under shifted-exponential delays (Pareto's tail makes uncoded calls
# take seconds); the simulated backend runs both.
QUICK = Config(trials=10, backends=("thread", "simulated"), delay_models=("shifted-exp",), sim_trials=30)


def schemes(num_inputs: int, num_workers: int, stragglers: tuple[int, ...]):
    """``(name, code, wait_for, S)`` per scheme and S (``wait_for`` None: until complete)."""
    out = [
        ("uncoded", Uncoded(num_inputs), None, 0),
        ("replication", Replication(num_inputs, num_workers // num_inputs), None, 0),
    ]
    for s in stragglers:
        out.append(("bacc", BACC(num_inputs, num_workers), num_workers - s, s))
        out.append(("gcc", GCC(num_inputs, num_workers), num_workers - s, s))
    return out


def make_cluster(backend: str, delays, seed: int):
    if backend == "thread":
        return ThreadCluster(num_threads=os.cpu_count() or 2, delays=delays, seed=seed)
    if backend == "ray":
        return RayCluster(delays=delays, seed=seed)
    if backend == "simulated":
        return SimulatedCluster(delays=delays, seed=seed)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")


def measure(executor: CodedExecutor, wait_for, images, labels, f, trials: int, rng, step=None) -> list[dict]:
    """``trials`` calls of ``executor`` on random batches of ``images``: one dict per call.

    Each dict has ``latency_s`` (encode + wait + decode), its parts, ``rel_acc`` (argmax
    agreement with ``f`` run directly), ``accuracy`` (against ``labels``), ``mse`` and the
    numbers of failed and dropped workers.
    """
    k = executor.code.num_inputs
    out = []
    for _ in range(trials):
        pick = rng.choice(len(images), size=k, replace=False)
        x = images[pick]
        truth = f(x)
        result = executor.run(x, wait_for=wait_for)
        report = result.report
        out.append(
            {
                "latency_s": report.total_s,
                "encode_s": report.encode_s,
                "wait_s": report.wait_s,
                "decode_s": report.decode_s,
                "worker_compute_s": float(np.nansum(report.compute_s)),
                "rel_acc": metrics.relative_accuracy(result.estimates, truth),
                "accuracy": float(np.mean(result.estimates.argmax(axis=1) == labels[pick])),
                "mse": metrics.mse(result.estimates, truth),
                "failed": len(report.failed),
                "dropped": int(report.dropped.size),
            }
        )
        if step is not None:
            step()
    return out


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def run(
    out_dir: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    show_progress: bool = True,
    backends: tuple[str, ...] | None = None,
) -> Path:
    out_dir = output_dir(out_dir)  # fail now, not after the run, if it cannot be written
    config = QUICK if quick else Config()
    backends = tuple(backends or config.backends)
    if "ray" in backends and not _ray_available():
        print("latency: Ray is not installed (pip install 'codedcomputing[ray]'); skipping the ray backend")
        backends = tuple(b for b in backends if b != "ray")
    data = datasets.mnist()
    f = models.numpy_function("lenet5", progress=show_progress)
    rows = []

    def size(backend):
        if backend == "simulated":
            return config.sim_inputs, config.sim_workers, config.sim_stragglers, config.sim_trials
        trials = config.ray_trials if backend == "ray" else config.trials
        return config.num_inputs, config.num_workers, config.stragglers, trials

    def delay_models(backend):
        return tuple(DELAY_MODELS) if backend == "simulated" else config.delay_models

    total = sum(size(b)[3] * len(delay_models(b)) * len(schemes(*size(b)[:3])) for b in backends)
    with progress("latency: calls", total, show_progress) as step:
        for backend in backends:
            k, n, s_values, trials = size(backend)
            for delay_name in delay_models(backend):
                make_delays = DELAY_MODELS[delay_name]
                for scheme_index, (scheme, code, wait_for, s) in enumerate(schemes(k, n, s_values)):
                    call_seed = seed + 1000 * scheme_index
                    cluster = make_cluster(backend, make_delays(), call_seed)
                    try:
                        executor = CodedExecutor(code, f, cluster)
                        executor.run(data.test_x[:k], wait_for=wait_for)  # warm-up: caches, Ray workers
                        measured = measure(
                            executor,
                            wait_for,
                            data.test_x,
                            data.test_y,
                            f,
                            trials,
                            np.random.default_rng(seed),
                            step,
                        )
                    finally:
                        if backend != "ray":
                            cluster.close()
                    for trial, values in enumerate(measured):
                        rows.append(
                            {
                                "experiment": NAME,
                                "backend": backend,
                                "delay_model": delay_name,
                                "model": "lenet5",
                                "scheme": scheme,
                                "num_inputs": k,
                                "num_workers": code.num_workers,
                                "num_stragglers": s,
                                "wait_for": wait_for if wait_for is not None else "complete",
                                "trial": trial,
                                "seed": seed,
                                **values,
                            }
                        )
            if backend == "ray":
                import ray

                ray.shutdown()
    path = write_csv(rows, Path(out_dir) / f"{NAME}.csv")
    for line in summary_lines(rows):
        print(line)
    plot(path, out_dir)
    return path


def label(row: dict) -> str:
    """``gcc S=10``-style name of a row's scheme (no S for the schemes that wait for all)."""
    return f"{row['scheme']} S={row['num_stragglers']}" if row["wait_for"] != "complete" else row["scheme"]


def percentiles(rows: list[dict]) -> dict[tuple, dict[str, float]]:
    """``{(backend, delay_model, label): {p50, p95, p99, rel_acc, master_s, trials}}`` from rows."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["backend"], row["delay_model"], label(row)), []).append(row)
    out = {}
    for key, mine in groups.items():
        latency = np.array([row["latency_s"] for row in mine])
        out[key] = {
            "p50": float(np.percentile(latency, 50)),
            "p95": float(np.percentile(latency, 95)),
            "p99": float(np.percentile(latency, 99)),
            "rel_acc": float(np.mean([row["rel_acc"] for row in mine])),
            "master_s": float(np.median([row["encode_s"] + row["decode_s"] for row in mine])),
            "trials": len(mine),
        }
    return out


def summary_lines(rows: list[dict]) -> list[str]:
    """One line per (backend, delay model, scheme), and each GCC's p99 over uncoded's."""
    stats = percentiles(rows)
    lines = []
    for (backend, delay, name), v in stats.items():
        lines.append(
            f"{backend:9s} {delay:11s} {name:13s} p50 {v['p50'] * 1e3:7.1f} ms  "
            f"p95 {v['p95'] * 1e3:7.1f} ms  p99 {v['p99'] * 1e3:7.1f} ms  "
            f"rel. acc {v['rel_acc']:.3f}  ({v['trials']} calls)"
        )
    for backend, delay, name in stats:
        if name.startswith("gcc") and (backend, delay, "uncoded") in stats:
            ratio = stats[(backend, delay, name)]["p99"] / stats[(backend, delay, "uncoded")]["p99"]
            lines.append(f"{backend} {delay}: p99 {name} / p99 uncoded = {ratio:.3f}")
    return lines


def plot(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    """Latency CDFs (one panel per backend and delay model) and p50/p95/p99 bars."""
    plt = pyplot()
    rows = read_csv(csv_path)
    out_dir = figure_dir(csv_path, out_dir)
    panels = list(dict.fromkeys((row["backend"], row["delay_model"]) for row in rows))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    for ax, (backend, delay) in zip(axes[0], panels, strict=True):
        for scheme in SCHEMES:
            latency = np.sort(
                [
                    r["latency_s"]
                    for r in rows
                    if (r["backend"], r["delay_model"], r["scheme"]) == (backend, delay, scheme)
                ]
            )
            if latency.size:
                ax.step(
                    latency * 1e3, np.arange(1, latency.size + 1) / latency.size, where="post", label=scheme
                )
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency (ms)")
        ax.set_ylabel("fraction of calls")
        ax.set_title(f"{backend}, {delay}")
        ax.legend(fontsize=8)
    figures = [save_figure(fig, out_dir, f"{NAME}_cdf")]

    stats = percentiles(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    width = 0.25
    for ax, (backend, delay) in zip(axes[0], panels, strict=True):
        names = [name for (b, d, name) in stats if (b, d) == (backend, delay)]
        for i, quantile in enumerate(("p50", "p95", "p99")):
            values = [stats[(backend, delay, s)][quantile] * 1e3 for s in names]
            ax.bar(np.arange(len(names)) + (i - 1) * width, values, width, label=quantile)
        ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"{backend}, {delay}")
        ax.legend(fontsize=8)
    figures.append(save_figure(fig, out_dir, f"{NAME}_percentiles"))
    return figures
