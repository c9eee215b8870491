"""The published (squared-loss) decoder's rate under each rule for its lambda.

Runs ``coded experiment adversarial``'s sweep (its functions, attacks, exponents a and N,
q = ceil(N^a), all workers returning; every scheme decodes the same corrupted results) with one
squared-loss scheme per ``lambda_rule`` of :class:`~codedcomputing.RobustGCC`:

- ``paper``: the fixed schedule ``robust_lambda(q, N)`` times the constant the experiment
  calibrates per function (N = 200, q = 10, its own seed);
- ``pilot``: per decode, the lambda on a fixed grid whose smoothing spline at ``alpha`` is nearest
  the Tukey decode of the same results (no constant to calibrate);
- ``gcv``: per decode, generalised cross-validation on the clipped results (no constant).

Prints, per rule, the fitted slope of log mean MSE against log N for every (function, attack,
a) beside the goal ``(6/5)(a - 1) + 0.2``, and how many settings meet it (goal: 36 of 40). The
Tukey decoder's count is printed beside them.

    python benchmarks/studies/bench_robust_rules.py
    python benchmarks/studies/bench_robust_rules.py --trials 8 --functions xsinx
    python benchmarks/studies/bench_robust_rules.py --trials 8 --rules pilot paper   # the experiment's rows

With ``--trials 8`` and the default seed the pilot and paper rows are those of ``coded experiment
adversarial`` (same draws; the goal block, which the slopes leave out, is not run).
"""

from __future__ import annotations

import argparse

from codedcomputing.experiments import adversarial

RULES = ("pilot", "paper", "gcv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--functions", nargs="+", default=list(adversarial.FUNCTIONS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(adversarial.Config.num_workers))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rules", nargs="+", default=list(RULES), choices=RULES, help="the first is robust-gcc"
    )
    args = parser.parse_args()
    rules = tuple(args.rules)
    config = adversarial.Config(
        functions=tuple(args.functions),
        num_workers=tuple(args.sizes),
        trials=args.trials,
        approxifer_max_workers=0,
        goal=False,
        squared_rules=rules,
    )
    rows = adversarial.run(config, args.seed, progress=False)
    slopes = adversarial.fit_slopes(rows)
    names = {"robust-gcc": rules[0], **{f"robust-gcc-{r}": r for r in rules[1:]}, "robust-gcc-tukey": "tukey"}
    print(
        f"{args.trials} trials, N = {'/'.join(map(str, args.sizes))}, q = ceil(N^a); slope of log mean MSE "
        "against log N; goal: slope <= (6/5)(a - 1) + 0.2"
    )
    print(
        f"{'function':8s} {'attack':13s} {'a':>5s} {'goal':>6s} | "
        + " ".join(f"{n:>7s}" for n in names.values())
    )
    table = {}
    for row in slopes:
        if row["scheme"] in names:
            key = (row["function"], row["attack"], row["exponent"])
            table.setdefault(key, {})[names[row["scheme"]]] = row
    met = dict.fromkeys(names.values(), 0)
    for (function, attack, a), cells in sorted(table.items()):
        goal = adversarial.theory_slope(a) + 0.2
        text = []
        for name in names.values():
            row = cells.get(name)
            if row is None:
                text.append(f"{'-':>7s}")
                continue
            met[name] += row["slope"] <= goal
            text.append(f"{row['slope']:6.2f}{'*' if row['slope'] <= goal else ' '}")
        print(f"{function:8s} {attack:13s} {a:5.2f} {goal:6.2f} | " + " ".join(text))
    print(
        "settings meeting the goal (*): " + ", ".join(f"{n} {met[n]} of {len(table)}" for n in names.values())
    )


if __name__ == "__main__":
    main()
