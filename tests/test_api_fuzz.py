"""Property-based fuzz of the public API: bad input raises ValueError / TypeError (or a
documented error) naming the bad parameter; valid input works.

The spec and the classifier are in ``api_fuzzing.py`` (shared with
``tests/drivers/fuzz_api.py``, which runs many more cases and tabulates them). Here hypothesis
drives every random choice of the spec through ``st.randoms()``: which values are drawn,
whether a parameter is perturbed, which one and with which invalid value. One test per
callable, so a failure says which one; its message shows the case and what happened.

Shrinking is off: a case is a tree of dependent random choices whose "smaller" versions
are not simpler to read, and a hanging case would cost the time limit on every shrink step.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import api_fuzzing as fz

# 150 cases for each callable in CI (the slow tier), 30 in the fast tier with other draws
# (hypothesis derandomizes each test by its own name). The core ones (52 now; 49 when
# measured): ~11 s on 2 cores for 150 cases with every case run to the end (most calls take
# well under a millisecond; hypothesis' own overhead dominates); the extensions' 78
# (api_fuzzing.EXTENSION_NAMES: ManifoldGCC and layout, RobustGCC and the attacks, gradient
# coding) cost about as much again. All 136 callables at 150 cases: 61 s of test time on an
# idle 2-core machine; at 30 cases, about 12 s. A failing callable stops early; a hang costs
# api_fuzzing.TIME_LIMIT_S (5 s).
EXAMPLES = 150
QUICK_EXAMPLES = 30


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    with fz.one_blas_thread():  # a case's time is its own work (api_fuzzing.one_blas_thread)
        yield


def _fuzz(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=(HealthCheck.too_slow,),
    )


def _check(name, rnd):
    case = fz.make_case(name, fz.Draw(rnd))
    outcome, detail = fz.classify(case)
    assert outcome in ("ok", "named"), f"{outcome}: {case!r}\n    -> {detail}"


@pytest.mark.parametrize("name", fz.TARGET_NAMES)
@_fuzz(QUICK_EXAMPLES)
@given(rnd=st.randoms(use_true_random=False))
def test_bad_input_is_rejected_naming_the_parameter(name, rnd):
    _check(name, rnd)


@pytest.mark.slow
@pytest.mark.parametrize("name", fz.TARGET_NAMES)
@_fuzz(EXAMPLES)
@given(rnd=st.randoms(use_true_random=False))
def test_many_bad_inputs_are_rejected_naming_the_parameter(name, rnd):
    _check(name, rnd)
