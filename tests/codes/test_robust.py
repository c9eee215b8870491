"""RobustGCC, the robust smoothing schedule, and the attacks of cc.adversaries."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import codedcomputing as cc
from codedcomputing.codes.robust import block_medians, repeated_median_line, robust_lambda
from codedcomputing.testing import check_code

M = 100.0


def smooth_case(K=9, N=200, seed=0):
    """Sorted scalar inputs through f(x) = x sin x: ``(code, truth, honest results)``."""
    X = np.sort(np.random.default_rng(seed).uniform(-3, 3, (K, 1)), axis=0)
    code = cc.GCC(K, N)
    return code, X * np.sin(X), code.encode(X) * np.sin(code.encode(X))


@pytest.mark.parametrize(
    "make",
    [
        lambda k, n: cc.RobustGCC(k, n, num_adversaries=1, bound=1e3),
        lambda k, n: cc.RobustGCC(k, n, num_adversaries=2),
        lambda k, n: cc.RobustGCC(k, n, num_adversaries=1, bound=1e3, loss="huber"),
        lambda k, n: cc.RobustGCC(k, n, num_adversaries=2, loss="tukey", schedule="sup"),
        lambda k, n: cc.RobustGCC(k, n, num_adversaries=1, bound=1e3, loss="median"),
    ],
    ids=["squared", "no-bound", "huber", "tukey", "median"],
)
def test_robust_gcc_passes_the_conformance_suite(make):
    check_code(make)


def test_the_schedule_follows_the_published_rates():
    n = 10_000
    # q = n^b: n^(-4/5) up to the switch (0.4 for the mean-square schedule, 1/2 for sup), then
    # (q/n)^(4/3) or (q/n)^(6/5)
    assert robust_lambda(0, n) == pytest.approx(n**-0.8)
    assert robust_lambda(round(n**0.3), n) == pytest.approx(n**-0.8)
    q = round(n**0.7)
    assert robust_lambda(q, n) == pytest.approx((q / n) ** (4 / 3))
    assert robust_lambda(round(n**0.45), n, "sup") == pytest.approx(n**-0.8)
    assert robust_lambda(q, n, "sup", scale=3.0) == pytest.approx(3 * (q / n) ** 1.2)
    code = cc.RobustGCC(5, 400, num_adversaries=50, scale=0.5)
    assert code.lambda_dec == pytest.approx(0.5 * (50 / 400) ** (4 / 3))
    assert cc.RobustGCC(5, 400, 50, lambda_dec=1e-6).lambda_dec == 1e-6
    bad_options = [({"schedule": "l1"}, "schedule"), ({"scale": -1.0}, "scale"), ({"loss": "l1"}, "loss")]
    for bad, match in bad_options:
        with pytest.raises(ValueError, match=match):
            cc.RobustGCC(5, 40, 2, **bad)
    with pytest.raises(ValueError, match="num_adversaries"):
        cc.RobustGCC(5, 40, -1)
    with pytest.raises(ValueError, match="bound"):
        cc.RobustGCC(5, 40, 2, bound=0.0)
    with pytest.raises(ValueError, match="lambda_dec"):
        cc.RobustGCC(5, 40, 2, lambda_dec=-1e-3)


def test_without_adversaries_the_squared_decoder_is_the_clipped_smoothing_spline():
    _, _, Y = smooth_case()
    robust = cc.RobustGCC(9, 200, num_adversaries=3, bound=M, scale=1e-3, loss="squared")
    alive = np.arange(200)
    reference = cc.spline.fit(robust.beta, np.clip(Y, -M, M), robust.lambda_dec)(robust.alpha)
    np.testing.assert_allclose(robust.decode(Y, alive), reference, atol=1e-10)
    # the bound clips: a result beyond it counts as the bound
    Z = Y.copy()
    Z[100] = 1e12
    W = Y.copy()
    W[100] = M
    np.testing.assert_allclose(robust.decode(Z, alive), robust.decode(W, alive), atol=1e-12)


@pytest.mark.parametrize("attack", ["random", "concentrated", "greedy"])
def test_the_robust_losses_beat_plain_gcc_under_bounded_attacks(attack):
    q = 10
    errors = {"gcc": [], "squared": [], "huber": [], "tukey": []}
    for seed in range(4):
        code, truth, Y = smooth_case(seed=seed)
        alive = np.arange(200)
        attacked = cc.adversaries.make_attack(attack, q, M).corrupt(code, Y, alive, rng=seed)
        errors["gcc"].append(cc.metrics.mse(code.decode(attacked.results, alive), truth))
        for loss in ("squared", "huber", "tukey"):
            robust = cc.RobustGCC(9, 200, q, M, loss=loss, scale=1e-4)
            errors[loss].append(cc.metrics.mse(robust.decode(attacked.results, alive), truth))
    mean = {k: float(np.mean(v)) for k, v in errors.items()}
    assert mean["tukey"] < 0.1 * mean["gcc"], mean
    assert mean["huber"] < 0.1 * mean["gcc"], mean


def test_garbage_gives_finite_estimates_and_nan_rows_are_erasures():
    code, truth, Y = smooth_case()
    alive = np.arange(200)
    attacked = cc.adversaries.Garbage(20).corrupt(code, Y, alive, rng=3)
    bad_rows = ~np.isfinite(attacked.results).all(axis=1)
    assert bad_rows.any() and (np.abs(attacked.results[~bad_rows]) > 1e9).any()
    for loss in ("squared", "huber", "tukey"):
        robust = cc.RobustGCC(9, 200, 20, M, loss=loss, scale=1e-4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            decoded = robust.decode_details(attacked.results, alive)
        assert np.all(np.isfinite(decoded.estimates))
        assert set(decoded.erased.tolist()) == set(alive[bad_rows].tolist())
        assert any(issubclass(w.category, cc.NonFiniteResultWarning) for w in caught)
        # clipping bounds the squared decoder's error by the bound; the robust losses drop them
        assert cc.metrics.mse(decoded.estimates, truth) < (M**2 if loss == "squared" else 1.0)
    unbounded = cc.RobustGCC(9, 200, 20, loss="tukey", scale=1e-4)  # the range from the results
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cc.NonFiniteResultWarning)
        est = unbounded.decode(attacked.results, alive)
    assert np.all(np.isfinite(est)) and cc.metrics.mse(est, truth) < 1.0


@pytest.mark.parametrize(("n", "size"), [(200, 21), (50, 7), (43, 21), (101, 50), (30, 30)])
def test_block_medians_join_each_blocks_median_and_stay_within_its_honest_range(n, size):
    from scipy.interpolate import interp1d

    rng = np.random.default_rng(n)
    knots = np.sort(rng.uniform(-1, 1, n))
    values = np.c_[np.sin(3 * knots), knots**2]
    liars = rng.choice(n, (size - 1) // 2, replace=False)  # at most (size - 1) / 2 in all
    corrupted = values.copy()
    corrupted[liars] = 1e6
    out = block_medians(knots, corrupted, size)
    blocks = max(n // size, 1)
    edges = [*range(0, blocks * size, size), n]
    centres = [np.median(knots[a:b]) for a, b in itertools.pairwise(edges)]
    medians = np.array([np.median(corrupted[a:b], axis=0) for a, b in itertools.pairwise(edges)])
    if blocks > 1:
        expected = interp1d(centres, medians, axis=0, fill_value="extrapolate")(knots)
    else:
        expected = np.repeat(medians, n, axis=0)
    np.testing.assert_allclose(out, expected, atol=1e-9)
    inside = (knots >= centres[0]) & (knots <= centres[-1])
    assert np.all(np.abs(out[inside]) <= np.abs(values).max())  # the liars never lift it
    if blocks > 1:  # lines are reproduced, beyond the outer blocks too
        z = np.linspace(-1, 1, 7)[:, None]
        line = block_medians(knots, 2.0 - 3.0 * knots[:, None], size, z[:, 0])
        np.testing.assert_allclose(line, 2.0 - 3.0 * z, atol=1e-12)


def test_tukey_weights_zero_the_concentrated_liars():
    code, _, Y = smooth_case()
    alive = np.arange(200)
    attacked = cc.adversaries.Concentrated(10, M).corrupt(code, Y, alive, rng=0)
    robust = cc.RobustGCC(9, 200, 10, M, loss="tukey", scale=1e-8)
    details = robust.decode_details(attacked.results, alive)
    weights = details.info["weights"]  # one per worker of details.alive
    liars = np.isin(details.alive, attacked.workers)
    assert np.all(weights[liars] < 1e-3)
    assert np.mean(weights[~liars] > 0.5) > 0.95
    # the same under the golden assignment, whose points are not sorted by worker index
    golden = cc.RobustGCC(9, 200, 10, M, loss="tukey", scale=1e-8, assignment="golden")
    X = np.sort(np.random.default_rng(0).uniform(-3, 3, (9, 1)), axis=0)
    honest = golden.encode(X) * np.sin(golden.encode(X))
    attacked = cc.adversaries.Concentrated(10, M).corrupt(golden, honest, alive, rng=0)
    details = golden.decode_details(attacked.results, alive)
    liars = np.isin(details.alive, attacked.workers)
    assert np.all(details.info["weights"][liars] < 1e-3)
    assert np.mean(details.info["weights"][~liars] > 0.5) > 0.95


@pytest.mark.parametrize("loss", ["squared", "huber", "tukey", "median"])
def test_the_golden_assignment_decodes_as_the_natural_one(loss):
    """RobustGCC(5, 20, q = 1, assignment="golden"), whose beta[alive] is not sorted, decodes
    honest sin results as the natural assignment does, for every loss, with and without a
    bound; relabelled workers decode the same (check_code's check_relabelled_workers, for
    every option)."""
    X = np.linspace(-1, 1, 5)[:, None] * np.array([[1.0, 0.5]])
    rng = np.random.default_rng(7)
    for bound in (None, 10.0):
        natural = cc.RobustGCC(5, 20, 1, bound, loss=loss)
        golden = cc.RobustGCC(5, 20, 1, bound, loss=loss, assignment="golden")
        perm = cc.points.assignment(20, "golden")  # golden worker i sits at natural point perm[i]
        for alive in (np.arange(20), np.sort(rng.choice(20, 14, replace=False))):
            Y = np.sin(golden.encode(X))[alive]
            np.testing.assert_allclose(
                golden.decode(Y, alive), natural.decode(Y, perm[alive]), rtol=0, atol=1e-12
            )
        error = cc.metrics.mse(golden.decode(np.sin(golden.encode(X)), np.arange(20)), np.sin(X))
        assert error < {"squared": 1e-2, "median": 1e-3}.get(loss, 1e-6)  # squared: the schedule smooths


def test_without_a_bound_honest_results_far_from_the_rest_are_not_clipped():
    """RobustGCC(2, 20, q = 1, lambda_dec = 0) with 5 honest results (workers 0-3 and 19) of
    inputs affine in alpha through the identity: the clip around the results' range moved
    the far one by 5.3 (error 4.1). The clip around the robust trend leaves them: the same
    estimates as GCC's spline decoder, and the affine promise from any two honest results."""
    code = cc.RobustGCC(2, 20, num_adversaries=1, lambda_dec=0)
    X = 3.0 + 4.0 * code.alpha[:, None]
    alive = np.array([0, 1, 2, 3, 19])
    Y = code.encode(X)[alive]
    np.testing.assert_array_equal(code.clip(Y, alive), Y)
    reference = cc.GCC(2, 20, decoding="spline").decode(Y, alive)
    np.testing.assert_allclose(code.decode(Y, alive), reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(code.decode(Y, alive), X, rtol=0, atol=1e-12)
    rng = np.random.default_rng(3)
    for trial in range(300):  # the promise, drawn as check_code draws it, for every option
        loss = ("squared", "huber", "tukey", "median")[trial % 4]
        k, n = int(rng.integers(1, 7)), int(rng.integers(4, 30))
        q = int(rng.integers(0, n // 3 + 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cc.errors.MoreInputsThanWorkersWarning)
            robust = cc.RobustGCC(k, n, q, None, loss=loss, assignment=("natural", "golden")[trial % 2])
        case = robust.promised_case(rng)
        if case is None:
            continue
        X, f, alive = case
        est = robust.decode(f(robust.encode(X))[alive], alive)
        np.testing.assert_allclose(est, f(X), rtol=0, atol=1e-8 * max(1.0, np.abs(f(X)).max()))


def test_the_clip_without_a_bound_bounds_liars_and_keeps_the_order_given():
    """``clip(Y, alive)``: a result of 1e30 comes back within the hull of the honest
    majority's ranges (around the values and around the trend); rows keep the order given;
    bad arguments name ``Y`` or ``alive``."""
    _, _, Y = smooth_case(N=60)
    robust = cc.RobustGCC(9, 60, num_adversaries=3)
    alive = np.arange(60)
    attacked = Y.copy()
    attacked[[5, 30, 31]] = [[1e30], [-1e30], [7e29]]
    clipped = robust.clip(attacked, alive)
    honest = np.setdiff1d(alive, [5, 30, 31])
    assert np.abs(clipped).max() < 3 * np.abs(Y).max()  # the liars are pulled in
    np.testing.assert_array_equal(clipped[honest], Y[honest])  # smooth honest results are kept
    perm = np.random.default_rng(0).permutation(60)
    np.testing.assert_array_equal(robust.clip(attacked[perm], alive[perm]), clipped[perm])
    with pytest.raises(ValueError, match="Y"):
        robust.clip(2.0, [1])
    with pytest.raises(ValueError, match="Y"):
        robust.clip(np.full((2, 1), np.nan), [0, 1])
    with pytest.raises(ValueError, match="alive"):
        robust.clip(Y[:3], [0, 1, 1])


@pytest.mark.parametrize("n", [4, 7, 12, 25])
def test_the_repeated_median_line_is_siegels_and_ignores_a_minority_of_liars(n):
    """Against scipy's siegelslopes (its "hierarchical" intercept, the median of v - slope t),
    column by column; values affine in the knots are reproduced exactly with up to n/2 - 1 of
    them replaced by anything."""
    from scipy.stats import siegelslopes

    rng = np.random.default_rng(n)
    knots = np.sort(rng.uniform(-1, 1, n))
    values = rng.normal(size=(n, 3))
    line = repeated_median_line(knots, values)
    for j in range(3):
        slope, intercept = siegelslopes(values[:, j], knots, method="hierarchical")
        np.testing.assert_allclose(line[:, j], intercept + slope * knots, rtol=0, atol=1e-12)
    affine = 2.0 - 3.0 * knots[:, None] + np.array([[0.0, 1.0]])
    liars = rng.choice(n, n // 2 - 1, replace=False)
    corrupted = affine.copy()
    corrupted[liars] = rng.normal(scale=1e6, size=(liars.size, 2))
    np.testing.assert_allclose(repeated_median_line(knots, corrupted), affine, rtol=0, atol=1e-9)


def test_greedy_attacks_a_single_returned_result():
    """The greedy attack on one returned result pushed nothing: it raised "num_points must be
    >= 2". With one result the fit is that result, and it is pushed up by the bound."""
    code = cc.GCC(3, 10)
    out = cc.adversaries.Greedy(2, bound=5.0).corrupt(code, np.ones((1, 2)), [4], rng=0)
    np.testing.assert_array_equal(out.results, [[5.0, 5.0]])
    assert out.workers.tolist() == [4]


def test_torch_results_keep_their_kind():
    _, _, Y = smooth_case()
    alive = np.arange(0, 200, 2)
    robust = cc.RobustGCC(9, 200, 3, M, loss="huber", scale=1e-4)
    out = robust.decode(torch.tensor(Y[alive], dtype=torch.float32), alive)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == (9, 1)
    np.testing.assert_allclose(out.numpy(), robust.decode(Y[alive], alive), rtol=1e-3, atol=1e-4)


# -- the attacks -------------------------------------------------------------------------------


def test_attacks_corrupt_q_workers_within_the_bound_and_keep_the_rest():
    code, _, Y = smooth_case(N=60)
    alive = np.random.default_rng(0).permutation(60)[:50]
    for name in cc.adversaries.ATTACKS:
        attack = cc.adversaries.make_attack(name, 7, M)
        out = attack.corrupt(code, Y[alive], alive, rng=1)
        finite = np.isfinite(out.results).all(axis=1)
        changed = np.flatnonzero(np.any(out.results != Y[alive], axis=1) | ~finite)
        assert out.workers.tolist() == sorted(alive[changed].tolist()), name
        assert out.workers.size == 7
        if attack.bounded:
            assert np.all(np.abs(out.results) <= M)
        again = attack.corrupt(code, Y[alive], alive, rng=1)  # seeded
        np.testing.assert_array_equal(again.results, out.results)
    # q beyond the returned workers: all of them
    assert cc.adversaries.Random(80, M).corrupt(code, Y[alive], alive, rng=0).workers.size == 50
    assert cc.adversaries.Random(0, M).corrupt(code, Y[alive], alive, rng=0).workers.size == 0


def test_each_attack_does_what_it_says():
    code, _, Y = smooth_case(N=101)
    alive = np.arange(101)
    out = cc.adversaries.Concentrated(5, M).corrupt(code, Y, alive, rng=0)
    assert out.workers.tolist() == [48, 49, 50, 51, 52]  # around beta = 0 (worker 50)
    assert np.all(out.results[out.workers] == M)
    flipped = cc.adversaries.SignFlip(4).corrupt(code, Y, alive, rng=0)
    np.testing.assert_array_equal(flipped.results[flipped.workers], -Y[flipped.workers])
    greedy = cc.adversaries.Greedy(3, M).corrupt(code, Y, alive, rng=0)
    lam = robust_lambda(3, 101)
    residual = np.abs(Y - cc.spline.fit(code.beta, Y, lam)(code.beta))[:, 0]
    assert greedy.workers[0] in np.argsort(residual)[:3].tolist() or np.argmin(residual) in greedy.workers
    random = cc.adversaries.Random(6, M).corrupt(code, Y, alive, rng=0)
    assert np.all(random.results[random.workers] == M)


def test_attack_arguments_are_checked():
    with pytest.raises(ValueError, match="bound"):
        cc.adversaries.Random(3)
    with pytest.raises(ValueError, match="num_adversaries"):
        cc.adversaries.SignFlip(-2)
    with pytest.raises(ValueError, match=r"name \(the attack\) must be one of"):
        cc.adversaries.make_attack("flood", 3, M)
    with pytest.raises(ValueError, match="at"):
        cc.adversaries.Concentrated(3, M, at=2.0)
    code, _, Y = smooth_case(N=40)
    with pytest.raises(ValueError, match="code"):
        cc.adversaries.Random(3, M).corrupt("gcc", Y, np.arange(40), rng=0)
    Y[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cc.adversaries.Random(3, M).corrupt(code, Y, np.arange(40), rng=0)


# -- on a cluster ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["thread", "simulated"])
def test_the_executor_runs_with_adversarial_workers(backend):
    K, N, q = 5, 60, 4
    code = cc.RobustGCC(K, N, q, bound=10.0, loss="tukey", scale=1e-4)
    faults = cc.faults.Adversarial(cc.adversaries.Concentrated(q, bound=10.0))
    if backend == "thread":
        cluster = cc.ThreadCluster(4, faults=faults, seed=2)
    else:
        cluster = cc.SimulatedCluster(faults=faults, seed=2)
    X = np.linspace(-1, 1, K)[:, None] * np.ones((1, 3))
    with cluster:
        executor = cc.CodedExecutor(code, np.sin, cluster)
        result = executor.run(X, wait_for=50)
        plain = cc.CodedExecutor(cc.GCC(K, N), np.sin, cluster).run(X, wait_for=50)
        streamed = list(executor.map([X, 0.5 * X], wait_for=50))
    corrupted = [n for n, kind in result.report.faults.items() if kind == "adversary: concentrated"]
    assert len(corrupted) == q and set(corrupted) <= set(result.alive.tolist())
    assert cc.metrics.mse(result.estimates, np.sin(X)) < 0.1 * cc.metrics.mse(plain.estimates, np.sin(X))
    assert all(len(r.report.faults) == q for r in streamed)
    with pytest.raises(ValueError, match="attack"):
        cc.faults.Adversarial("greedy")


def test_unbounded_garbage_on_a_cluster_never_crashes_the_master():
    code = cc.RobustGCC(5, 40, 6, loss="huber", scale=1e-4)
    faults = cc.faults.Adversarial(cc.adversaries.Garbage(6))
    X = np.linspace(-1, 1, 5)[:, None]
    with cc.SimulatedCluster(faults=faults, seed=0) as cluster, warnings.catch_warnings():
        warnings.simplefilter("ignore", cc.NonFiniteResultWarning)
        for _ in range(5):
            result = cc.CodedExecutor(code, np.sin, cluster).run(X)
            assert np.all(np.isfinite(result.estimates))
            assert math.isfinite(cc.metrics.mse(result.estimates, np.sin(X)))


def test_the_adversaries_arguments_are_named_and_zero_results_are_no_error():
    """num_adversaries >= N (nobody honest) and robust_lambda with more liars than points are
    refused naming num_adversaries; block_medians, repeated_median_line, faults.corrupt and an
    adversarial fault's corrupt refuse bad input naming the parameter (``results``, not ``Y``);
    every attack, and the clip, take no returned result without error."""
    for make in (lambda: cc.RobustGCC(1, 12, num_adversaries=12), lambda: cc.ApproxIFER(3, 15, 15)):
        with pytest.raises(ValueError, match="num_adversaries"):
            make()
    assert cc.RobustGCC(1, 12, num_adversaries=11).num_adversaries == 11
    with pytest.raises(ValueError, match="num_adversaries"):
        robust_lambda(4, 3)
    knots = np.linspace(-1, 1, 5)
    bad_calls = [
        (lambda: block_medians(knots[::-1], np.ones(5), 1), "knots"),
        (lambda: block_medians(knots, [1, 2, np.nan, 4, 5], 1), "values"),
        (lambda: block_medians(knots, 0.5, 1), "values"),
        (lambda: block_medians(knots, np.ones(5), 0), "size"),
        (lambda: block_medians(knots, np.ones(5), 1, [np.inf]), "points"),
        (lambda: repeated_median_line([0.0, np.inf], [1.0, 2.0]), "knots"),
        (lambda: repeated_median_line(None, [1.0, 2.0]), "knots"),
        (lambda: repeated_median_line(knots, np.ones(4)), "knots"),
        (lambda: repeated_median_line(knots, np.ones(5) * 1j), "values"),
        (lambda: cc.faults.corrupt("abc", "nan", 0), "result"),
        (lambda: cc.faults.corrupt(np.ones(2), "raise", 0), "kind"),
        (lambda: cc.faults.corrupt(np.ones(2), "nan", 1.5), "seed"),
    ]
    for call, name in bad_calls:
        with pytest.raises(ValueError, match=name):
            call()
    fault = cc.faults.Adversarial(cc.adversaries.Random(1, M))
    with pytest.raises(ValueError, match="results"):
        fault.corrupt(cc.GCC(2, 4), "abc", [0], rng=0)
    np.testing.assert_array_equal(block_medians(knots, np.arange(5.0), 9), np.full((5, 1), 2.0))
    code = cc.GCC(3, 10)
    for name in cc.adversaries.ATTACKS:
        out = cc.adversaries.make_attack(name, 2, M).corrupt(code, np.zeros((0, 3)), [], rng=0)
        assert out.results.shape == (0, 3) and out.workers.size == 0
    assert cc.RobustGCC(3, 10, 1).clip(np.zeros((0, 2)), []).shape == (0, 2)


def test_the_default_is_tukey_and_the_published_decoder_an_option():
    code = cc.RobustGCC(9, 100, num_adversaries=5, bound=10.0)
    assert (code.loss, code.lambda_dec) == ("tukey", 0.0)
    published = cc.RobustGCC(9, 100, num_adversaries=5, bound=10.0, loss="squared")
    assert published.lambda_dec == pytest.approx(cc.codes.robust.robust_lambda(5, 100))


def test_tukeys_final_fit_is_gccs_default_decoder_on_the_kept_results():
    """Four neighbouring liars on a rough tanh network (a gap once they are left out): the
    decode leaves out the liars (and at most as many honest results) and equals plain GCC's
    default decoder on the honest results of the others, where the natural cubic
    interpolant through the same results (the former final fit) is several times worse."""
    rng = np.random.default_rng(27)
    w1, w2 = rng.normal(size=(16, 32)) * 3 / 4, rng.normal(size=(32, 3)) / np.sqrt(32)

    def f(x):
        return np.tanh(x @ w1) @ w2

    X = rng.normal(size=(9, 16))
    code = cc.RobustGCC(9, 60, num_adversaries=4, bound=10.0)
    Y, alive = f(code.encode(X)), np.arange(60)
    attacked = cc.adversaries.Concentrated(4, 10.0).corrupt(code, Y, alive, rng=27)
    decoded = code.decode_details(attacked.results, alive)
    kept = np.flatnonzero(decoded.info["weights"] > 0)
    left_out = np.setdiff1d(alive, kept)
    assert set(attacked.workers) <= set(left_out) and left_out.size <= 2 * 4
    reference = cc.GCC(9, 60).decode(Y[kept], kept)
    np.testing.assert_allclose(decoded.estimates, reference, rtol=0, atol=1e-10)
    interpolant = cc.spline.fit(code.beta[kept], Y[kept])(code.alpha)
    truth = f(X)
    assert cc.metrics.mse(decoded.estimates, truth) < cc.metrics.mse(interpolant, truth) / 3


def test_the_lambda_rules_pick_the_squared_losss_lambda_per_decode():
    """``lambda_rule="pilot"``: the grid's lambda whose smoothing spline at alpha is nearest the
    Tukey decode, searched a decade at a time and then finely (checked by a loop over the grid
    with the public spline fit); ``"gcv"``: the
    spline at the lambda GCV picks; both report it in ``info["lambda_dec"]``; the rules take
    the squared loss and no explicit lambda."""
    _, _, Y = smooth_case(N=60)
    alive = np.arange(60)
    attacked = cc.adversaries.Concentrated(3, M).corrupt(cc.GCC(9, 60), Y, alive, rng=0).results
    clipped = np.clip(attacked, -M, M)
    pilot = cc.RobustGCC(9, 60, 3, M, loss="squared", lambda_rule="pilot")
    decoded = pilot.decode_details(attacked, alive)
    tukey = cc.RobustGCC(9, 60, 3, M).decode(attacked, alive)
    distances = [
        np.sum((cc.spline.fit(pilot.beta, clipped, lam)(pilot.alpha) - tukey) ** 2)
        for lam in cc.codes.robust.PILOT_GRID
    ]
    step, grid = cc.codes.robust.PILOT_STEP, cc.codes.robust.PILOT_GRID
    coarse = min(range(0, grid.size, step), key=lambda i: distances[i])  # a decade at a time, then finely
    fine = range(max(coarse - step + 1, 0), min(coarse + step, grid.size))
    lam = decoded.info["lambda_dec"]
    assert lam == grid[min(fine, key=lambda i: distances[i])]
    expected = cc.spline.fit(pilot.beta, clipped, lam)(pilot.alpha)
    np.testing.assert_allclose(decoded.estimates, expected, rtol=1e-8, atol=1e-10)
    gcv = cc.RobustGCC(9, 60, 3, M, loss="squared", lambda_rule="gcv").decode_details(attacked, alive)
    lam = gcv.info["lambda_dec"]
    assert lam > 0
    np.testing.assert_allclose(
        gcv.estimates, cc.spline.fit(pilot.beta, clipped, lam)(pilot.alpha), atol=1e-10
    )
    for bad in ({"loss": "tukey"}, {"loss": "squared", "lambda_dec": 1e-3}):
        with pytest.raises(ValueError, match="lambda_rule"):
            cc.RobustGCC(9, 60, 3, M, lambda_rule="pilot", **bad)
    with pytest.raises(ValueError, match="lambda_rule"):
        cc.RobustGCC(9, 60, 3, M, loss="squared", lambda_rule="sup")


def test_scale_none_is_resolved_per_loss_and_held_as_given():
    """``scale=None`` stays None in get_params and the repr; the constant in use is the
    loss's (DEFAULT_SCALES), and an explicit scale is used as given."""
    for loss, constant in (("tukey", 0.0), ("huber", 1e-8), ("squared", 1.0)):
        code = cc.RobustGCC(9, 100, 5, loss=loss)
        assert code.scale is None and code.get_params()["scale"] is None and "scale" not in repr(code)
        assert code.schedule_scale == constant
        assert code.lambda_dec == pytest.approx(robust_lambda(5, 100, "mse", constant))
        again = type(code)(**code.get_params())
        assert again.scale is None and again.lambda_dec == code.lambda_dec
    given = cc.RobustGCC(9, 100, 5, loss="squared", scale=0.25)
    assert given.scale == given.schedule_scale == 0.25 and "scale=0.25" in repr(given)
    assert given.lambda_dec == pytest.approx(0.25 * robust_lambda(5, 100))
    with pytest.raises(ValueError, match=r"^scale"):
        cc.RobustGCC(9, 100, 5, scale=-1.0)


def test_decoder_is_refused_pointing_to_decode():
    """The robust decode depends on the results (clipping, weights): no decoder(alive) map."""
    code = cc.RobustGCC(9, 100, 5, bound=10.0, loss="squared")
    with pytest.raises(ValueError, match=r"decode\(Y, alive\)"):
        code.decoder(np.arange(100))


def test_tukey_extends_linearly_where_the_end_workers_are_missing():
    """RobustGCC(11, 17, q = 0) from workers 4 and 8 alone, inputs alpha through the identity:
    the Tukey loss held the estimates beyond the two results flat (GCC's gap-aware decoder
    fits no end from fewer than four results), an error of 0.99; it now extends the
    interpolating spline's line there, as the other losses do, and is exact."""
    code = cc.RobustGCC(11, 17, num_adversaries=0)
    X = code.alpha[:, None]
    alive = np.array([4, 8])
    np.testing.assert_allclose(code.decode(code.encode(X)[alive], alive), X, rtol=0, atol=1e-12)
    for loss in ("squared", "huber", "median"):  # what the other losses gave all along
        other = cc.RobustGCC(11, 17, num_adversaries=0, loss=loss)
        np.testing.assert_allclose(other.decode(other.encode(X)[alive], alive), X, rtol=0, atol=1e-12)


def test_the_median_loss_is_exact_from_two_results():
    """RobustGCC(11, 17, q = 1, loss="median") from the first five workers (one block of
    2q + 1 and a rest: fewer than 2(2q + 1) results), inputs alpha through the identity: the
    single block's median, a constant, was off by 1.91; below two blocks the decoder is now
    the repeated-median line through the results, exact for affine ones from two results on."""
    code = cc.RobustGCC(11, 17, num_adversaries=1, loss="median")
    X = code.alpha[:, None]
    Y = code.encode(X)
    for alive in (np.arange(5), np.arange(12, 17), np.array([3, 9]), np.array([0, 4, 8, 12, 16])):
        np.testing.assert_allclose(code.decode(Y[alive], alive), X, rtol=0, atol=1e-12)
    # the line is Siegel's (as step 1's trend), read at alpha; from 2(2q + 1) on, block medians
    alive = np.arange(5)
    line = repeated_median_line(code.beta[alive], np.sin(Y[alive]))
    slope = (line[-1] - line[0]) / (code.beta[4] - code.beta[0])
    expected = line[0] + slope * (code.alpha - code.beta[0])[:, None]
    np.testing.assert_allclose(code.decode(np.sin(Y[alive]), alive), expected, rtol=0, atol=1e-12)
    alive = np.arange(6)
    blocks = block_medians(code.beta[alive], np.sin(Y[alive]), 3, code.alpha)
    np.testing.assert_array_equal(code.decode(np.sin(Y[alive]), alive), blocks)


@pytest.mark.parametrize("loss", ["tukey", "squared", "huber", "median"])
def test_the_affine_promise_holds_for_every_alive_set(loss):
    """The class's promise as stated: inputs affine in alpha through an affine f, decoded
    exactly (error < 1e-9 of the outputs' size) from any two or more honest results, with
    and without a bound, for several q and points (golden order; explicit alpha beyond the
    workers' points), end workers among the returned or not."""
    rng = np.random.default_rng(11)
    layouts = [
        (9, 17, {}),
        (6, 30, {"assignment": "golden"}),
        (5, 12, {"alpha": np.linspace(-1.4, 1.4, 5), "beta": np.linspace(-1, 1, 12)}),
    ]
    for (k, n, layout), q, bound in itertools.product(layouts, (0, 1, 3), (None, 1e3)):
        code = cc.RobustGCC(k, n, q, bound, loss=loss, **layout)
        ends = [int(np.argmin(code.beta)), int(np.argmax(code.beta))]
        inner = np.setdiff1d(np.arange(n), ends)
        alive_sets = [
            np.sort(rng.choice(inner, 2, replace=False)),  # two results, both ends missing
            np.sort(rng.choice(inner, 5, replace=False)),
            np.setdiff1d(np.arange(n), ends[:1]),  # everything but one end
            np.sort(np.concatenate([ends[1:], rng.choice(inner, n // 2, replace=False)])),
            np.arange(n),
        ]
        for alive in alive_sets:
            X = rng.normal(size=3) + rng.normal(size=3) * code.alpha[:, None]
            weights, shift = rng.normal(size=(3, 2)), rng.normal(size=2)
            truth = X @ weights + shift
            if bound is not None:  # honest results within the bound
                weights, shift, truth = weights / 10, shift / 10, truth / 10
            Y = code.encode(X) @ weights + shift
            error = np.abs(code.decode(Y[alive], alive) - truth).max()
            assert error < 1e-9 * max(1.0, np.abs(truth).max()), (code, alive.tolist(), error)


def test_the_promised_case_draws_alive_sets_without_the_end_workers():
    """promised_case checks the promise as stated: any two or more results, so for every loss
    it draws alive sets missing an end worker, and for the median loss sets below two blocks."""
    rng = np.random.default_rng(0)
    for loss in ("tukey", "median"):
        code = cc.RobustGCC(9, 40, 3, loss=loss)
        ends = {int(np.argmin(code.beta)), int(np.argmax(code.beta))}
        cases = [code.promised_case(rng) for _ in range(60)]
        assert all(case is not None for case in cases)
        assert any(not ends <= set(alive.tolist()) for _, _, alive in cases)
        assert any(alive.size < 2 * (2 * 3 + 1) for _, _, alive in cases)
