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

# 150 cases for each callable. The core ones (52 now; 49 when measured): ~11 s on 2 cores with every case
# run to the end (most calls take well under a millisecond; hypothesis' own overhead
# dominates). The extensions' 78 (api_fuzzing.EXTENSION_NAMES: ManifoldGCC and layout,
# RobustGCC and the attacks, gradient coding) cost about as much again: run beside the core
# ones on a loaded machine, those that passed took 1.3-2.0 s each against the core ones'
# 1.2-3.1 s, 1.1-1.9x the core's total were all of them to pass (the bound ManifoldGCC's and
# ThinPlateCode's methods the slowest, ~2.5 s each there). So 25-35 s in all unloaded, well
# under a minute: no callable is in the slow tier. A failing callable stops early; a hang
# costs api_fuzzing.TIME_LIMIT_S (5 s).
EXAMPLES = 150


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    with fz.one_blas_thread():  # a case's time is its own work (api_fuzzing.one_blas_thread)
        yield


@pytest.mark.parametrize("name", fz.TARGET_NAMES)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=(HealthCheck.too_slow,),
)
@given(rnd=st.randoms(use_true_random=False))
def test_bad_input_is_rejected_naming_the_parameter(name, rnd):
    case = fz.make_case(name, fz.Draw(rnd))
    outcome, detail = fz.classify(case)
    assert outcome in ("ok", "named"), f"{outcome}: {case!r}\n    -> {detail}"
