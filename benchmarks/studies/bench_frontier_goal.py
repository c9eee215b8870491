"""The issue's goal cells of the frontier experiment: rare heavy stragglers (p = 0.02 and 0.05,
10x) at 1.5x resources, LeNet-5 on MNIST test images, K = 20 and 50, GCC's decoder the natural
spline (the experiment's default) and the codes' default (gap-aware blend); ParM with the learned
parity model (k = 2).

For each (K, decoder) it prints, per regime, every systematic code's p99.9, overall accuracy
and degraded-mode accuracy at tau = 1.1, with 95% bootstrap intervals over groups, and the goal
check of :func:`codedcomputing.experiments.frontier.frontier_table`: the best code within 1
point of the model's accuracy against replication and level-matched hedging (paired ratios),
its tau chosen on the even-numbered groups and its figures those of the odd-numbered ones.
The same seed gives the same queries and delays for both decoders at one K (paired), and for
every ``--decode-cost`` (the coded schemes' decode time in base service times, default 0).

    OMP_NUM_THREADS=1 python benchmarks/studies/bench_frontier_goal.py [--groups 400] [--task vit]
        [--sizes 20 50] [--decode-cost 0 1]
"""

from __future__ import annotations

import argparse
import time

from codedcomputing.experiments import frontier

REGIMES = ("bimodal-p0.02-x10", "bimodal-p0.05-x10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=400)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", default="lenet5", choices=("lenet5", "vit"))
    parser.add_argument("--decoders", nargs="+", default=["spline", "auto"])
    parser.add_argument("--decode-cost", type=float, nargs="+", default=[0.0])
    args = parser.parse_args()
    settings = [(k, d, c) for k in args.sizes for d in args.decoders for c in args.decode_cost]
    for k, decoding, cost in settings:
        config = frontier.Config(
            task=args.task,
            num_inputs=k,
            levels=(1.5,),
            regimes=REGIMES,
            groups=args.groups,
            taus=(1.1, 1.2),
            wait_fractions=(1.0,),
            parity_k=(2,),
            gcc_decoding=decoding,
            decode_cost=cost,
        )
        start = time.perf_counter()
        rows = frontier.run(config, args.seed, progress=True)  # plain lines on stderr off a terminal
        seconds = time.perf_counter() - start
        print(
            f"\n{args.task}, K = {k}, N = {round(1.5 * k)}, GCC decoder {decoding}, decode cost {cost:g}: "
            f"{rows[0]['queries']} queries per scheme, model accuracy {rows[0]['model_acc']:.4f} "
            f"({seconds:.0f} s)",
            flush=True,
        )
        for row in rows:
            exact = row["scheme"] in ("replication", "hedge")
            if exact or (row["scheme"] in (*frontier.SYSTEMATIC, "parm-k2") and row["knob_value"] == 1.1):
                degraded = row["degraded_acc"]
                print(
                    f"  {row['regime']:18s} {row['scheme']:16s} p99.9 {row['p999']:6.3f} "
                    f"[{row['p999_low']:.3f}, {row['p999_high']:.3f}]  accuracy {row['accuracy']:.4f} "
                    f"[{row['accuracy_low']:.4f}, {row['accuracy_high']:.4f}]  degraded "
                    f"{'-' if degraded == '' else f'{degraded:.3f}'} of {row['degraded_share']:.3f}  "
                    f"extra load {row['extra_load']:.3f}",
                    flush=True,
                )
        for entry in frontier.frontier_table(rows):
            ratio, low, high = entry["vs_replication"]
            hedge, hedge_low, hedge_high = entry["vs_hedge"]
            print(
                f"  goal {entry['regime']}: best within 1 point: {entry['scheme']} "
                f"{entry['knob']} = {entry['knob_value']} ({entry['verdict']}): "
                f"p99.9 {entry['p999']:.3g}, "
                f"/ replication {ratio:.3g} [{low:.3g}, {high:.3g}], / hedge {hedge:.3g} "
                f"[{hedge_low:.3g}, {hedge_high:.3g}]",
                flush=True,
            )


if __name__ == "__main__":
    main()
