"""The master's work on a GPU: encode and decode against a device-to-device copy, and a coded
model call against the plain one.

1. Codes. For N = 1e3, 1e4, 1e5, 1e6 workers, K = N / 10 inputs of ``--width`` float32
   columns on the device, 20% random stragglers (one alive set, so the decoder and its map
   are cached as a server's would be): per code the encode, the first decode (a new alive
   set: the decoder builds its map on the host and copies it to the device, or, where that is
   predicted dearer, solves on the host) and the warm decode (the decoder's map built and on
   the device: no host round trip), each against a device-to-device copy of
   the same bytes (the encode's output, ``N x width``; the decode's input,
   ``|alive| x width``); and the warm decode of the same results in arrival order (the
   decode puts them in worker order on the device: an index crosses to it). Codes: GCC
   with the natural-spline decoder (``decoding="spline"``), GCC's default (gap-aware)
   decoder, which fits its blend weights on the host (a round trip of the results,
   ``spline/gaps.py``), up to N = 1e5, and BACC (dense maps, or fast sums from K N = 2^14
   on; 7.7 s an encode at N = 1e6 on one CPU core), up to N = 1e5.
2. Models. LeNet-5 and the ViT (``codedcomputing.models``) on the device: the plain call
   ``model(X)`` on K images against the coded call ``decode(model(encode(X))[alive],
   alive)``, GCC spline decoder, (K, N) = (10, 50) and (100, 500), 20% stragglers; the
   coded call split into encode, the model on the N coded images, and decode. The cached
   weights are used when present; otherwise random weights (the time does not depend on
   them; nothing is trained here).

Times are medians of ``--repeats`` interleaved repeats (the schemes of one size timed in
turn within each repeat, so they share the machine's noise); on CUDA each timing is
bracketed by ``torch.cuda.synchronize()``. Without CUDA it says so and exits (status 2),
unless ``--device cpu`` asks for a smoke run on the CPU.

Run: ``python benchmarks/perf/bench_gpu.py [--quick] [--device cuda|cpu] [--repeats 30]``
(``--quick``: N up to 1e5, fewer repeats, LeNet-5 only at (10, 50); under 2 minutes on a GPU).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

import codedcomputing as cc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import median_seconds

STRAGGLE = 0.2


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device) -> float:
    """Seconds of one call of ``fn``, the device's queue drained before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def median_times(named: dict, repeats: int, device: torch.device) -> dict[str, float]:
    """Median seconds of each of ``named``'s calls (no arguments), timed in turn ``repeats``
    times (:func:`common.interleaved`), the device's queue drained before and after each."""

    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    return median_seconds({name: (lambda _, fn=fn: fn()) for name, fn in named.items()}, repeats, clock=clock)


# name -> (largest N measured, constructor from (K, N))
CODES = {
    "gcc-spline": (10**6, lambda k, n: cc.GCC(k, n, decoding="spline")),
    "gcc-default": (10**5, lambda k, n: cc.GCC(k, n)),
    "bacc": (10**5, lambda k, n: cc.BACC(k, n)),
}


def bench_codes(sizes, width: int, repeats: int, device: torch.device) -> None:
    print(
        f"\n1. Codes: K = N / 10, width {width}, float32 on {device}, {STRAGGLE:.0%} random "
        f"stragglers (one alive set: the decoder cached), medians of {repeats} interleaved repeats"
    )
    print(
        f"{'code':<12} {'N':>8} {'K':>7} {'build s':>8} {'encode ms':>10} {'copy ms':>8} {'x copy':>7} "
        f"{'1st dec ms':>11} {'decode ms':>10} {'copy ms':>8} {'x copy':>7} {'arrival ms':>11}"
    )
    generator = torch.Generator(device=device).manual_seed(0)
    for num_workers in sizes:
        num_inputs = num_workers // 10
        rng = np.random.default_rng(num_workers)
        alive = cc.stragglers.random(num_workers, int(STRAGGLE * num_workers), rng)
        X = torch.randn(num_inputs, width, generator=generator, device=device, dtype=torch.float32)
        encode_copy = torch.empty(num_workers, width, device=device, dtype=torch.float32)
        decode_copy = torch.empty(alive.size, width, device=device, dtype=torch.float32)
        for name, (largest, build_code) in CODES.items():
            if num_workers > largest:
                continue
            build = time.perf_counter()
            code = build_code(num_inputs, num_workers)  # the host builds the encoder's map
            build = time.perf_counter() - build
            first, ms = time_code(code, X, alive, (encode_copy, decode_copy), repeats)
            print(
                f"{name:<12} {num_workers:>8} {num_inputs:>7} {build:>8.2f} {ms['encode']:>10.3f} "
                f"{ms['encode copy']:>8.3f} {ms['encode'] / ms['encode copy']:>7.1f} {1e3 * first:>11.2f} "
                f"{ms['decode']:>10.3f} {ms['decode copy']:>8.3f} {ms['decode'] / ms['decode copy']:>7.1f} "
                f"{ms['arrival']:>11.3f}",
                flush=True,
            )
        del X, encode_copy, decode_copy
        if device.type == "cuda":
            torch.cuda.empty_cache()


def cache_map(code, alive: np.ndarray) -> None:
    """Build the spline decoder's map for ``alive`` now, as a decoder reused often enough
    ends up doing (its ski-rental rule), so that warm decodes apply it on the device."""
    decoder = code.decoder(alive) if isinstance(code, cc.GCC) else None
    if isinstance(decoder, cc.spline.SplineDecoder):
        decoder.smoothing_map  # noqa: B018 (built and cached)


