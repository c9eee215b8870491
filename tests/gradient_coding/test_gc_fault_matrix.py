"""The training fault matrix: every scheme x fault kind x number of faulty workers x backend
ends as the training module's table says, and no cell hangs.

Setting: ``n = 6`` workers (least squares, ``tests/training_problems.py``), ``s = 1`` with 1
and 2 faulty workers for every kind, and ``s = 2`` with 2 and 3 faulty workers for two kinds;
the faulty workers are ``0 .. c-1`` (so the first FR group loses all its members once
``c > s``). Faults are the trainers' injected worker faults (``faults={w: kind}``): on threads
and Ray ``"raise"`` raises in the worker, ``"nan"`` / ``"shape"`` send NaN / a vector one
entry short, ``"hang"`` blocks the worker's thread until the step's deadline closes it; on
the simulated clock a hung worker never arrives. Documented outcomes:

- ``c <= s``: GC-FR and GC-CR are exact (their losses equal fault-free DGD's); PGC-FR and the
  approximate schemes train on what they wait for, without the faulty workers and without a
  degraded step; on the simulated clock they equal a run where the faulty workers are only
  late, PGC-FR a fault-free run; DGD (which tolerates no missing worker) raises.
- ``c > s``: the exact schemes (DGD, GC-FR, GC-CR, PGC-FR) raise ``TooManyStragglersError``
  at step 1, with ``history`` (the start) and the failures named; IS-SGD, IS-GC and PGC-CR
  take a degraded step every step, flagged, and warn.

Every cell runs on a helper thread that must finish within ``CELL_LIMIT_S`` (plus its steps'
deadlines). A thread or Ray cell whose outcome differs from the table after a step's deadline
expired before a worker answered (a busy machine: at load 10 no Ray call answered in 2 s) runs
again with the deadline times the next of ``DEADLINE_FACTORS``; an outcome that is wrong
whatever the deadline fails at every factor. The thread
cells take a few seconds in all (short deadlines, three steps); the Ray cells are slow, so
Ray runs every kind for three schemes (``RAY_CELLS``).
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.gradient_coding import (
    EXACT_SCHEMES,
    SCHEMES,
    TooManyStragglersError,
    simulate,
    train_on_cluster,
)
from training_problems import Late, least_squares

N, STEPS, LR = 6, 3, 0.05
CELL_LIMIT_S = 30.0
# A healthy step takes milliseconds; a step with a hung worker it needs waits its deadline. Only
# the hang cells that need a hung worker (more of them than s, or DGD, which waits for all) wait,
# so only they get a short one; the others' guards a loaded machine's stalls, which must not end
# a step that has all it needs on the way.
WAITING_DEADLINE_S = 0.3
THREAD_DEADLINE_S = 5.0
RAY_DEADLINE_S = 2.0
DEADLINE_FACTORS = (1, 4, 16)
SETTINGS = [(1, kind, c) for kind in ("raise", "nan", "shape", "hang") for c in (1, 2)] + [
    (2, kind, c) for kind in ("raise", "hang") for c in (2, 3)
]
CELLS = [
    pytest.param(scheme, s, kind, c, id=f"{scheme}-s{s}-{kind}-{c}")
    for scheme in SCHEMES
    for s, kind, c in SETTINGS
]
# On Ray every fault kind, within and beyond s = 1, for one scheme of each way of ending
# (exact: GC-CR; exact decode of stored sums: PGC-FR; approximate: PGC-CR): how a scheme
# combines what arrived is the threads' code, run in full above; what Ray adds is how a fault
# reaches the master (a raising or hung actor call). The whole matrix on Ray is
# `tests/drivers/fault_matrix_training.py --backends ray --inject worker` (every cell as here).
RAY_CELLS = [
    pytest.param(scheme, 1, kind, c, id=f"{scheme}-s1-{kind}-{c}")
    for scheme in ("gc-cr", "pgc-fr", "pgc-cr")
    for kind in ("raise", "nan", "shape", "hang")
    for c in (1, 2)
]
PROBLEM = least_squares(N)  # one object: the Ray cells share its actors


def bounded(run, limit_s=CELL_LIMIT_S):
    """``(history or None, error or None, warnings)`` of ``run()`` on a helper thread; fails
    the test if it is not done within ``limit_s``."""
    out = {}

    def target():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out["history"] = run()
            except Exception as err:  # the cell's outcome
                out["error"] = err
            out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    helper = threading.Thread(target=target, daemon=True)
    helper.start()
    helper.join(limit_s)
    assert not helper.is_alive(), f"the cell hung (not done after {limit_s} s)"
    return out.get("history"), out.get("error"), out.get("warnings", [])


def timing_limited(history, error) -> bool:
    """Whether a step's deadline expired before some worker answered (so a busy machine may
    have decided the outcome): a timed-out step, or a run that stopped on missing results."""
    steps = list(history or []) + list(getattr(error, "history", None) or [])
    return any(step.timed_out for step in steps) or (
        isinstance(error, TooManyStragglersError) and "no result" in str(error)
    )


def run_escalating(backend, scheme, s, kind, c, run, deadline_s, limit_s=CELL_LIMIT_S):
    """``check_cell`` on ``run(deadline)``, with the deadline times each of
    :data:`DEADLINE_FACTORS` in turn while the check fails on a :func:`timing_limited` run."""
    for attempt, factor in enumerate(DEADLINE_FACTORS):
        deadline = deadline_s * factor
        history, error, caught = bounded(lambda d=deadline: run(d), limit_s + STEPS * deadline)
        try:
            check_cell(backend, scheme, s, kind, c, history, error, caught)
            return
        except AssertionError:
            if attempt + 1 == len(DEADLINE_FACTORS) or not timing_limited(history, error):
                raise


def reference_losses(scheme, s, faulty):
    """What a cell with at most s faulty workers must give on the simulated clock: DGD's
    losses for the exact codes, a fault-free PGC-FR run, or the same scheme with the
    faulty workers merely late (never waited for)."""
    if scheme in ("gc-fr", "gc-cr"):
        return [step.loss for step in simulate("dgd", PROBLEM, s, STEPS, lr=LR)]
    if scheme == "pgc-fr":
        return [step.loss for step in simulate("pgc-fr", PROBLEM, s, STEPS, lr=LR)]
    late = simulate(scheme, PROBLEM, s, STEPS, lr=LR, delays=Late(faulty))
    return [step.loss for step in late]


def check_cell(backend, scheme, s, kind, c, history, error, caught):
    faulty = set(range(c))
    healthy = [w for w in range(N) if w not in faulty]
    short = c > s  # more faulty workers than the scheme waits without
    if scheme == "dgd" or (short and scheme in EXACT_SCHEMES):
        assert history is None and isinstance(error, TooManyStragglersError), error
        message = str(error)
        assert message.startswith("step 1: ") and scheme in message
        assert [step.step for step in error.history] == [0]
        if kind != "hang":  # the failures are named; hung workers are named as late on threads
            assert f"worker {min(faulty)}:" in message, message
        return
    assert error is None, f"{type(error).__name__}: {error}"
    assert len(history) == STEPS + 1
    assert all(np.isfinite(step.loss) for step in history)
    assert history[-1].loss < history[0].loss
    for step in history[1:]:
        assert not faulty & set(step.used), (step.step, step.used)
        assert set(step.failed) <= faulty, step.failed  # no healthy worker reported failed
        if kind != "hang" and backend == "simulated" and not scheme.startswith("pgc"):
            assert set(step.failed) == faulty, step.failed  # they arrive first there: each told why
    if not short:
        assert not any(step.degraded for step in history)
        assert not any("degraded" in w or "fewer" in w for w in caught)
        if scheme in ("gc-fr", "gc-cr"):
            np.testing.assert_allclose(
                [step.loss for step in history], reference_losses(scheme, s, faulty), rtol=1e-9
            )
        elif backend == "simulated" or (scheme in ("is-sgd", "pgc-cr") and c == s):
            # the used set is then fixed (every healthy worker), whatever the arrival order
            np.testing.assert_allclose(
                [step.loss for step in history], reference_losses(scheme, s, faulty), rtol=1e-9
            )
        expected = {"is-sgd": N - s, "pgc-cr": N - s, "gc-cr": N - s, "gc-fr": N // (s + 1)}
        if scheme in expected:
            assert all(len(step.used) == expected[scheme] for step in history[1:])
        return
    assert all(step.degraded for step in history[1:])  # every step flagged...
    assert any("fewer than n - s" in w for w in caught), caught  # ...and the run warns
    for step in history[1:]:
        if scheme in ("is-sgd", "pgc-cr"):
            assert sorted(step.used) == healthy
        else:
            assert set(step.used) <= set(healthy)
        if kind == "hang" and backend != "simulated":
            assert step.timed_out


@pytest.mark.parametrize(("scheme", "s", "kind", "c"), CELLS)
def test_fault_matrix_simulated(scheme, s, kind, c):
    faults = dict.fromkeys(range(c), kind)
    history, error, caught = bounded(lambda: simulate(scheme, PROBLEM, s, STEPS, lr=LR, faults=faults))
    check_cell("simulated", scheme, s, kind, c, history, error, caught)


@pytest.fixture(scope="module")
def threads():
    with cc.ThreadCluster(8, seed=0) as cluster:
        yield cluster


def thread_deadline_s(scheme, s, kind, c) -> float:
    """A thread cell's step deadline: short where the cell waits for a hung worker."""
    return WAITING_DEADLINE_S if kind == "hang" and (c > s or scheme == "dgd") else THREAD_DEADLINE_S


