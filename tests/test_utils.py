"""codedcomputing.utils: the helpers keep numpy and torch types and dtypes, agree with plain
numpy products and indexing, and refuse bad input with a ValueError naming the parameter."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import scipy.sparse

from codedcomputing import utils

torch = pytest.importorskip("torch")


def test_doctests_pass():
    result = doctest.testmod(utils, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_apply_matrix_on_numpy_keeps_the_dtype_and_matches_einsum(dtype):
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(4, 3))
    X = (
        rng.normal(size=(3, 2, 5)) + (1j * rng.normal(size=(3, 2, 5)) if dtype == np.complex128 else 0)
    ).astype(dtype)
    out = utils.apply_matrix(matrix, X)
    assert type(out) is np.ndarray and out.dtype == dtype and out.shape == (4, 2, 5)
    reference = np.einsum("ij,j...->i...", matrix, X.astype(np.complex128))
    np.testing.assert_allclose(out, reference, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("sparse", [False, True])
def test_apply_matrix_on_torch_keeps_type_dtype_and_device(dtype, sparse):
    rng = np.random.default_rng(1)
    dense = rng.normal(size=(5, 4)) * (rng.random((5, 4)) < 0.6)
    matrix = scipy.sparse.csr_array(dense) if sparse else dense
    X = torch.as_tensor(rng.normal(size=(4, 3)), dtype=getattr(torch, dtype))
    out = utils.apply_matrix(matrix, X)
    assert isinstance(out, torch.Tensor) and out.dtype == X.dtype and out.device == X.device
    assert out.shape == (5, 3)
    reference = dense @ X.double().numpy()
    np.testing.assert_allclose(out.double().numpy(), reference, rtol=0.05 if dtype == "bfloat16" else 1e-5)


def test_apply_matrix_keeps_autograd_history():
    X = torch.ones(2, 3, requires_grad=True)
    utils.apply_matrix(np.array([[1.0, 2.0]]), X).sum().backward()
    np.testing.assert_array_equal(X.grad.numpy(), [[1.0] * 3, [2.0] * 3])


def test_apply_matrix_makes_integers_floats_as_encode_does():
    out = utils.apply_matrix(np.array([[0.5, 0.5]]), np.array([1, 2]))
    assert out.dtype == np.float64 and out.tolist() == [1.5]  # not truncated to an int map
    assert utils.apply_matrix([[0.5, 0.5]], torch.tensor([1, 2])).dtype == torch.get_default_dtype()


@pytest.mark.parametrize(
    ("matrix", "X", "name"),
    [
        (np.ones(3), np.ones(3), "matrix"),
        (np.ones((1, 2)) * 1j, np.ones(2), "matrix"),
        ([["a", "b"]], np.ones(2), "matrix"),
        (np.ones((1, 2)), np.ones(3), "X"),
        (np.ones((1, 2)), 1.0, "X"),
        (np.ones((1, 2)), np.array(["a", "b"]), "X"),
        (scipy.sparse.csr_array(np.ones((1, 2))), np.ones(3), "X"),
    ],
)
def test_apply_matrix_refuses_bad_input_naming_it(matrix, X, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        utils.apply_matrix(matrix, X)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_take_rows_matches_indexing_in_the_input_type(kind):
    data = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    Y = torch.from_numpy(data) if kind == "torch" else data
    rows = [3, 0, 3]
    out = utils.take_rows(Y, torch.tensor(rows) if kind == "torch" else rows)
    assert type(out) is type(Y) and out.dtype == Y.dtype
    np.testing.assert_array_equal(np.asarray(out), data[rows])
    assert utils.take_rows(Y, []).shape == (0, 3)


@pytest.mark.parametrize(
    ("Y", "rows", "name"),
    [
        (np.ones((3, 2)), [3], "rows"),
        (np.ones((3, 2)), [-1], "rows"),
        (np.ones((3, 2)), [0.5], "rows"),
        (np.ones((3, 2)), [[0]], "rows"),
        (np.ones((3, 2)), ["0"], "rows"),
        (np.float64(1.0), [0], "Y"),
    ],
)
def test_take_rows_refuses_bad_input_naming_it(Y, rows, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        utils.take_rows(Y, rows)


def test_check_alive_keeps_the_order_and_refuses_bad_sets():
    out = utils.check_alive(torch.tensor([2, 0]), 3)
    assert out.dtype == np.int64 and out.tolist() == [2, 0]
    assert utils.check_alive([], 3).tolist() == []
    for alive, message in [([3], "outside"), ([1, 1], "duplicate"), ([0.5], "integer"), ([[0]], "one-dim")]:
        with pytest.raises(ValueError, match=rf"^alive .*{message}"):
            utils.check_alive(alive, 3)
    for num_workers in (0, 2.0, True, "3"):
        with pytest.raises(ValueError, match=r"^num_workers "):
            utils.check_alive([0], num_workers)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_float64_round_trip_keeps_type_and_dtype(kind):
    data = np.arange(6.0, dtype=np.float32).reshape(2, 3, 1)
    Y = torch.from_numpy(data) if kind == "torch" else data
    flat = utils.to_float64(Y)
    assert type(flat) is np.ndarray and flat.dtype == np.float64 and flat.shape == (2, 3)
    back = utils.from_float64(flat * 2, like=Y).reshape(Y.shape)
    assert type(back) is type(Y) and back.dtype == Y.dtype
    np.testing.assert_array_equal(np.asarray(back), data * 2)


def test_float64_helpers_refuse_bad_input_naming_it():
    with pytest.raises(ValueError, match=r"^Y "):
        utils.to_float64(np.ones(2, dtype=np.complex128))
    with pytest.raises(ValueError, match=r"^values "):
        utils.from_float64(np.ones(2) * 1j, like=np.ones(2))
    with pytest.raises(ValueError, match=r"^like "):
        utils.from_float64(np.ones(2), like=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"^like "):
        utils.from_float64(np.ones(2), like=np.ones(2, dtype=np.int64))


def test_is_torch():
    assert utils.is_torch(torch.zeros(1)) and not utils.is_torch(np.zeros(1))
