"""The input-space kernel decoder: exactness for affine f, an independent reference
(scikit-learn's Gaussian process with the same fixed kernel), labels, bad input."""

import numpy as np
import pytest

import codedcomputing as cc
from codedcomputing.codes.input_space import kernel_estimates


def _affine(rng, dim, out):
    weights, shift = rng.normal(size=(dim, out)), rng.normal(size=out)
    return lambda z: z.reshape(len(z), -1) @ weights + shift


def test_affine_f_is_recovered_at_affine_combinations_of_returned_inputs():
    rng = np.random.default_rng(0)
    coded = rng.normal(size=(12, 20))  # fewer returned inputs than dimensions: a non-singular Gram
    f = _affine(rng, 20, 3)
    alive = np.array([0, 2, 3, 5, 7, 8, 11])
    mix = rng.normal(size=(4, alive.size))
    mix /= mix.sum(axis=1, keepdims=True)  # affine combinations (weights sum to 1)
    targets = mix @ coded[alive]
    est = kernel_estimates(coded, f(coded[alive]), alive, targets, amplitude=0.0, ridge=0.0)
    np.testing.assert_allclose(est, f(targets), rtol=1e-9, atol=1e-9)
    # the RBF term gives that up (a finding, not a promise): not exact any more
    curved = kernel_estimates(coded, f(coded[alive]), alive, targets, amplitude=1.0, ridge=0.0)
    assert np.max(np.abs(curved - f(targets))) > 1e-6


def test_missing_systematic_input_of_a_linear_code_is_inverted_exactly():
    # a systematic GCC: worker results of an affine f; a missing input is an affine
    # combination of the returned coded inputs (the encoder is linear with rows summing to 1)
    rng = np.random.default_rng(1)
    K, N = 6, 9
    loose = cc.GCC(K, N)
    alpha = np.sort(loose.alpha)
    beta = np.sort(np.r_[alpha, (alpha[:-1] + alpha[1:])[::2] / 2])
    code = cc.GCC(K, N, alpha=alpha, beta=beta)
    X = rng.normal(size=(K, 30))
    f = _affine(rng, 30, 4)
    Z = np.asarray(code.encode(X))
    missing_worker = int(np.flatnonzero(beta == alpha[2])[0])
    alive = np.setdiff1d(np.arange(N), [missing_worker])
    est = kernel_estimates(Z, f(Z[alive]), alive, X[[2]], amplitude=0.0, ridge=0.0)
    np.testing.assert_allclose(est, f(X[[2]]), rtol=1e-8, atol=1e-8)


def test_matches_a_gaussian_process_with_the_same_fixed_kernel():
    pytest.importorskip("sklearn")  # the "models" extra
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, DotProduct

    rng = np.random.default_rng(2)
    coded = rng.normal(size=(15, 1, 3, 4))
    alive = rng.choice(15, 11, replace=False)
    results = np.tanh(coded[alive].reshape(11, -1) @ rng.normal(size=(12, 5)))
    targets = rng.normal(size=(3, 1, 3, 4))
    amplitude, length, ridge = 0.7, 0.4, 1e-6
    est = kernel_estimates(coded, results, alive, targets, amplitude=amplitude, length=length, ridge=ridge)

    inputs = coded[alive].reshape(11, -1)
    centre = inputs.mean(axis=0)
    diffs = inputs[:, None, :] - inputs[None, :, :]
    scale = float(np.mean(np.sum(diffs**2, axis=2)))
    kernel = ConstantKernel(1.0 / scale, "fixed") * DotProduct(np.sqrt(scale), "fixed") + ConstantKernel(
        amplitude, "fixed"
    ) * RBF(length * np.sqrt(scale), "fixed")
    gram = kernel(inputs - centre)
    gp = GaussianProcessRegressor(kernel, alpha=ridge * np.trace(gram) / 11, optimizer=None)
    mean = results.mean(axis=0)
    gp.fit(inputs - centre, results - mean)
    reference = mean + gp.predict(targets.reshape(3, -1) - centre)
    assert est.shape == (3, 5)
    np.testing.assert_allclose(est, reference, rtol=1e-7, atol=1e-9)


def test_workers_are_labels_and_a_returned_input_gets_its_result():
    rng = np.random.default_rng(3)
    coded = rng.normal(size=(10, 6))
    alive = np.array([1, 4, 5, 8, 9])
    results = np.sin(coded[alive] @ rng.normal(size=(6, 2)))
    targets = np.r_[coded[[4]], rng.normal(size=(2, 6))]
    est = kernel_estimates(coded, results, alive, targets, ridge=0.0)
    np.testing.assert_allclose(est[0], results[1], rtol=1e-9, atol=1e-9)
    shuffle = rng.permutation(alive.size)
    again = kernel_estimates(coded, results[shuffle], alive[shuffle], targets, ridge=0.0)
    np.testing.assert_allclose(again, est, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"alive": []}, "alive"),
        ({"alive": [0, 0]}, "alive"),
        ({"alive": [0, 9]}, "alive"),
        ({"results": np.zeros((3, 2))}, "results"),
        ({"targets": np.zeros((1, 5))}, "targets"),
        ({"coded_inputs": np.full((4, 3), np.nan)}, "coded_inputs"),
        ({"amplitude": -1.0}, "amplitude"),
        ({"length": 0.0}, "length"),
        ({"ridge": np.inf}, "ridge"),
    ],
)
def test_bad_input_names_the_parameter(change, name):
    arguments = {
        "coded_inputs": np.arange(12.0).reshape(4, 3),
        "results": np.zeros((2, 2)),
        "alive": [0, 1],
        "targets": np.zeros((1, 3)),
    }
    arguments.update(change)
    with pytest.raises(ValueError, match=name):
        kernel_estimates(**arguments)
