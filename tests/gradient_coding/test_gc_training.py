"""Training with gradient codes on the simulated clock: PGC at s = 0 is DGD, exact codes
follow DGD's iterates, slot ages cycle, stragglers' lost work ages PGC's stored gradients,
seeded runs repeat, and a torch problem trains."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.gradient_coding import SCHEMES, Problem, TooManyStragglersError, simulate
from training_problems import Late, SlowWorker, least_squares

DELAYS = cc.delays.AdditiveExponential(mean=1.0)


@pytest.mark.parametrize("pipelined", ["pgc-fr", "pgc-cr"])
def test_pgc_with_no_stragglers_is_dgd_step_for_step(pipelined):
    problem = least_squares(6)
    dgd = simulate("dgd", problem, 0, 20, lr=0.05, delays=DELAYS, seed=3)
    pgc = simulate(pipelined, problem, 0, 20, lr=0.05, delays=DELAYS, seed=3)
    assert [s.loss for s in pgc] == pytest.approx([s.loss for s in dgd], rel=1e-12)
    assert [s.wall_time_s for s in pgc] == pytest.approx([s.wall_time_s for s in dgd], rel=1e-12)


@pytest.mark.parametrize("scheme", ["gc-fr", "gc-cr"])
def test_exact_codes_follow_dgd_iterates_and_wait_less(scheme):
    problem = least_squares(12)
    dgd = simulate("dgd", problem, 2, 15, lr=0.05, delays=DELAYS, seed=1)
    gc = simulate(scheme, problem, 2, 15, lr=0.05, delays=DELAYS, seed=1)
    np.testing.assert_allclose([s.loss for s in gc], [s.loss for s in dgd], rtol=1e-9)
    assert all(len(step.used) >= 12 // 3 for step in gc[1:])


@pytest.mark.parametrize("s", [1, 2, 3])
def test_slot_ages_cycle_through_zero_to_s(s):
    problem = least_squares(12)
    for scheme in ("pgc-fr", "pgc-cr"):
        history = simulate(scheme, problem, s, 3 * (s + 1), lr=0.01, seed=0)  # no delays: all finish
        for step in history[1:]:
            t = step.step - 1
            for ages in step.ages:
                expected = sorted(range(s + 1)) if t >= s else sorted([0, *range(1, t + 1), *[t] * (s - t)])
                assert sorted(ages.tolist()) == expected, (scheme, t, ages)


def test_a_persistently_slow_worker_ages_its_stored_gradients_under_pgc():
    problem = least_squares(12)
    history = simulate("pgc-cr", problem, 2, 12, lr=0.01, delays=SlowWorker(), seed=0)
    assert history[-1].ages[0].min() == 11  # never finished a step after the first
    # the others miss a step now and then (the master takes 10 of 12), never for long
    assert history[-1].ages[1:].max() < 11 and history[-1].ages[1:].mean() <= 2
    assert all(0 not in step.used for step in history[1:])
    assert all(step.step_time_s < 100 for step in history[1:])  # never waited for it


def test_ignore_stragglers_schemes_use_what_they_say():
    problem = least_squares(12)
    is_sgd = simulate("is-sgd", problem, 3, 5, lr=0.01, delays=DELAYS, seed=0)
    assert all(len(step.used) == 9 for step in is_sgd[1:])
    is_gc = simulate("is-gc", problem, 2, 8, lr=0.01, delays=DELAYS, seed=0)
    for step in is_gc[1:]:
        parts = [set(((i + np.arange(3)) % 12).tolist()) for i in step.used]
        assert sum(map(len, parts)) == len(set().union(*parts))  # disjoint
        assert len(step.used) == 4  # 12 / (s + 1) disjoint arcs fit among the fastest 10


def test_seeded_runs_repeat_and_every_scheme_lowers_the_loss():
    problem = least_squares(12)
    for scheme in SCHEMES:
        a = simulate(scheme, problem, 2, 30, lr=0.05, delays=DELAYS, seed=7)
        b = simulate(scheme, problem, 2, 30, lr=0.05, delays=DELAYS, seed=7)
        assert [(s.loss, s.wall_time_s) for s in a] == [(s.loss, s.wall_time_s) for s in b]
        assert a[-1].loss < 0.7 * a[0].loss, scheme
        assert all(later.wall_time_s > earlier.wall_time_s for earlier, later in itertools.pairwise(a))
    c = simulate("pgc-cr", problem, 2, 30, lr=0.05, delays=DELAYS, seed=8)
    assert c[-1].wall_time_s != a[-1].wall_time_s


def test_pipelining_waits_less_than_gradient_coding_per_step():
    problem = least_squares(12)
    for fr_or_cr in ("fr", "cr"):
        gc = simulate(f"gc-{fr_or_cr}", problem, 3, 40, lr=0.01, delays=DELAYS, seed=2)
        pgc = simulate(f"pgc-{fr_or_cr}", problem, 3, 40, lr=0.01, delays=DELAYS, seed=2)
        assert np.median([s.step_time_s for s in pgc[2:]]) < 0.7 * np.median([s.step_time_s for s in gc[2:]])


def test_a_torch_model_trains_on_the_digits():
    import torch

    data = cc.datasets.digits()
    torch.manual_seed(0)
    x = data.train_x.reshape(len(data.train_x), -1)
    problem = Problem.from_torch(torch.nn.Linear(x.shape[1], 10), x, data.train_y, 12)
    history = simulate("pgc-cr", problem, 2, 20, lr=0.5, delays=DELAYS, seed=0)
    assert history[-1].loss < 0.6 * history[0].loss  # 0.46 after these 20 steps (0.30 after 40)


def test_torch_gradients_on_concurrent_threads_equal_the_serial_ones():
    """torch.func.functional_call swaps the given module's parameters while it runs, so
    threads sharing one module could compute with each other's: every gradient computed on
    8 threads at once equals the serial one, so does a pickled gradient (as Ray ships it),
    and the given module's weights are left as they were."""
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    import torch

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(240, 20)).astype(np.float32)
    y = rng.integers(0, 3, 240)
    module = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    problem = Problem.from_torch(module, x, y, 12)
    thetas = [problem.initial + 0.1 * rng.normal(size=problem.initial.shape) for _ in range(48)]
    serial = [problem.gradient(theta, i % 12) for i, theta in enumerate(thetas)]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(5):
            futures = [pool.submit(problem.gradient, theta, i % 12) for i, theta in enumerate(thetas)]
            for future, expected in zip(futures, serial, strict=True):
                np.testing.assert_allclose(future.result(), expected, rtol=1e-6, atol=1e-8)
    shipped = pickle.loads(pickle.dumps(problem.gradient))  # as Ray ships it to an actor
    np.testing.assert_allclose(shipped(thetas[0], 0), serial[0], rtol=1e-6, atol=1e-8)
    assert np.all(module[0].weight.detach().numpy().ravel() == problem.initial[:1280].astype(np.float32))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scheme": "sgd"}, "scheme"),
        ({"num_stragglers": 12}, "num_stragglers"),
        ({"lr": 0.0}, "lr"),
        ({"delays": "exp"}, "delays"),
        ({"seed": None}, "seed"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, match):
    args = {"scheme": "dgd", "problem": least_squares(12), "num_stragglers": 1, "steps": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        simulate(**args)


# --- clear errors at the public boundary -----------------------------------------------


def _gradient(x, i):
    return np.zeros_like(x)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gradient": None}, "gradient must be callable"),
        ({"loss": "mse"}, "loss must be callable"),
        ({"initial": [0.0, np.nan]}, r"initial must be finite.*\[1\]"),
        ({"initial": np.zeros((2, 2))}, "initial must be a non-empty 1-D"),
        ({"initial": []}, "initial must be a non-empty 1-D"),
        ({"initial": ["a", "b"]}, "initial must hold real numbers"),
        ({"initial": [1 + 2j]}, "initial must hold real numbers"),
        ({"num_partitions": 0}, "num_partitions"),
        ({"num_partitions": 2.0}, "num_partitions"),
        ({"num_partitions": True}, "num_partitions"),
        ({"num_partitions": 10**6}, "num_partitions"),
    ],
)
def test_problem_checks_its_arguments(kwargs, match):
    args = {"gradient": _gradient, "loss": lambda x: 0.0, "initial": np.zeros(3), "num_partitions": 4}
    with pytest.raises(ValueError, match=match):
        Problem(**{**args, **kwargs})


