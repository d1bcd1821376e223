"""Small real and synthetic data sets used by the examples, benchmarks and tests.

Every loader takes keyword-only options, validates them, is deterministic (synthetic data from ``rng``), and
returns a frozen dataclass with float64 features, names, and a ``description`` giving source, licence and
citation:

- `load_two_moons` -> `SplitDataset` (synthetic, fresh train and test samples)
- `load_iris`, `load_breast_cancer`, `load_digits` -> `Dataset`
  (scikit-learn's bundled files)
- `load_sachs` -> `GraphDataset` (flow cytometry with the consensus protein-signalling graph)
- `load_lalonde` -> `TreatmentDataset` (NSW job-training experiment, optional CPS-1 controls)
- `load_fashion_mnist` -> `SplitDataset` (read from the files of the Debian package
  `dataset-fashion-mnist`; never downloaded), with the IDX reader `read_idx`

The Sachs and LaLonde files live in ``certkit/datasets/data/`` (see ``PROVENANCE.md`` there).
"""

from certkit.datasets._base import Dataset, GraphDataset, SplitDataset, TreatmentDataset
from certkit.datasets._images import FASHION_MNIST_PATH, load_fashion_mnist, read_idx
from certkit.datasets._loaders import (
    load_breast_cancer,
    load_digits,
    load_iris,
    load_lalonde,
    load_sachs,
    load_two_moons,
)

__all__ = [
    "FASHION_MNIST_PATH",
    "Dataset",
    "GraphDataset",
    "SplitDataset",
    "TreatmentDataset",
    "load_breast_cancer",
    "load_digits",
    "load_fashion_mnist",
    "load_iris",
    "load_lalonde",
    "load_sachs",
    "load_two_moons",
    "read_idx",
]