def time_code(code, X, alive: np.ndarray, copies, repeats: int) -> tuple[float, dict[str, float]]:
    """``(first decode s, {call: median ms})`` of ``code``'s encode and decode of ``tanh``
    results, and of copies of the same bytes into ``copies`` (two tensors on the device)."""
    device = X.device
    coded = code.encode(X)  # the encoder's map copied to the device
    Y = torch.tanh(coded)[torch.as_tensor(alive, device=device)]
    first = timed(lambda: code.decode(Y, alive), device)
    cache_map(code, alive)
    arrival = np.random.default_rng(alive.size).permutation(alive.size)  # results as they arrive
    Y_arrival, alive_arrival = Y[torch.as_tensor(arrival, device=device)], alive[arrival]
    encode_copy, decode_copy = copies
    medians = median_times(
        {
            "encode": lambda: code.encode(X),
            "encode copy": lambda: encode_copy.copy_(coded),
            "decode": lambda: code.decode(Y, alive),
            "decode copy": lambda: decode_copy.copy_(Y),
            "arrival": lambda: code.decode(Y_arrival, alive_arrival),
        },
        repeats,
        device,
    )
    return first, {key: 1e3 * value for key, value in medians.items()}


def time_model(model, code, X, alive: np.ndarray, repeats: int) -> dict[str, float]:
    """``{call: median ms}``: the plain call ``model(X)``, the coded call and its parts."""
    device = X.device
    alive_index = torch.as_tensor(alive, device=device)
    with torch.inference_mode():
        coded = code.encode(X)
        logits = model(coded)[alive_index]
        cache_map(code, alive)
        code.decode(logits, alive)  # the map copied to the device once
        medians = median_times(
            {
                "plain": lambda: model(X),
                "coded": lambda: code.decode(model(code.encode(X))[alive_index], alive),
                "encode": lambda: code.encode(X),
                "model(N)": lambda: model(coded),
                "decode": lambda: code.decode(logits, alive),
            },
            repeats,
            device,
        )
    return {key: 1e3 * value for key, value in medians.items()}


def load_model(name: str, device: torch.device):
    """``(model, weights)``: the cached trained model, else one with random weights."""
    if cc.models.is_cached(name):
        model, weights = cc.models.load(name, progress=False), "trained"
    else:
        builder, _ = cc.models.MODELS[name]
        torch.manual_seed(0)
        model, weights = builder(28), "random"
    return model.to(device).eval(), weights


def bench_models(names, settings, repeats: int, device: torch.device) -> None:
    print(
        f"\n2. Models on {device}: plain model(X) on K images against the coded call "
        f"(GCC spline decoder, {STRAGGLE:.0%} random stragglers), medians of {repeats} interleaved repeats"
    )
    print(
        f"{'model':<7} {'weights':<8} {'K':>4} {'N':>5} {'plain ms':>9} {'coded ms':>9} {'x plain':>8} "
        f"{'encode ms':>10} {'model(N) ms':>12} {'decode ms':>10}"
    )
    generator = torch.Generator(device=device).manual_seed(1)
    for name in names:
        model, weights = load_model(name, device)
        for num_inputs, num_workers in settings:
            code = cc.GCC(num_inputs, num_workers, decoding="spline")
            alive = cc.stragglers.random(num_workers, int(STRAGGLE * num_workers), np.random.default_rng(2))
            X = torch.rand(num_inputs, 1, 28, 28, generator=generator, device=device)
            ms = time_model(model, code, X, alive, repeats)
            print(
                f"{name:<7} {weights:<8} {num_inputs:>4} {num_workers:>5} {ms['plain']:>9.3f} "
                f"{ms['coded']:>9.3f} {ms['coded'] / ms['plain']:>8.2f} {ms['encode']:>10.3f} "
                f"{ms['model(N)']:>12.3f} {ms['decode']:>10.3f}",
                flush=True,
            )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:1, ... or cpu (a smoke run)")
    parser.add_argument("--quick", action="store_true", help="N up to 1e5, fewer repeats, LeNet-5 only")
    parser.add_argument(
        "--repeats", type=int, default=None, help="interleaved repeats (default 30; quick 10)"
    )
    parser.add_argument("--width", type=int, default=16, help="columns per input (default 16)")
    parser.add_argument(
        "--sizes",
        type=float,
        nargs="+",
        default=None,
        help="N values (default 1e3 1e4 1e5 1e6; quick to 1e5)",
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu: no CUDA device here (torch.cuda.is_available() is False); nothing was measured.")
        print("Run it where a GPU is present, or use --device cpu for a smoke run.")
        return 2
    if device.type not in ("cuda", "cpu"):
        parser.error(f"--device must be cuda[:i] or cpu, got {args.device!r}")
    repeats = args.repeats or (10 if args.quick else 30)
    sizes = args.sizes or ([1e3, 1e4, 1e5] if args.quick else [1e3, 1e4, 1e5, 1e6])
    sizes = [int(size) for size in sizes]
    if any(size < 20 for size in sizes):
        parser.error("--sizes must be at least 20 (K = N / 10 needs 2 inputs)")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"bench_gpu on {name}: torch {torch.__version__}, codedcomputing {cc.__version__}")
    start = time.perf_counter()
    bench_codes(sizes, args.width, repeats, device)
    names = ["lenet5"] if args.quick else ["lenet5", "vit"]
    settings = [(10, 50)] if args.quick else [(10, 50), (100, 500)]
    bench_models(names, settings, repeats, device)
    print(f"\n{time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