def _digits_like(count=24, features=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(count, features)).astype(np.float32), rng.integers(0, classes, count)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda a: {**a, "module": None}, "module must be a torch.nn.Module"),
        (lambda a: {**a, "num_partitions": 0}, "num_partitions"),
        (lambda a: {**a, "num_partitions": 25}, r"num_partitions must be at most the number of examples"),
        (lambda a: {**a, "labels": a["labels"] + 3}, r"labels must be in 0\.\.2 \(the module's 3 outputs\)"),
        (lambda a: {**a, "labels": a["labels"][:-1]}, r"labels must have one entry per example of inputs"),
        (lambda a: {**a, "labels": a["labels"] - 5}, "labels must be class indices >= 0"),
        (lambda a: {**a, "labels": a["labels"] + 0.5}, "labels must be integer class indices"),
        (lambda a: {**a, "labels": a["labels"].reshape(4, 6)}, "labels must be a 1-D array"),
        (lambda a: {**a, "inputs": np.where(np.arange(6) == 2, np.nan, a["inputs"])}, "inputs must be fin"),
        (lambda a: {**a, "inputs": a["inputs"].astype(str)}, "inputs must hold real numbers"),
        (lambda a: {**a, "inputs": a["inputs"][:, :4]}, "inputs do not fit module"),
        (lambda a: {**a, "inputs": np.zeros((0, 6))}, "inputs must have one example per row"),
        (lambda a: {**a, "seed": -1}, "seed"),
    ],
)
def test_from_torch_checks_its_arguments(change, match):
    """Problem.from_torch refuses each bad argument (no module, partitions out of range,
    labels out of range, of another length, negative, fractional or 2-D, inputs with NaN, of
    strings, of the wrong width or empty, a negative seed) with a ValueError naming it."""
    import torch

    torch.manual_seed(0)
    x, y = _digits_like()
    args = {"module": torch.nn.Linear(6, 3), "inputs": x, "labels": y, "num_partitions": 4}
    with pytest.raises(ValueError, match=match):
        Problem.from_torch(**change(args))