@pytest.mark.parametrize(("scheme", "s", "kind", "c"), CELLS)
def test_fault_matrix_threads(threads, scheme, s, kind, c):
    faults = dict.fromkeys(range(c), kind)

    def run(deadline_s):
        return train_on_cluster(
            scheme, PROBLEM, s, STEPS, threads, lr=LR, faults=faults, step_timeout_s=deadline_s
        )

    run_escalating("threads", scheme, s, kind, c, run, thread_deadline_s(scheme, s, kind, c))


@pytest.mark.slow
@pytest.mark.parametrize(("scheme", "s", "kind", "c"), RAY_CELLS)
def test_fault_matrix_ray(ray_cluster, scheme, s, kind, c):
    faults = dict.fromkeys(range(c), kind)

    def run(deadline_s):
        return train_on_cluster(
            scheme, PROBLEM, s, STEPS, ray_cluster, lr=LR, faults=faults, step_timeout_s=deadline_s
        )

    # the first cell starts the actors: a longer guard
    run_escalating("ray", scheme, s, kind, c, run, RAY_DEADLINE_S, limit_s=120.0)


def test_a_cell_whose_workers_miss_the_deadline_runs_again_with_a_longer_one(threads):
    # Every worker 50 ms late against a 1 ms deadline: the first try stops on missing results,
    # as a busy machine makes it; the second is asked for the next factor's deadline (and, so
    # that this test itself needs no timing, runs with the workers on time and a long one).
    deadlines = []

    def run(deadline_s):
        deadlines.append(deadline_s)
        if len(deadlines) == 1:
            late = cc.delays.Trace([[0.05] * N])
            return train_on_cluster(
                "gc-cr", PROBLEM, 1, STEPS, threads, lr=LR, delays=late, step_timeout_s=deadline_s
            )
        return train_on_cluster("gc-cr", PROBLEM, 1, STEPS, threads, lr=LR, step_timeout_s=30.0)

    history, error, caught = bounded(lambda: run(1e-3))
    assert timing_limited(history, error)
    with pytest.raises(AssertionError):  # judged alone, the late try fails the cell
        check_cell("threads", "gc-cr", 1, "raise", 0, history, error, caught)
    deadlines.clear()
    run_escalating("threads", "gc-cr", 1, "raise", 0, run, 1e-3)
    assert deadlines == [1e-3, 1e-3 * DEADLINE_FACTORS[1]]
