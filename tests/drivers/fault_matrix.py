"""The fault matrix: backend x fault kind x number of faulty workers -> what a coded call did.

Runs every cell of ``tests/fault_matrix.py`` (GCC and BACC, K = 4, N = 12, waiting for
N - S = 9 with a deadline; the faulty workers arrive first) a few times with different
seeds, and prints a table of the observed outcomes: ``*`` marks a cell where some call
differed from the documented outcome, listed in full after the table. A crash or a hang
in a call is that call's outcome; the table goes on.

Usage: python tests/drivers/fault_matrix.py [--backends thread,simulated,ray] [--calls 3]
       [--codes gcc,bacc] [--kinds raise,nan,...] [--width 34]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import fault_matrix as fm  # lives in tests/, put on the path above


def _names(text: str, allowed, what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise SystemExit(f"--{what}: choose from {','.join(allowed)}; got {text!r}")
    return names


def summary(observations: list[fm.Observation]) -> str:
    """One cell's outcomes over its calls: ``ok``, or ``ok x2 / hang x1``."""
    counts = Counter(o.observed for o in observations)
    if len(counts) == 1:
        return next(iter(counts))
    return " / ".join(f"{observed} x{n}" for observed, n in counts.items())


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def print_table(results: dict, backends, codes, kinds, width: int) -> None:
    counts = fm.COUNTS
    head = f"{'backend':<10} {'code':<5} {'fault':<12}" + "".join(
        f" | {f'{n} faulty':<{width}}" for n in counts
    )
    for backend in backends:
        for code in codes:
            print(flush=True)
            print(head, flush=True)
            print("-" * len(head), flush=True)
            for kind in [k for k in fm.kinds_for(backend) if k in kinds]:
                row = f"{backend:<10} {code:<5} {kind:<12}"
                for count in counts:
                    observations = results.get(fm.Cell(backend, code, kind, count))
                    if observations is None:
                        text = "-"
                    else:
                        mark = "" if all(o.matches for o in observations) else "* "
                        text = mark + summary(observations)
                    row += f" | {_fit(text, width):<{width}}"
                print(row, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="thread,simulated,ray")
    parser.add_argument("--calls", type=int, default=3, help="calls per cell, seeds 0..calls-1")
    parser.add_argument("--codes", default=",".join(fm.CODES))
    parser.add_argument("--kinds", default=",".join(fm.KINDS))
    parser.add_argument("--width", type=int, default=34, help="table column width")
    args = parser.parse_args(argv)
    backends = _names(args.backends, fm.BACKENDS, "backends")
    codes = _names(args.codes, fm.CODES, "codes")
    kinds = _names(args.kinds, fm.KINDS, "kinds")
    if args.calls < 1:
        raise SystemExit("--calls must be >= 1")
    print(f"codedcomputing {getattr(cc, '__version__', '?')} from {Path(cc.__file__).parent}", flush=True)
    print(
        f"K={fm.K} N={fm.N} S={fm.S} wait_for={fm.WAIT_FOR} deadlines={fm.DEADLINE_S} "
        f"honest delays {fm.HONEST_DELAY_S} s, faulty 0 s; {args.calls} calls a cell",
        flush=True,
    )
    results: dict = {}
    started = time.perf_counter()

    def progress(o: fm.Observation) -> None:
        mark = "  " if o.matches else "* "
        print(
            f"{mark}[{time.perf_counter() - started:7.1f} s] {o.cell.id} seed {o.seed}: "
            f"{o.observed} ({o.seconds:.2f} s)",
            flush=True,
        )

    for backend in backends:
        ray_cluster = None
        if backend == "ray":
            print("starting Ray ...", flush=True)
            ray_cluster = fm.start_ray()
        try:
            for cell in fm.cells([backend], codes):
                if cell.kind not in kinds:
                    continue
                results[cell] = fm.run_cell(cell, range(args.calls), ray_cluster, progress)
        finally:
            if ray_cluster is not None:
                fm.stop_ray(ray_cluster)
    print(flush=True)
    print("Documented outcomes:", flush=True)
    for kind in kinds:
        per_count = ", ".join(f"{n}: {' or '.join(fm.documented(kind, n))}" for n in fm.COUNTS)
        print(f"  {kind:<12} {per_count}", flush=True)
    extra = fm.documented(fm.KILLS_PROCESS[0], 1, "ray")[1]
    print(f"  on ray, unusable kinds with <= S+1 faulty: also {extra!r}", flush=True)
    print_table(results, backends, codes, kinds, args.width)
    differing = [(cell, obs) for cell, obs in results.items() if not all(o.matches for o in obs)]
    print(flush=True)
    print(f"Cells that differ from the documented outcome: {len(differing)} of {len(results)}", flush=True)
    for cell, observations in differing:
        print(f"  {cell.id}: {summary(observations)}  (documented: {' or '.join(observations[0].expected)})")
        for o in observations:
            if not o.matches:
                print(f"      seed {o.seed}: {o.observed} [{o.detail}]", flush=True)
    print(f"total {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