def test_from_torch_checks_the_module_output_and_parameters():
    import torch

    x, y = _digits_like()
    with pytest.raises(ValueError, match=r"module must map a batch of 2 inputs to \(batch, classes\)"):
        Problem.from_torch(torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Flatten(0)), x, y, 4)
    frozen = torch.nn.Linear(6, 3).requires_grad_(False)
    with pytest.raises(ValueError, match="module must have trainable parameters"):
        Problem.from_torch(frozen, x, y, 4)
    nan_weights = torch.nn.Linear(6, 3)
    with torch.no_grad():
        nan_weights.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"module's parameters must be finite.*weight"):
        Problem.from_torch(nan_weights, x, y, 4)
    with pytest.raises(ValueError, match="seed"):  # an int, as the signature says
        Problem.from_torch(torch.nn.Linear(6, 3), x, y, 4, seed=[0])
    batchnorm = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.BatchNorm1d(3))
    before = batchnorm[1].running_mean.clone()
    problem = Problem.from_torch(batchnorm, torch.as_tensor(x), torch.as_tensor(y), 4)  # tensors too
    assert torch.equal(batchnorm[1].running_mean, before)  # the shape check ran on a copy
    assert problem.num_partitions == 4 and problem.initial.shape == (6 * 3 + 3 + 3 + 3,)


def test_simulate_names_code_seed_and_faults():
    problem = least_squares(6)
    with pytest.raises(ValueError, match="code_seed must be an integer >= 0"):
        simulate("gc-cr", problem, 1, 2, code_seed=-1)
    with pytest.raises(ValueError, match="faults"):
        simulate("gc-cr", problem, 1, 2, faults={0: "late"})
    with pytest.raises(ValueError, match="compute_s"):
        simulate("gc-cr", problem, 1, 2, compute_s=float("nan"))


def test_a_degraded_simulated_step_averages_the_messages_it_had():
    problem = least_squares(6)
    with pytest.warns(RuntimeWarning, match="2 of 2 steps combined fewer than n - s = 5"):
        history = simulate("is-sgd", problem, 1, 2, lr=0.05, faults={1: "hang", 4: "nan"})
    assert [step.used for step in history[1:]] == [(0, 2, 3, 5)] * 2
    assert all(step.degraded for step in history[1:]) and history[1].failed == {4: "returned NaN or inf"}
    gradients = [problem.gradient(problem.initial, i) for i in (0, 2, 3, 5)]
    theta1 = problem.initial - 0.05 * np.mean(gradients, axis=0)
    assert history[1].loss == pytest.approx(problem.loss(theta1), rel=1e-12)


def test_a_deadline_on_the_virtual_clock_ends_a_step_short_of_results():
    problem = least_squares(6)
    slow = Late([5])  # worker 5 arrives after 1000 virtual seconds
    with pytest.warns(RuntimeWarning, match="fewer than n - s"):
        history = simulate("is-sgd", problem, 1, 2, delays=slow, faults={0: "hang"}, step_timeout_s=50)
    assert all(step.degraded and step.timed_out and step.step_time_s == 50.0 for step in history[1:])
    with pytest.raises(TooManyStragglersError, match=r"no result within the step deadline of 50 s"):
        simulate("gc-cr", problem, 1, 2, delays=slow, faults={0: "hang"}, step_timeout_s=50.0)
    waits = simulate("gc-cr", problem, 1, 2, delays=slow, faults={0: "hang"})  # no deadline: waits
    assert [step.used for step in waits[1:]] == [(1, 2, 3, 4, 5)] * 2
