"""How much the assignment of inputs to the points alpha_k matters, on real data.

GCC and BACC put input k at alpha_k; for an unordered batch the curve through the inputs jumps
between unrelated images. This script compares three orders of the same batch: as drawn
(random), sorted by the first principal component, and a greedy nearest-neighbour chain
(start at the input farthest from the mean, then always go to the nearest unvisited one).
f is LeNet-5 (cached, or trained on first use) on MNIST test images; the MSE is against f(x)
in the original order. Prints the median MSE over trials and the ratio to the random order.

Run: ``python benchmarks/studies/bench_ordering.py [--trials 100]``.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import codedcomputing as cc


def pca_order(x: np.ndarray) -> np.ndarray:
    centred = x - x.mean(axis=0)
    direction = np.linalg.svd(centred, full_matrices=False)[2][0]
    return np.argsort(centred @ direction)


def nearest_neighbour_chain(x: np.ndarray) -> np.ndarray:
    distance = np.linalg.norm(x[:, None] - x[None], axis=-1)
    current = int(np.argmax(np.linalg.norm(x - x.mean(axis=0), axis=1)))
    order, left = [current], set(range(len(x))) - {current}
    while left:
        current = min(left, key=lambda j: distance[current, j])
        order.append(current)
        left.remove(current)
    return np.array(order)


ORDERS = {
    "random": lambda x: np.arange(len(x)),
    "pca": pca_order,
    "nn-chain": nearest_neighbour_chain,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = cc.models.load("lenet5")
    data = cc.datasets.mnist()

    def f(x):
        with torch.no_grad():
            return model(torch.as_tensor(x, dtype=torch.float32)).numpy()

    settings = [
        (10, 50, 5, "random"),
        (10, 50, 5, "contiguous"),
        (20, 100, 10, "random"),
        (20, 100, 10, "contiguous"),
    ]
    print(f"median MSE over {args.trials} trials; in brackets, the ratio to the random order")
    for k, n, s, pattern in settings:
        rng = np.random.default_rng(args.seed)
        codes = {"gcc": cc.GCC(k, n), "bacc": cc.BACC(k, n)}
        errors = {(c, o): [] for c in codes for o in ORDERS}
        for _ in range(args.trials):
            x = data.test_x[rng.choice(len(data.test_x), size=k, replace=False)]
            truth = f(x)
            alive = getattr(cc.stragglers, pattern)(n, s, rng)
            for order_name, order_of in ORDERS.items():
                order = order_of(x.reshape(k, -1))
                for code_name, code in codes.items():
                    est = np.empty_like(truth)
                    est[order] = code.decode(f(code.encode(x[order]))[alive], alive)
                    errors[(code_name, order_name)].append(cc.metrics.mse(est, truth))
        line = []
        for code_name in codes:
            base = np.median(errors[(code_name, "random")])
            for order_name in ORDERS:
                med = np.median(errors[(code_name, order_name)])
                line.append(f"{code_name}/{order_name} {med:.3g} ({med / base:.2f})")
        print(f"K={k} N={n} S={s} {pattern}: " + ", ".join(line))


if __name__ == "__main__":
    main()
