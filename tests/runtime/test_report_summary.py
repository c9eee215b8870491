"""What a person sees when printing a call's report, result or answers: a short summary, not arrays."""

import numpy as np

import codedcomputing as cc
from codedcomputing.runtime import faults as F
from codedcomputing.runtime.delays import ShiftedExponential


def _run(num_workers=200, wait_for=150, **run):
    cluster = cc.SimulatedCluster(
        delays=ShiftedExponential(0.01, 0.01), faults=F.Fixed({3: "raise", 7: "raise"}), seed=0
    )
    X = np.random.default_rng(0).normal(size=(20, 3))
    return cc.CodedExecutor(cc.GCC(20, num_workers), np.sin, cluster).run(X, wait_for=wait_for, **run)


def test_a_report_prints_a_short_summary_of_who_returned_failed_and_was_dropped():
    result = _run()
    report = result.report
    text = str(report)
    lines = text.splitlines()
    assert len(lines) <= 15 and len(text) < 1500  # 200 workers' arrays would be thousands of characters
    assert lines[0] == f"{report.alive.size} of 200 workers' results used"
    assert f"not waited for: {report.dropped.size} workers [" in text and "more]" in text
    assert "failed: 2 workers [3, 7]" in text and "InjectedFault" in text
    assert "decode: 0 of 20 estimates exact" in text
    assert f"{report.total_s:.3g} s" in text or f"{report.total_s * 1e3:.3g} ms" in text
    assert repr(report).startswith(f"Report(used={report.alive.size}/200,") and "\n" not in repr(report)
    # the arrays stay on the attributes
    assert report.latency.shape == (200,) and report.alive.size == 150


def test_results_and_answers_repr_name_shapes_not_values():
    result = _run()
    expected = "Result(estimates=<numpy float64 (20, 3)>, alive=150 workers, report=Report("
    assert repr(result).startswith(expected)
    cluster = cc.SimulatedCluster(delays=ShiftedExponential(0.01, 0.01), seed=0)
    code = cc.GCC(4, 8, systematic=True)
    answers = cc.CodedExecutor(code, np.sin, cluster).run_queries(np.ones((4, 2)), wait_for=6)
    text = repr(answers)
    assert text.startswith("Answers(estimates=<numpy float64 (4, 2)>, answered=4/4, exact=")
    assert "\n" not in text and len(text) < 300


def test_a_deadline_that_ended_the_wait_is_said():
    result = _run(wait_for=200, deadline=0.8)
    assert result.report.timed_out
    assert str(result.report).splitlines()[0].endswith("the deadline ended the wait")
