"""The conformance suite every code passes, shipped for codes of your own. ::

    from codedcomputing.testing import check_code
    check_code(lambda num_inputs, num_workers: MyCode(num_inputs, num_workers))

As scikit-learn's ``check_estimator`` does for estimators, :func:`check_code` builds codes of
a few sizes and checks the contract of :class:`~codedcomputing.codes.Code`: attributes and
shapes, the type, dtype and device of numpy arrays and torch tensors (torch only if it is
installed), integer and bool inputs, results in any order and any integer form of ``alive``,
NaN and inf results as erasures, the errors bad input must raise (naming the parameter),
pickling, decoding from several threads at once, the code's own promise
(:meth:`Code.promised_case`), and for a code with systematic workers
(:attr:`Code.systematic_workers`) the systematic promise
(:func:`check_systematic`). The first failure raises ``AssertionError`` naming the check
and the code. No test framework is needed.

Tolerances: two decodings that should agree may differ by rounding only, measured on the
code's own linear maps (``factor * ||D||_inf * max|Y|`` for the decoding matrix ``D``) when
:attr:`Code.linear` is true, and relative to the estimates' size otherwise.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _arraylib
from .codes import Code
from .errors import InsufficientResultsError, MissingResultsError, NonFiniteResultWarning

__all__ = ["CHECKS", "check_binding", "check_code", "check_systematic"]

try:  # torch is optional: its checks run only where it is installed
    import torch
except ImportError:  # pragma: no cover - the test environment has torch
    torch = None

SIZES = ((6, 20), (3, 7), (1, 2))


def check_code(make_code: Callable[[int, int], Code], *, sizes=SIZES, seed: int = 0) -> list[str]:
    """Run every check of :data:`CHECKS` on ``make_code(num_inputs, num_workers)`` for each
    ``(num_inputs, num_workers)`` in ``sizes``; return the names of the checks that ran.

    ``make_code`` may ignore ``num_workers`` (uncoded, replication); a size it refuses with
    ``ValueError`` (LCC's threshold above ``num_workers``) is left out, but at least one
    size must build. Raises ``AssertionError`` at the first check that fails.
    """
    built = []
    for num_inputs, num_workers in sizes:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                built.append(make_code(num_inputs, num_workers))
        except ValueError:
            continue
    if not built:
        raise AssertionError(f"make_code built no code of the sizes {list(sizes)}")
    for code in built:
        if not isinstance(code, Code):
            raise AssertionError(f"make_code returned {type(code).__name__}, not a codedcomputing Code")
    ran = []
    if any(code.batch_adaptive for code in built):
        for index, code in enumerate(built):
            if code.batch_adaptive:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        check_binding(code, np.random.default_rng([seed, index, 1]))
                except AssertionError as err:
                    raise AssertionError(f"check_binding failed for {code!r}: {err}") from err
        ran.append(check_binding.__name__)
        # every other check runs on the code bound to a batch: that is the code that decodes
        built = [
            code.bind(np.random.default_rng([seed, i, 2]).standard_normal((code.num_inputs, 3)))
            if code.batch_adaptive
            else code
            for i, code in enumerate(built)
        ]
    for check in CHECKS:
        for index, code in enumerate(built):
            rng = np.random.default_rng([seed, index])
            try:
                with warnings.catch_warnings():  # the code's own warnings are not failures here
                    warnings.simplefilter("ignore")
                    check(code, rng)
            except AssertionError as err:
                raise AssertionError(f"{check.__name__} failed for {code!r}: {err}") from err
        ran.append(check.__name__)
    return ran


# -- helpers --------------------------------------------------------------------------------


def _numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if _arraylib.is_torch(x) else np.asarray(x)


def _rows(x, index):
    return _arraylib.take_rows(x, np.asarray(index, dtype=np.int64))


def _sin(x):
    return torch.sin(x) if _arraylib.is_torch(x) else np.sin(x)


def _quiet(call, *args):
    """``call(*args)``, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call(*args)


def _ignoring_warnings(call, *args):
    """``call(*args)`` with its warnings (erasures, a GCV grid's edge) ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args)


def _decodable(code: Code) -> np.ndarray:
    """An alive set the code decodes from, quietly and to finite estimates: every worker but
    1, 2 and 3 when that works (distinct inputs of replication), else every worker (uncoded)."""
    everyone = np.arange(code.num_workers)
    if code.num_workers - 3 >= max(code.min_results, 2):
        fewer = np.setdiff1d(everyone, [1, 2, 3])
        try:
            if np.all(np.isfinite(_quiet(code.decode, np.zeros((fewer.size, 1)), fewer))):
                return fewer
        except (InsufficientResultsError, MissingResultsError, RuntimeWarning):
            pass
    return everyone


def _roundoff(code: Code, alive, Y, factor: float = 1e-12) -> float:
    """How far two decodings of ``Y`` that differ by rounding only may be apart."""
    scale = float(np.max(np.abs(_numpy(Y)))) if np.size(_numpy(Y)) else 0.0
    if not code.linear:
        return factor * 1e3 * max(scale, 1.0)
    matrix = _numpy(_quiet(code.decode, np.eye(len(alive)), alive))
    return factor * float(np.nanmax(np.nansum(np.abs(matrix), axis=1))) * scale  # NaN: filled rows


def _encode_roundoff(code: Code, X, factor: float = 1e-12) -> float:
    matrix = _numpy(code.encode(np.eye(code.num_inputs)))
    return factor * float(np.abs(matrix).sum(axis=1).max()) * float(np.max(np.abs(_numpy(X))))


def _close(actual, expected, atol: float, what: str) -> None:
    actual, expected = _numpy(actual).astype(np.float64), _numpy(expected).astype(np.float64)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape}, expected {expected.shape}")
    both_nan = np.isnan(actual) & np.isnan(expected)  # rows a copying code filled with NaN
    if np.any(np.isnan(actual) != np.isnan(expected)):
        raise AssertionError(f"{what}: NaN where the other has a number")
    gaps = np.abs(np.where(both_nan, 0.0, actual) - np.where(both_nan, 0.0, expected))
    worst = float(np.max(gaps)) if gaps.size else 0.0
    if not worst <= atol:
        raise AssertionError(f"{what}: differs by {worst:.3g} (allowed {atol:.3g})")


def _same_kind(out, like, what: str) -> None:
    if _arraylib.is_torch(like):
        ok = _arraylib.is_torch(out) and out.dtype == like.dtype and out.device == like.device
    else:
        ok = type(out) is np.ndarray and out.dtype == like.dtype
    if not ok:
        got = f"{type(out).__name__} {getattr(out, 'dtype', '')} {getattr(out, 'device', '')}"
        want = f"{type(like).__name__} {like.dtype} {getattr(like, 'device', '')}"
        raise AssertionError(f"{what} returned {got.strip()}, expected {want.strip()}")


def _raises(error, call, *args, match: tuple[str, ...] = ()):
    """The exception ``call(*args)`` raises, checked to be ``error`` and to mention one of ``match``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(*args)
    except error as err:
        if match and not any(word in str(err) for word in match):
            raise AssertionError(
                f"the {type(err).__name__} does not name {' or '.join(match)}: {err}"
            ) from err
        return err
    raise AssertionError(f"{getattr(call, '__name__', call)} accepted it: expected {error.__name__}")


# -- the checks -----------------------------------------------------------------------------


def check_attributes(code: Code, rng) -> None:
    """``name``, ``description``, sizes, points, ``min_results``, repr and ``get_params``."""
    assert isinstance(code.name, str) and code.name == code.name.lower() and type(code).name == code.name
    assert isinstance(code.description, str) and code.description
    assert type(code.num_inputs) is int and type(code.num_workers) is int
    alpha, beta = np.asarray(code.alpha), np.asarray(code.beta)
    assert alpha.shape == (code.num_inputs,), f"alpha has shape {alpha.shape}"
    assert beta.shape == (code.num_workers,), f"beta has shape {beta.shape}"
    for points in (alpha, beta):
        assert np.all(np.isfinite(points)) and np.all((points >= -1) & (points <= 1)), (
            "points outside [-1, 1]"
        )
    assert np.unique(alpha).size == code.num_inputs, "alpha has duplicate points"
    assert isinstance(code.min_results, int) and 1 <= code.min_results <= code.num_workers
    assert type(code).__name__ in repr(code)
    twin = type(code)(**code.get_params())
    X = rng.normal(size=(code.num_inputs, 2))
    _close(twin.encode(X), code.encode(X), 0.0, "a code rebuilt from get_params() encodes")


def check_shapes(code: Code, rng) -> None:
    """Any trailing shape, the empty one included; ``encode`` leaves ``X`` alone."""
    alive = _decodable(code)
    for trailing in ((), (4,), (2, 3, 5), (0,)):
        X = rng.standard_normal((code.num_inputs, *trailing))
        before = X.copy()
        coded = code.encode(X)
        assert coded.shape == (code.num_workers, *trailing), f"encode gave {coded.shape} for {X.shape}"
        assert np.array_equal(X, before), "encode modified its input"
        est = code.decode(np.sin(coded[alive]), alive)
        assert est.shape == (code.num_inputs, *trailing), f"decode gave {est.shape}"
        assert np.all(np.isfinite(est)), "decode gave NaN or inf from finite results"


def check_array_kinds(code: Code, rng) -> None:
    """numpy float32/float64 and torch float32/float64 keep their type, dtype and device."""
    alive = _decodable(code)
    kinds = [np.float32, np.float64]
    if torch is not None:
        kinds += [torch.float32, torch.float64]
    for dtype in kinds:
        data = rng.standard_normal((code.num_inputs, 3, 2))
        X = (
            torch.tensor(data, dtype=dtype)
            if torch is not None and isinstance(dtype, torch.dtype)
            else data.astype(dtype)
        )
        coded = code.encode(X)
        _same_kind(coded, X, "encode")
        Y = _sin(_rows(coded, alive))
        est = code.decode(Y, alive)
        _same_kind(est, X, "decode")
        assert tuple(est.shape) == (code.num_inputs, 3, 2)
        assert np.all(np.isfinite(_numpy(est)))


def check_integer_and_bool_inputs(code: Code, rng) -> None:
    """Integer and bool inputs and results become floating point, with the same values."""
    alive = _decodable(code)
    for dtype in (np.int64, np.int32):
        X = rng.integers(-5, 6, size=(code.num_inputs, 4)).astype(dtype)
        coded = code.encode(X)
        assert isinstance(coded, np.ndarray) and np.issubdtype(coded.dtype, np.floating)
        _close(coded, code.encode(X.astype(np.float64)), _encode_roundoff(code, X), "integer X")
        Y = np.round(10 * coded[alive]).astype(dtype)
        est = code.decode(Y, alive)
        assert np.issubdtype(est.dtype, np.floating)
        _close(est, code.decode(Y.astype(np.float64), alive), _roundoff(code, alive, Y), "integer Y")
    mask = rng.random((code.num_inputs, 3)) > 0.5
    _close(code.encode(mask), code.encode(mask.astype(np.float64)), 0.0, "bool X")
    if torch is not None:
        out = code.encode(torch.arange(code.num_inputs * 3).reshape(code.num_inputs, 3))
        assert _arraylib.is_torch(out) and out.is_floating_point()
        out = code.encode(torch.tensor(mask))
        assert out.is_floating_point()
        _close(
            out,
            code.encode(mask.astype(np.float64)),
            1e-6 * max(1.0, float(np.abs(_numpy(out)).max())),
            "bool tensor",
        )


def check_alive_in_any_order_and_form(code: Code, rng) -> None:
    """Results in any order; ``alive`` as a list, numpy ints, uint16, a range or a tensor."""
    alive = _decodable(code)
    Y = np.sin(code.encode(rng.standard_normal((code.num_inputs, 5)))[alive])
    reference = code.decode(Y, alive)
    atol = _roundoff(code, alive, Y)
    for _ in range(3):
        perm = rng.permutation(alive.size)
        _close(code.decode(Y[perm], alive[perm]), reference, atol, "decode of permuted results")
    forms = [alive.tolist(), [np.int32(a) for a in alive], alive.astype(np.uint16), alive.astype(float)]
    if np.array_equal(alive, np.arange(code.num_workers)):
        forms.append(range(code.num_workers))
    if torch is not None:
        forms.append(torch.as_tensor(alive))
        perm = rng.permutation(alive.size)
        _close(code.decode(torch.tensor(Y[perm]), alive[perm]), reference, atol, "torch results, permuted")
    for form in forms:
        _close(code.decode(Y, form), reference, atol, f"alive as {type(form).__name__}")
    _close(code.decode(list(Y), alive), reference, atol, "Y as a list of rows")
    if torch is not None:
        _close(
            code.decode([torch.tensor(row) for row in Y], alive), reference, atol, "Y as a list of tensors"
        )


def check_bad_input(code: Code, rng) -> None:
    """Bad X, Y and alive raise ValueError naming the parameter; too few results raise
    InsufficientResultsError with ``.needed`` and ``.alive``."""
    K = code.num_inputs
    for bad in (np.nan, np.inf, -np.inf):
        X = rng.standard_normal((K, 3))
        X[K // 2, 1] = bad
        _raises(ValueError, code.encode, X, match=("X",))
        if torch is not None:
            _raises(ValueError, code.encode, torch.tensor(X), match=("X",))
    for shape in ((K + 1, 3), (K - 1, 3), (0, 3), ()):
        _raises(ValueError, code.encode, np.ones(shape), match=("X",))
    _raises(ValueError, code.encode, np.array([["a"] * 3] * K), match=("X",))
    alive = _decodable(code)
    for delta in (-1, 1):
        _raises(ValueError, code.decode, np.ones((alive.size + delta, 3)), alive, match=("Y", "alive"))
    if alive.size >= 2:
        duplicated = alive.copy()
        duplicated[-1] = duplicated[0]
        err = _raises(ValueError, code.decode, np.ones((alive.size, 3)), duplicated, match=("alive",))
        assert "duplicate" in str(err)
    for wrong in (-1, code.num_workers):
        outside = alive.copy()
        outside[-1] = wrong
        _raises(ValueError, code.decode, np.ones((alive.size, 3)), outside, match=("alive",))
    n = code.num_workers
    for bad in (np.ones(n, dtype=bool), np.arange(n) + 0.5, np.arange(n)[:, None]):
        _raises(ValueError, code.decode, np.ones((n, 2)), bad, match=("alive",))
    for bad in (np.arange(n) + 0.5, [[0, 1], [2]]):
        _raises(ValueError, code.complete, bad, match=("alive",))
    needed = code.min_results
    err = _raises(InsufficientResultsError, code.decode, np.ones((needed - 1, 3)), np.arange(needed - 1))
    assert isinstance(err, ValueError) and err.needed == needed and err.alive == list(range(needed - 1))


def check_nonfinite_results_are_erasures(code: Code, rng) -> None:
    """A result with NaN or inf is dropped with one NonFiniteResultWarning naming its worker:
    the estimates are those without it (or the same error, if the code then cannot decode)."""
    alive = _decodable(code)
    kinds = ["numpy"] + (["torch"] if torch is not None else [])
    for kind, bad in ((k, b) for k in kinds for b in (np.nan, np.inf)):
        data = np.sin(code.encode(rng.standard_normal((code.num_inputs, 4)))[alive])
        Y = torch.tensor(data) if kind == "torch" else data.copy()
        j = alive.size // 2
        Y[j, 1] = bad  # one bad entry poisons the whole row
        keep = np.delete(np.arange(alive.size), j)
        try:
            expected = _quiet(code.decode, _rows(Y, keep), alive[keep])
            failure = None
        except (InsufficientResultsError, MissingResultsError) as err:
            expected, failure = None, type(err)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if failure is not None:
                _raises(failure, code.decode, Y, alive)
                est = None
            else:
                est = code.decode(Y, alive)
        if failure is None:
            flagged = [w for w in caught if issubclass(w.category, NonFiniteResultWarning)]
            assert len(flagged) == 1, f"{len(flagged)} NonFiniteResultWarnings for one bad result"
            assert str(int(alive[j])) in str(flagged[0].message), "the warning does not name the worker"
            _same_kind(est, Y, "decode with an erasure")
            _close(est, expected, _roundoff(code, alive[keep], _rows(Y, keep)), "decode with an erasure")
        if failure is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NonFiniteResultWarning)
                erased = code.decode_details(Y, alive).erased.tolist()
            assert erased == [int(alive[j])], f"decode_details().erased is {erased}"


def check_numpy_and_torch_agree(code: Code, rng) -> None:
    """A torch tensor and a numpy array with the same numbers encode and decode alike."""
    if torch is None:
        return
    X = rng.standard_normal((code.num_inputs, 3, 2))
    coded = code.encode(X)
    _close(code.encode(torch.tensor(X)), coded, _encode_roundoff(code, X), "torch encode")
    alive = _decodable(code)
    Y = np.sin(coded[alive])
    _close(
        code.decode(torch.tensor(Y), torch.tensor(alive)),
        code.decode(Y, alive),
        _roundoff(code, alive, Y),
        "torch decode",
    )


def check_decode_details(code: Code, rng) -> None:
    """``decode_details`` returns decode's estimates, the sorted workers used and no erasures."""
    alive = rng.permutation(_decodable(code))
    Y = np.sin(code.encode(rng.standard_normal((code.num_inputs, 3)))[alive])
    details = code.decode_details(Y, alive)
    _close(details.estimates, code.decode(Y, alive), _roundoff(code, alive, Y), "decode_details().estimates")
    assert details.alive.tolist() == sorted(alive.tolist()) and details.erased.size == 0
    assert all(isinstance(key, str) for key in details.info)
    exact = details.info["exact"]
    assert isinstance(exact, np.ndarray) and exact.dtype == bool and exact.shape == (code.num_inputs,), (
        f"info['exact'] must be a bool array of shape (K,), got {exact!r}"
    )


def check_fast_paths(code: Code, rng) -> None:
    """``decode_rows`` (checked and trusted) gives ``decode_details``' rows and exact flags, a
    systematic worker's own result bit for bit; ``encoder_rows`` reproduces ``encode`` (None
    only for a batch-adaptive code)."""
    alive = rng.permutation(_decodable(code))
    X = rng.standard_normal((code.num_inputs, 3))
    Y = np.sin(code.encode(X)[alive])
    details = code.decode_details(Y, alive)
    rows = rng.permutation(code.num_inputs)[: max(1, code.num_inputs // 2)]
    tolerance = _roundoff(code, alive, Y)
    for trusted in (False, True):
        values, exact = code.decode_rows(Y, alive, rows, trusted=trusted)
        _close(values, _rows(details.estimates, rows), tolerance, f"decode_rows(trusted={trusted})")
        expected = np.asarray(details.info["exact"])[rows]
        assert np.array_equal(np.asarray(exact, dtype=bool), expected), (
            f"decode_rows(trusted={trusted}) exact {exact!r}, decode_details' {expected!r}"
        )
        raw = np.asarray(code.systematic_inputs)
        for j, k in enumerate(rows.tolist()):
            own = [i for i, n in enumerate(alive.tolist()) if raw[n] == k]
            if own:  # the first listed worker that computed input k raw
                assert np.array_equal(_numpy(values)[j], _numpy(Y)[own[0]]), f"input {k}'s own result"
    matrix = code.encoder_rows()
    if matrix is None:
        assert code.batch_adaptive, "encoder_rows() is None only for a batch-adaptive code"
        return
    assert matrix.shape == (code.num_workers, code.num_inputs) and not matrix.flags.writeable
    _close(matrix @ X, code.encode(X), _encode_roundoff(code, X), "encoder_rows() @ X")
    workers = rng.permutation(code.num_workers)[:2]
    assert np.array_equal(code.encoder_rows(workers), matrix[workers])


def check_pickling(code: Code, rng) -> None:
    """A pickled and unpickled code (after decoding, so with a warm cache) decodes the same."""
    alive = _decodable(code)
    Y = rng.normal(size=(alive.size, 2))
    before = code.decode(Y, alive)
    clone = pickle.loads(pickle.dumps(code))
    # to rounding: a decoder may take another exact route (map or banded solve) on a later call
    _close(clone.decode(Y, alive), before, _roundoff(code, alive, Y), "the unpickled code's decode")
    _close(
        clone.encode(np.ones((code.num_inputs, 1))),
        code.encode(np.ones((code.num_inputs, 1))),
        0.0,
        "its encode",
    )


def check_thread_safety(code: Code, rng) -> None:
    """Decoding different alive sets from eight threads at once gives the serial answers."""
    candidates = [_decodable(code)]
    for _ in range(15):
        size = int(rng.integers(max(code.min_results, 1), code.num_workers + 1))
        candidates.append(np.sort(rng.choice(code.num_workers, size, replace=False)))
    Y = np.sin(code.encode(rng.standard_normal((code.num_inputs, 3))))
    jobs = []
    for alive in candidates:
        try:
            expected = _quiet(code.decode, Y[alive], alive)
        except (InsufficientResultsError, MissingResultsError, RuntimeWarning):
            continue
        jobs.append((alive, expected))
    fresh = pickle.loads(pickle.dumps(code))  # an empty cache: the threads build the decoders

    def decode(job):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fresh.decode(Y[job[0]], job[0])

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(decode, jobs * 4))
    for (alive, expected), got in zip(jobs * 4, results, strict=True):
        _close(
            got, expected, _roundoff(code, alive, Y[alive]), f"a concurrent decode of {alive.size} results"
        )


def check_promise(code: Code, rng) -> None:
    """The code's own promise (:meth:`Code.promised_case`), on five random instances."""
    for _ in range(5):
        case = code.promised_case(rng)
        if case is None:
            return
        X, f, alive = case
        truth = f(np.asarray(X, dtype=np.float64))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = code.decode(f(code.encode(X))[alive], alive)
        _close(
            est,
            truth,
            1e-8 * max(1.0, float(np.max(np.abs(truth)))),
            f"the promise from {len(alive)} results",
        )


def check_relabelled_workers(code: Code, rng) -> None:
    """Which worker sits at which point is a label: the same code with its worker points
    ``beta`` given in another order encodes the same coded inputs for the relabelled workers
    and decodes the same estimates from their results, for random alive sets (codes that
    take ``beta`` and are not bound to a batch). Catches decoders that assume ``beta[alive]``
    sorted, as it is only under the natural assignment."""
    params = code.get_params()
    if "beta" not in params:
        return
    perm = rng.permutation(code.num_workers)  # the relabelled code's worker i is worker perm[i]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            twin = type(code)(**{**params, "beta": np.asarray(code.beta)[perm]})
    except (TypeError, ValueError):  # a code whose constructor cannot take these points back
        return
    label = np.argsort(perm)  # original worker w is the twin's worker label[w]
    X = rng.standard_normal((code.num_inputs, 3))
    coded = code.encode(X)
    _close(twin.encode(X), _rows(coded, perm), _encode_roundoff(code, X), "encode with relabelled workers")
    for alive in [_decodable(code)] + [
        rng.choice(code.num_workers, int(rng.integers(code.min_results, code.num_workers + 1)), replace=False)
        for _ in range(4)
    ]:
        Y = np.sin(_numpy(coded)[alive])
        try:
            expected = _quiet(code.decode, Y, alive)
        except (InsufficientResultsError, MissingResultsError, RuntimeWarning):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = twin.decode(Y, label[alive])
        _close(got, expected, _roundoff(code, alive, Y, 1e-9), f"decode of {alive.size} relabelled results")


def check_systematic(code: Code, rng) -> None:
    """``systematic_inputs`` (N,) and ``systematic_workers`` (K,) agree (the first worker of
    each input, -1 where none); for a code with systematic workers: ``encode`` sends each
    of them its raw input, bit for bit; with every systematic worker returned and random
    parity results, the estimates of those inputs are their results bit for bit, numpy
    and torch, and ``info["exact"]`` is True there; with some inputs' systematic workers
    missing (or returning NaN), ``info["exact"]`` is False for those inputs and the others
    keep their results."""
    inputs, workers = np.asarray(code.systematic_inputs), np.asarray(code.systematic_workers)
    k, n = code.num_inputs, code.num_workers
    assert inputs.shape == (n,) and np.issubdtype(inputs.dtype, np.integer), f"systematic_inputs: {inputs!r}"
    assert workers.shape == (k,) and np.issubdtype(workers.dtype, np.integer), f"workers: {workers!r}"
    assert np.all((inputs >= -1) & (inputs < k)), "systematic_inputs outside -1..K-1"
    first = [int(np.flatnonzero(inputs == i)[0]) if np.any(inputs == i) else -1 for i in range(k)]
    assert workers.tolist() == first, "systematic_workers is not each input's first systematic worker"
    if np.all(workers < 0):
        return
    X = rng.standard_normal((k, 3))
    raw = np.flatnonzero(inputs >= 0)
    coded = code.encode(X)
    assert np.array_equal(_numpy(coded)[raw], X[inputs[raw]]), "a systematic worker is not sent its raw input"
    covered = workers >= 0
    truth = np.tanh(X)
    Y = 10 * rng.standard_normal((n, 3))  # the parity workers' results: anything
    Y[raw] = np.tanh(X[inputs[raw]])
    parity = np.setdiff1d(np.arange(n), raw)
    extra = rng.choice(parity, int(rng.integers(0, parity.size + 1)), replace=False)
    alive = rng.permutation(np.union1d(raw, extra))
    if alive.size < code.min_results:
        alive = rng.permutation(np.arange(n))
    for kind in ("numpy", "torch") if torch is not None else ("numpy",):
        results = Y[alive] if kind == "numpy" else torch.from_numpy(Y[alive])
        details = _ignoring_warnings(code.decode_details, results, alive)
        assert np.array_equal(_numpy(details.estimates)[covered], truth[covered]), (
            f"{kind}: a returned systematic worker's result is not its input's estimate, bit for bit"
        )
        assert details.info["exact"][covered].all(), "info['exact'] is False for a returned systematic input"
    # some inputs' systematic workers missing: those inputs are not exact
    lost = rng.choice(np.flatnonzero(covered), int(rng.integers(1, covered.sum() + 1)), replace=False)
    kept = np.flatnonzero(covered & ~np.isin(np.arange(k), lost))
    fewer = alive[~np.isin(inputs[alive], lost)]
    nan_row = np.isin(inputs[alive], lost[:1])  # one lost input's workers return NaN instead
    with_nan = np.where(nan_row[:, None], np.nan, Y[alive])
    for results, used in ((Y[fewer], fewer), (with_nan, alive)):
        try:
            details = _ignoring_warnings(code.decode_details, results, used)
        except (InsufficientResultsError, MissingResultsError):
            continue
        if results is with_nan:
            lost = lost[:1]
        assert not details.info["exact"][lost].any(), "info['exact'] is True for an input with no result"
        assert details.info["exact"][kept].all() and np.array_equal(
            _numpy(details.estimates)[kept], truth[kept]
        ), "a returned systematic input lost its result when others went missing"


def check_complete(code: Code, rng) -> None:
    """``complete`` is a bool, true for every worker; and what it calls complete decodes."""
    everyone = np.arange(code.num_workers)
    assert code.complete(everyone) is True
    assert isinstance(code.complete(everyone[: code.min_results]), bool)
    for _ in range(5):
        alive = np.sort(
            rng.choice(code.num_workers, int(rng.integers(1, code.num_workers + 1)), replace=False)
        )
        if code.complete(alive):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                est = code.decode(np.ones((alive.size, 2)), alive)
            assert np.all(np.isfinite(_numpy(est))), "a complete alive set decoded to NaN"


def check_binding(code: Code, rng) -> None:
    """A batch-adaptive code (:meth:`Code.bind`): binding returns a code of the same sizes
    that is not batch-adaptive itself and decodes in input order; ``encode`` is the bound
    code's; binding is deterministic, leaves ``code`` unchanged, and two threads binding
    different batches at once get what binding them one at a time gives; the unbound code
    refuses to decode (naming ``bind``) rather than guess a layout. Batches have rows of 3
    values (a code with a reference set needs samples of that width)."""
    X = rng.standard_normal((code.num_inputs, 3))
    bound = code.bind(X)
    assert isinstance(bound, Code) and not bound.batch_adaptive, (
        "bind() must return a code bound to the batch"
    )
    assert (bound.num_inputs, bound.num_workers) == (code.num_inputs, code.num_workers), "bound sizes differ"
    _close(code.encode(X), bound.encode(X), 0.0, "encode() of the unbound code vs the bound one's")
    _close(code.bind(X).encode(X), bound.encode(X), 0.0, "binding the same batch twice")
    # estimates in input order: a permuted batch's estimates are the same estimates, permuted
    # (on several batches and permutations: a layout that depends on the rows' order, e.g. a
    # direction or a tie broken by row index, shows on some batches only)
    alive = np.arange(code.num_workers)
    for batch in [X] + [rng.standard_normal((code.num_inputs, 3)) for _ in range(3)]:
        bound_batch = code.bind(batch)
        est = bound_batch.decode(bound_batch.encode(batch)[alive], alive)
        for _ in range(2):
            perm = rng.permutation(code.num_inputs)
            twin = code.bind(batch[perm])
            est_perm = twin.decode(twin.encode(batch[perm])[alive], alive)
            assert np.allclose(
                _numpy(est_perm), _numpy(est)[perm], rtol=1e-6, atol=1e-8 * (1 + np.abs(_numpy(est)).max())
            ), "estimates of a permuted batch are not the permuted estimates"
    batches = [rng.standard_normal((code.num_inputs, 3)) for _ in range(8)]
    alone = [_numpy(code.bind(b).encode(b)) for b in batches]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda b: _numpy(code.bind(b).encode(b)), batches))
    for a, b in zip(alone, together, strict=True):
        _close(b, a, 0.0, "binding from four threads at once")
    try:
        code.decode(np.zeros((code.num_workers, 1)), alive)
    except ValueError as err:
        assert "bind" in str(err), f"decode of the unbound code raised without naming bind(): {err}"
    else:
        raise AssertionError("the unbound code decoded without a batch's layout")


CHECKS = [
    check_attributes,
    check_shapes,
    check_array_kinds,
    check_integer_and_bool_inputs,
    check_alive_in_any_order_and_form,
    check_bad_input,
    check_nonfinite_results_are_erasures,
    check_numpy_and_torch_agree,
    check_decode_details,
    check_fast_paths,
    check_pickling,
    check_thread_safety,
    check_promise,
    check_relabelled_workers,
    check_systematic,
    check_complete,
]
