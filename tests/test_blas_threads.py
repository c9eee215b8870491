"""Small master-side products run on one BLAS thread (``_arraylib.apply_matrix``): the results
are those of the unlimited product (to rounding: BLAS may split sums differently across thread
counts), the thread counts come back afterwards, also when threads overlap, and only the
products the limit is meant for are limited. No timing is asserted (see
benchmarks/perf/bench_decode_cost.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse
import torch
from threadpoolctl import ThreadpoolController

from codedcomputing import _arraylib


def blas_threads() -> list[int]:
    return [lib.get_num_threads() for lib in ThreadpoolController().select(user_api="blas").lib_controllers]


class CountingLimit:
    """Stands in for _arraylib.one_blas_thread and counts the products it is entered for."""

    def __init__(self):
        self.entered = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def counting(monkeypatch):
    limit = CountingLimit()
    monkeypatch.setattr(_arraylib, "one_blas_thread", limit)
    return limit


SHAPES = [(50, 25, 1000), (400, 200, 1000), (20, 300, 7)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("rows", "inner", "columns"), SHAPES)
def test_dense_numpy_products_are_unchanged(rows, inner, columns, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(rows, inner))
    x = rng.normal(size=(inner, columns)).astype(dtype)
    limited = _arraylib.apply_matrix(matrix, x)
    monkeypatch.setattr(_arraylib, "SMALL_PRODUCT", 0)  # the limit off
    free = _arraylib.apply_matrix(matrix, x)
    assert limited.dtype == free.dtype == dtype
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(limited, free, rtol=rtol, atol=rtol * np.abs(free).max())
    np.testing.assert_allclose(limited, matrix.astype(dtype) @ x, rtol=rtol, atol=rtol * np.abs(free).max())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sparse", [False, True])
def test_torch_products_off_torchs_pool_are_unchanged(dtype, sparse, monkeypatch):
    """CPU tensors that need no grad go through numpy or scipy on a view: same numbers, type,
    dtype and shape as torch's own product."""
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(60, 80)) * (rng.random((60, 80)) < 0.2)
    matrix = scipy.sparse.csr_array(matrix) if sparse else matrix
    x = torch.tensor(rng.normal(size=(80, 4, 50)), dtype=dtype)
    limited = _arraylib.apply_matrix(matrix, x)
    monkeypatch.setattr(_arraylib, "SMALL_PRODUCT", 0)  # the limit off: torch's own product
    free = _arraylib.apply_matrix(matrix, x)
    assert isinstance(limited, torch.Tensor) and limited.dtype == dtype and limited.shape == (60, 4, 50)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(limited, free, rtol=tol, atol=tol * float(free.abs().max()))


def test_tensors_that_require_grad_stay_in_torch():
    rng = np.random.default_rng(2)
    matrix = rng.normal(size=(30, 40))
    x = torch.tensor(rng.normal(size=(40, 3)), requires_grad=True)
    out = _arraylib.apply_matrix(matrix, x)
    assert out.requires_grad
    w = torch.randn_like(out)
    (out * w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), matrix.T @ w.numpy(), rtol=1e-12)


def test_only_small_dense_products_enter_the_limit(counting):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 1000)).astype(np.float32)
    _arraylib.apply_matrix(rng.normal(size=(2, 100)), x[:100, :100])  # 2e4 multiply-adds: one thread anyway
    assert counting.entered == 0
    small = rng.normal(size=(4, 200))
    _arraylib.apply_matrix(small, x)  # 8e5: limited
    assert counting.entered == 1
    _arraylib.apply_matrix(scipy.sparse.csr_array(small), x)  # sparse: scipy's product is single-threaded
    assert counting.entered == 1
    huge = rng.normal(size=(1000, 200))  # 2e8 > SMALL_PRODUCT: keeps its threads
    assert _arraylib.multiply_adds(huge, 1000) > _arraylib.SMALL_PRODUCT
    _arraylib.apply_matrix(huge, x)
    assert counting.entered == 1


def test_the_limit_sets_one_thread_and_restores_the_counts():
    before = blas_threads()
    with _arraylib.one_blas_thread:
        assert set(blas_threads()) == {1}
        with _arraylib.one_blas_thread:  # nested: still one, and the outer exit restores
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}
    assert blas_threads() == before


def test_overlapping_threads_restore_the_original_counts():
    """Eight threads limiting at once (as when several decodes run together) leave the counts
    as they found them, whatever the interleaving."""
    before = blas_threads()
    barrier = threading.Barrier(8)
    rng = np.random.default_rng(4)
    matrix = rng.normal(size=(100, 50))
    x = rng.normal(size=(50, 1000))
    expected = matrix @ x  # outside the threads: multithreaded BLAS called from 8 threads crawls
    errors = []

    def work():
        try:
            barrier.wait()
            for _ in range(10):
                assert np.allclose(_arraylib.apply_matrix(matrix, x), expected)
        except Exception as err:  # reported below, in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert blas_threads() == before


def test_without_the_libraries_the_products_still_run(monkeypatch):
    """Where threadpoolctl finds nothing to drive (or is missing), the limit does nothing."""
    limit = _arraylib._OneBlasThread()
    monkeypatch.setattr(limit, "_find_libraries", staticmethod(lambda: []))
    monkeypatch.setattr(_arraylib, "one_blas_thread", limit)
    matrix = np.arange(12.0).reshape(3, 4)
    x = np.ones((4, 100000))
    np.testing.assert_allclose(_arraylib.apply_matrix(matrix, x), matrix @ x)
    assert limit.libraries == []
