"""Learned parity models (ParM), the learned baseline of coded inference: training time and
degraded-mode accuracy on the MNIST test split, for groups of k = 2 and 4.

Each parity model is loaded from the cache or trained with its model's default recipe
(``parity.RECIPES``; ``--encoders`` replaces its encoder) by
``codedcomputing.models.parity.load_parity``; the training seconds are the ones measured
when it was trained, as stored in its sidecar. The 1,000 test images are cut into
random groups of k (one draw per k, the same for every model and encoder), and every query of
every group is decoded as if it alone were missing: F_P(P) - the sum of the other k - 1
outputs. Figures are means over all (group, missing query) pairs with 95% bootstrap
intervals over groups; the encoders are compared in pairs (the same resampled groups).

    python benchmarks/studies/bench_parity.py                        # LeNet-5, k = 2 and 4, its recipe
    python benchmarks/studies/bench_parity.py --encoders addition concatenation
    python benchmarks/studies/bench_parity.py --models lenet5 vit    # trains the ViT's parity models too
    python benchmarks/studies/bench_parity.py --epochs 2             # a quick look (another cache entry)

Columns: "relative" is the decoded argmax against the deployed model's own argmax (the
main figure: how often a missing query gets the answer it would have had), "accuracy"
against the labels, "deployed" the deployed model's accuracy on the same queries, "R^2" and
"top in group" the parity output alone (1 - its MSE against the summed logits over their
variance; whether its argmax is one of the group's answers).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from codedcomputing import datasets, models
from codedcomputing.models import parity

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import say


def bootstrap_mean(per_group: np.ndarray, resamples: np.ndarray) -> tuple[float, float, float]:
    """The mean of ``per_group`` (one value per group) and its 95% bootstrap interval over
    the rows of ``resamples`` (resampled group indices)."""
    means = per_group[resamples].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(per_group.mean()), float(low), float(high)


def cell(stat: tuple[float, float, float], scale: float = 100.0) -> str:
    mean, low, high = stat
    return f"{mean * scale:6.2f} [{low * scale:6.2f}, {high * scale:6.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["lenet5"], choices=sorted(models.MODELS))
    parser.add_argument("--ks", nargs="+", type=int, default=[2, 4])
    parser.add_argument(
        "--encoders", nargs="+", choices=parity.ENCODERS, help="default: the model's recipe's encoder"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the test groups and the bootstrap")
    parser.add_argument("--draws", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--retrain", action="store_true", help="train the parity models again")
    parser.add_argument("--epochs", type=int, help="train for this many epochs (default: the recipe's)")
    args = parser.parse_args()

    data = datasets.load("mnist")
    say(
        f"MNIST test split: {len(data.test_x)} images; "
        f"95% bootstrap intervals over groups ({args.draws} draws)"
    )
    for name in args.models:
        deployed = models.load(name)
        say(f"\n{name}: deployed model's test accuracy {deployed.test_accuracy:.2%}")
        for k in args.ks:
            results = {}
            for encoder in args.encoders or [parity.RECIPES[name].encoder]:
                recipe = dataclasses.replace(parity.RECIPES[name], encoder=encoder)
                if args.epochs is not None:
                    recipe = dataclasses.replace(recipe, epochs=args.epochs)
                started = time.perf_counter()
                net = parity.load_parity(name, k, recipe, retrain=args.retrain)
                loaded = time.perf_counter() - started
                results[encoder] = parity.evaluate_parity(
                    deployed, net, data.test_x, data.test_y, k, encoder=encoder, rng=args.seed
                )
                say(
                    f"  k = {k}, {encoder}: training {net.training_seconds:.0f} s "
                    f"({recipe.epochs} epochs x {recipe.groups_per_epoch} groups; this run's load "
                    f"{loaded:.1f} s), extra work 1/{k} = {1 / k:.0%}"
                )
            groups = len(next(iter(results.values())).groups)
            resamples = np.random.default_rng([args.seed, k]).integers(0, groups, (args.draws, groups))
            say(f"  k = {k}: {groups} groups x {k} missing queries each; figures in %")
            columns = f"{'relative':24} {'accuracy':24} {'deployed':24} {'R^2':>6} {'top in group':24}"
            say(f"    {'encoder':14} {columns}")
            for encoder, result in results.items():
                say(
                    f"    {encoder:14} "
                    f"{cell(bootstrap_mean(result.base_agrees.mean(1), resamples))} "
                    f"{cell(bootstrap_mean(result.label_correct.mean(1), resamples))} "
                    f"{cell(bootstrap_mean(result.base_correct.mean(1), resamples))} "
                    f"{result.parity_r2:6.3f} "
                    f"{cell(bootstrap_mean(result.parity_top_in_group.astype(float), resamples))}"
                )
            if len(results) == 2:
                (first, one), (second, two) = results.items()
                assert np.array_equal(one.groups, two.groups)  # paired: the same groups
                difference = one.base_agrees.mean(1) - two.base_agrees.mean(1)
                say(f"    relative, {first} - {second}: {cell(bootstrap_mean(difference, resamples))} points")


if __name__ == "__main__":
    main()
