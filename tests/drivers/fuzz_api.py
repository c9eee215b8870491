"""Fuzz the public API with valid and invalid arguments and tabulate how each call ended.

    python tests/drivers/fuzz_api.py --cases 12000 --seed 0 [--only GCC,GCC.decode,...]
    python tests/drivers/fuzz_api.py --cases 11400 --seed 0 --only extensions

The spec (every public callable's parameters, their valid and invalid values, the result
invariants) and the classifier live in ``tests/api_fuzzing.py``; ``tests/test_api_fuzz.py``
runs the same spec under hypothesis. Case ``i`` calls the ``i % T``-th of the ``T`` selected
callables with arguments drawn from ``random.Random(f"{seed}:{i}")``, so a run is
reproducible and ``--show-case I`` replays one case (with the same ``--seed`` and ``--only``).
``--only extensions`` selects the extensions' callables (``api_fuzzing.EXTENSION_NAMES``:
ManifoldGCC and ``layout``, RobustGCC, ApproxIFER and the attacks, gradient coding).

The table "by callable and outcome" counts each callable's cases by outcome, with the
seconds its cases took (hangs included): the cost of its fuzz test.

Outcomes (``api_fuzzing.OUTCOMES``): ``ok`` (a valid call returned a result that passed the
invariants), ``named`` (an invalid value raised ValueError/TypeError/a documented error
naming the parameter), and the failures: ``accepted-invalid``, ``unnamed``,
``unexpected-type``, ``valid-raised``, ``bad-result`` and ``hang``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import api_fuzzing as fz  # the tests folder, put on sys.path above

GOOD = ("ok", "named")


def case_for(index: int, seed: int, names: list[str], p_perturb: float) -> fz.Case:
    draw = fz.Draw(random.Random(f"{seed}:{index}"))
    return fz.make_case(names[index % len(names)], draw, p_perturb)


def main(argv: list[str] | None = None) -> int:
    with fz.one_blas_thread():  # a case's time is its own work (api_fuzzing.one_blas_thread)
        return run(argv)


def run(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--cases", type=int, default=12000, help="number of cases (default 12000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case generator (default 0)")
    parser.add_argument(
        "--only", default="", help="comma-separated callables to fuzz, or 'extensions' (default: all)"
    )
    parser.add_argument("--p-perturb", type=float, default=0.75, help="share of cases with one invalid value")
    parser.add_argument("--time-limit", type=float, default=fz.TIME_LIMIT_S, help="seconds per case")
    parser.add_argument("--examples", type=int, default=3, help="example messages per group (default 3)")
    parser.add_argument("--show-case", type=int, default=None, metavar="I", help="replay case I and exit")
    parser.add_argument("--list", action="store_true", help="list the callables and exit")
    parser.add_argument(
        "--reproducers",
        action="store_true",
        help="for each failing (callable, parameter, outcome), show its shortest case in full",
    )
    args = parser.parse_args(argv)

    if args.list:
        for name in fz.TARGET_NAMES:
            params = [p.name for p in fz.TARGETS[name].params if not p.hidden]
            print(f"{name}({', '.join(params)})")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(fz.TARGET_NAMES)
    if names == ["extensions"]:
        names = list(fz.EXTENSION_NAMES)
    unknown = [n for n in names if n not in fz.TARGETS]
    if unknown:
        parser.error(f"unknown callables {unknown}; known: {', '.join(fz.TARGET_NAMES)}")

    import codedcomputing

    print(f"codedcomputing from {codedcomputing.__file__}", flush=True)
    if args.show_case is not None:
        case = case_for(args.show_case, args.seed, names, args.p_perturb)
        outcome, detail = fz.classify(case, args.time_limit)
        print(f"case {args.show_case}: {case.describe(2000)}\noutcome: {outcome}\ndetail: {detail}")
        if detail.warnings:
            print("warnings:", *detail.warnings, sep="\n  ")
        return 0

    print(f"{args.cases} cases over {len(names)} callables, seed {args.seed}", flush=True)
    outcomes: Counter = Counter()
    by_callable: dict[str, Counter] = defaultdict(Counter)
    seconds: Counter = Counter()
    groups: dict[tuple, list] = defaultdict(list)
    shortest: dict[tuple, tuple] = {}  # (len(repr), index, repr, outcome detail) per failing group
    warned: dict[tuple, list] = defaultdict(list)
    start = time.perf_counter()
    for index in range(args.cases):
        try:
            case = case_for(index, args.seed, names, args.p_perturb)
        except Exception as err:  # a bug in the spec, not in the library: counted apart
            name = names[index % len(names)]
            outcomes["harness-error"] += 1
            by_callable[name]["harness-error"] += 1
            groups[(name, "-", "harness-error")].append((index, "", f"{type(err).__name__}: {err}"))
            continue
        began = time.perf_counter()
        outcome, detail = fz.classify(case, args.time_limit)
        seconds[case.name] += time.perf_counter() - began
        outcomes[outcome] += 1
        by_callable[case.name][outcome] += 1
        key = (case.name, case.perturbed or "-", outcome)
        if outcome not in GOOD:
            groups[key].append((index, case.label or "", " ".join(str(detail).split())))
            if args.reproducers:
                text = repr(case)
                if key not in shortest or len(text) < shortest[key][0]:
                    shortest[key] = (len(text), index, text, " ".join(str(detail).split()))
        if detail.numpy_warnings:
            warned[key].append((index, case.label or "", "; ".join(detail.numpy_warnings[:2])))
        if (index + 1) % 1000 == 0:
            elapsed = time.perf_counter() - start
            bad = sum(v for k, v in outcomes.items() if k not in GOOD)
            print(f"  {index + 1}/{args.cases} cases, {elapsed:.1f} s, {bad} not ok/named", flush=True)
    elapsed = time.perf_counter() - start

    total = sum(outcomes.values())
    print(f"\nfinished {total} cases in {elapsed:.1f} s\n")
    print("== outcomes ==")
    for outcome in (*fz.OUTCOMES, "harness-error"):
        if outcome in fz.OUTCOMES or outcomes[outcome]:
            print(f"  {outcome:<18} {outcomes[outcome]:>7}  {100 * outcomes[outcome] / max(total, 1):5.1f}%")
    print(f"  {'total':<18} {total:>7}")

    print("\n== by callable (cases: ok / named / other) ==")
    for name in names:
        c = by_callable[name]
        other = sum(v for k, v in c.items() if k not in GOOD)
        print(f"  {name:<30} {sum(c.values()):>5}: {c['ok']:>4} / {c['named']:>4} / {other:>4}")

    print("\n== by callable and outcome (cases; s: seconds) ==")
    columns = [*fz.OUTCOMES, "harness-error"]
    short_names = {"accepted-invalid": "acc-inv", "unexpected-type": "unexp-type", "harness-error": "harness"}
    heads = [short_names.get(c, c) for c in columns]
    width = max(len(n) for n in names)
    print(f"  {'callable':<{width}}  " + " ".join(f"{h:>10}" for h in heads) + f" {'s':>7}")
    for name in names:
        c = by_callable[name]
        cells = " ".join(f"{c[col]:>10}" for col in columns)
        print(f"  {name:<{width}}  {cells} {seconds[name]:>7.1f}")
    totals = " ".join(f"{outcomes[col]:>10}" for col in columns)
    print(f"  {'total':<{width}}  {totals} {sum(seconds.values()):>7.1f}")

    print("\n== not ok / named, by (callable, perturbed parameter, outcome) ==")
    width = max((len(f"{n}  {p}  {o}") for n, p, o in groups), default=10)
    for key in sorted(groups):
        print(f"  {'  '.join(key):<{width}}  {len(groups[key]):>5}")
    print("\n== examples (case index [invalid value]: message) ==")
    for key in sorted(groups):
        print(f"\n{'  '.join(key)}  ({len(groups[key])} cases)")
        seen: set[str] = set()
        shown = 0
        for index, label, message in groups[key]:
            if message in seen:
                continue
            seen.add(message)
            print(f"    #{index} [{label}]: {message[:400]}")
            shown += 1
            if shown >= args.examples:
                break

    if args.reproducers:
        only = f" --only {args.only}" if args.only else ""
        print("\n== the shortest case of each group (replay: --show-case I) ==")
        for key in sorted(shortest):
            _, index, text, message = shortest[key]
            replay = f"python tests/drivers/fuzz_api.py --seed {args.seed}{only} --show-case {index}"
            print(f"\n{'  '.join(key)}: {replay}")
            print(f"    case {index}: {text}\n    -> {message[:600]}")

    print("\n== numpy warnings that leaked, by (callable, perturbed parameter, outcome) ==")
    if not warned:
        print("  none")
    for key in sorted(warned):
        index, label, message = warned[key][0]
        print(f"  {'  '.join(key)}  {len(warned[key])} cases; e.g. #{index} [{label}]: {message[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
