"""The fault matrix (``fault_matrix.py``): every backend x fault kind x number of faulty workers
gives its documented outcome.

GCC and BACC, K = 4, N = 12, ``wait_for = N - S = 9`` (S = 3) with a deadline; the faulty
workers arrive first. Unusable workers (raising, exiting, NaN, inf, mis-shaped, None, strings,
too late, hung, killed) are stragglers: up to S + 1 of them the call decodes the others, all N
of them raise ``InsufficientResultsError`` with its report (all N mis-shaped alike: that is
the shape); lists and torch tensors for numpy inputs are converted and used; garbage gives
finite estimates. One call (seed 0) per cell; on Ray a fixed sample of the cells
(:func:`_ray_cell_runs`). ``python tests/drivers/fault_matrix.py`` runs every cell several
times and prints the table.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fault_matrix as fm

LOCAL = [pytest.param(cell, id=cell.id) for cell in fm.cells(["thread", "simulated"], fm.CODES, fm.COUNTS)]


# The process-killing cells beyond S that run on Ray: each costs 40-90 s (Ray restarts a worker
# process per kill, and each restart imports torch), against about a second for the others.
KILLING_BEYOND_S = {("systemexit", fm.S + 1), ("os_exit", fm.N)}


def _ray_cell_runs(cell: fm.Cell) -> bool:
    """The fixed sample of Ray cells: every (kind, count) once, GCC and BACC in turn, but two
    of the four process-killing cells beyond S.

    How a code decodes what arrived is the thread and simulated cells' code, run in full above;
    what Ray adds is how each fault reaches the master (a raising, exiting, hung or late task, a
    value shipped back), so one code per (kind, count) runs it, and each kind runs under both
    codes across its counts. Of the process-killing kinds (:data:`fm.KILLS_PROCESS`) beyond S,
    ``SystemExit`` runs the most kills that still decode (S + 1) and ``os._exit`` all N (the
    call raises): :data:`KILLING_BEYOND_S`. ``python tests/drivers/fault_matrix.py --backends
    ray`` runs every cell."""
    if (
        cell.kind in fm.KILLS_PROCESS
        and cell.count > fm.S
        and (cell.kind, cell.count) not in KILLING_BEYOND_S
    ):
        return False
    turn = (fm.KINDS.index(cell.kind) + fm.COUNTS.index(cell.count)) % len(fm.CODES)
    return cell.code == fm.CODES[turn]


RAY = [
    pytest.param(cell, id=cell.id) for cell in fm.cells(["ray"], fm.CODES, fm.COUNTS) if _ray_cell_runs(cell)
]


def check(observations: list[fm.Observation]) -> None:
    differing = [o.describe() for o in observations if not o.matches]
    assert not differing, "\n".join(differing)


@pytest.mark.parametrize("cell", LOCAL)
def test_fault_matrix(cell):
    check(fm.run_cell(cell, seeds=(0,)))


@pytest.fixture(scope="module")
def ray_cluster():
    cluster = fm.start_ray(num_cpus=fm.RAY_CPUS)
    yield cluster
    fm.stop_ray(cluster)


@pytest.mark.slow
@pytest.mark.parametrize("cell", RAY)
def test_fault_matrix_ray(ray_cluster, cell):
    check(fm.run_cell(cell, seeds=(0,), ray_cluster=ray_cluster))


def test_the_matrix_covers_every_kind_and_count():
    kinds = {cell.kind for cell in fm.cells()}
    assert kinds == set(fm.KINDS) == set(fm.UNUSABLE) | set(fm.CONVERTIBLE) | set(fm.UNDETECTABLE)
    assert fm.COUNTS == (1, fm.S, fm.S + 1, fm.N)
    assert "os_exit" not in fm.kinds_for("thread") and "os_exit" in fm.kinds_for("ray")
    assert len(LOCAL) == 2 * 2 * (len(fm.KINDS) - 1) * 4
    ray = [param.values[0] for param in RAY]
    dropped = {(kind, count) for kind in fm.KILLS_PROCESS for count in fm.COUNTS if count > fm.S}
    dropped -= KILLING_BEYOND_S
    assert len(dropped) == 2
    assert {(c.kind, c.count) for c in ray} == {
        (kind, count) for kind in fm.KINDS for count in fm.COUNTS
    } - dropped
    assert len(ray) == len({(c.kind, c.count) for c in ray})  # one code per (kind, count)
    for kind in fm.KINDS:  # every kind under both codes
        assert {c.code for c in ray if c.kind == kind} == set(fm.CODES), kind
    beyond = [c for c in ray if c.kind in fm.KILLS_PROCESS and c.count > fm.S]
    assert {c.code for c in beyond} == set(fm.CODES)  # one decodes, one raises: see documented()
    assert {fm.documented(c.kind, c.count, "ray") for c in beyond} == {
        ("ok", "ok (faulty dropped before arriving)"),
        ("raised InsufficientResultsError",),
    }


@pytest.mark.parametrize("backend", ["thread", "simulated"])
def test_with_no_faulty_worker_every_code_decodes(backend):
    for code in fm.CODES:
        (observation,) = fm.run_cell(fm.Cell(backend, code, "raise", 0), seeds=(1,))
        assert observation.observed == "ok", observation.describe()


def test_faulty_f_finds_its_worker_by_the_coded_row():
    code = fm.make_code("gcc")
    X = np.random.default_rng(2).normal(size=(fm.K, fm.D_IN))
    coded = code.encode(X)
    f = fm.FaultyF(coded, {3: "raise", 5: "misshaped", 7: "torch"})
    noisy = coded + 1e-9 * np.random.default_rng(3).normal(size=coded.shape)
    assert f.workers_of(noisy).tolist() == list(range(fm.N))
    with pytest.raises(ValueError, match="worker 3"):
        f(coded[3:4])
    assert f(coded[5:6]).shape == (1, fm.D_OUT - 1)
    assert type(f(coded[7:8])).__module__.startswith("torch")
    np.testing.assert_array_equal(f(coded[[0, 1]]), fm.honest(coded[[0, 1]]))
    with pytest.raises(ValueError, match="one by one"):  # a simulated batch runs row by row
        f(coded[[0, 3]])


def test_a_crash_or_a_hang_is_an_outcome_not_an_error():
    def exits():
        raise SystemExit(3)

    assert fm.call_with_limit(lambda: 1, 5) == ("value", 1)
    status, error = fm.call_with_limit(exits, 5)
    assert status == "error" and isinstance(error, SystemExit)
    event = threading.Event()
    assert fm.call_with_limit(event.wait, 0.05) == ("hang", None)
    event.set()


def test_a_call_whose_honest_workers_miss_the_deadline_runs_again_with_a_longer_one(monkeypatch):
    # Honest workers answer after 20-40 ms: a 5 ms deadline expires before any of them does,
    # as a 2 s one does on a busy machine. One factor: the call is judged as it ran, and fails.
    cell = fm.Cell("thread", "gcc", "raise", 1)
    monkeypatch.setitem(fm.DEADLINE_S, "thread", 0.005)
    monkeypatch.setattr(fm, "DEADLINE_FACTORS", (1,))
    (short,) = fm.run_cell(cell, seeds=(0,))
    assert not short.matches and short.observed == "raised InsufficientResultsError", short.describe()
    # A second factor long enough for every honest worker: the documented outcome, and the
    # detail says which deadline gave it.
    monkeypatch.setattr(fm, "DEADLINE_FACTORS", (1, 400))
    (escalated,) = fm.run_cell(cell, seeds=(0,))
    assert escalated.matches, escalated.describe()
    assert "deadline 2 s, try 2" in escalated.detail
