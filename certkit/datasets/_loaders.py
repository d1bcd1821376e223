"""Loaders for the bundled data sets (scikit-learn's files and certkit's own ``data/`` folder)."""

from __future__ import annotations

import numpy as np

from certkit._typing import RNGLike
from certkit._validation import check_bool, check_in_options, check_integer, check_nonnegative, check_rng
from certkit.datasets._base import Dataset, GraphDataset, SplitDataset, TreatmentDataset, read_table

__all__ = [
    "load_breast_cancer",
    "load_digits",
    "load_iris",
    "load_lalonde",
    "load_sachs",
    "load_two_moons",
]

_SKLEARN_NOTE = (
    "Read from the copy bundled with scikit-learn. Licence: the data originate from the UCI Machine Learning "
    "Repository (CC BY 4.0); scikit-learn, which redistributes them, is BSD-3-Clause."
)


def load_two_moons(
    *, n_train: int = 100, n_test: int = 200, noise: float = 0.1, rng: RNGLike = None
) -> SplitDataset:
    """Two interleaving half circles in 2-D, with an independent test sample.

    Parameters
    ----------
    n_train, n_test : int
        Sizes of the training and test samples (each >= 2; class 0 gets ``n // 2`` points, class 1 the rest).
    noise : float
        Standard deviation of the Gaussian noise added to the points (>= 0; 0 gives points on the curves).
    rng : None, int or numpy.random.Generator
        Two integer seeds for ``sklearn.datasets.make_moons`` (training, test) are drawn from
        ``check_rng(rng)``; an int gives the same data on every call.

    Returns
    -------
    SplitDataset
        ``X_train`` (n_train, 2), ``X_test`` (n_test, 2) float64; labels in {0, 1}
        (class 0 = upper moon "outer", class 1 = lower moon "inner");
        ``y_train_signed`` / ``y_test_signed`` give the labels as ±1.
    """
    from sklearn.datasets import make_moons

    n_train = check_integer(n_train, "n_train", minimum=2)
    n_test = check_integer(n_test, "n_test", minimum=2)
    noise = check_nonnegative(noise, "noise")
    gen = check_rng(rng)
    seed_train, seed_test = (int(s) for s in gen.integers(0, 2**31 - 1, size=2))
    X_train, y_train = make_moons(n_samples=n_train, noise=noise, shuffle=True, random_state=seed_train)
    X_test, y_test = make_moons(n_samples=n_test, noise=noise, shuffle=True, random_state=seed_test)
    description = (
        f"Two moons: synthetic 2-D binary classification data from sklearn.datasets.make_moons "
        f"(n_train={n_train}, n_test={n_test}, noise={noise}); training and test samples are drawn "
        "independently with seeds derived from rng. Generated data, no licence restrictions."
    )
    return SplitDataset(
        name="two_moons",
        X_train=np.ascontiguousarray(X_train, dtype=np.float64),
        y_train=y_train.astype(np.int64),
        X_test=np.ascontiguousarray(X_test, dtype=np.float64),
        y_test=y_test.astype(np.int64),
        feature_names=("x1", "x2"),
        target_names=("outer", "inner"),
        description=description,
    )


def load_iris(*, binary: bool = False) -> Dataset:
    """Fisher's iris data: 150 flowers, 4 measurements in cm, 3 species (50 each).

    Parameters
    ----------
    binary : bool
        If True, keep only the two species that are *not* linearly separable, versicolor (label 0) and
        virginica (label 1): 100 samples. Setosa is dropped.

    Returns
    -------
    Dataset
        ``X`` float64 (150, 4) or (100, 4); ``y`` in {0, 1, 2} (setosa, versicolor, virginica) or {0, 1}.
    """
    from sklearn import datasets

    binary = check_bool(binary, "binary")
    bunch = datasets.load_iris()
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    target_names = tuple(str(t) for t in bunch.target_names)
    if binary:
        keep = y > 0
        X, y, target_names = X[keep], y[keep] - 1, target_names[1:]
    description = (
        "Iris (R. A. Fisher, 'The use of multiple measurements in taxonomic problems', Annals of "
        "Eugenics 7(2), 1936; measurements by E. Anderson). " + _SKLEARN_NOTE
        + (" Binary version: versicolor (0) vs virginica (1)." if binary else "")
    )
    return Dataset(
        name="iris_binary" if binary else "iris",
        X=np.ascontiguousarray(X),
        y=y,
        feature_names=tuple(str(f) for f in bunch.feature_names),
        target_names=target_names,
        description=description,
    )


def load_breast_cancer() -> Dataset:
    """Breast Cancer Wisconsin (Diagnostic): 569 tumours, 30 real features of cell nuclei.

    Returns
    -------
    Dataset
        ``X`` float64 (569, 30) (unscaled; features span very different ranges); ``y`` 0 = malignant (212),
        1 = benign (357), as in scikit-learn.
    """
    from sklearn import datasets

    bunch = datasets.load_breast_cancer()
    description = (
        "Breast Cancer Wisconsin (Diagnostic) (W. N. Street, W. H. Wolberg, O. L. Mangasarian, "
        "'Nuclear feature extraction for breast tumor diagnosis', IS&T/SPIE 1993). " + _SKLEARN_NOTE
    )
    return Dataset(
        name="breast_cancer",
        X=np.ascontiguousarray(bunch.data, dtype=np.float64),
        y=np.asarray(bunch.target, dtype=np.int64),
        feature_names=tuple(str(f) for f in bunch.feature_names),
        target_names=tuple(str(t) for t in bunch.target_names),
        description=description,
    )


def load_digits(*, scaled: bool = True) -> Dataset:
    """Handwritten digits: 1797 images of 8x8 pixels, 10 classes.

    Parameters
    ----------
    scaled : bool
        If True (default) pixel values are divided by 16 and lie in [0, 1]; if False they are the original
        integer grey levels 0–16 (as float64).

    Returns
    -------
    Dataset
        ``X`` float64 (1797, 64), row-major pixels (``X[i].reshape(8, 8)`` is the image); ``y`` the digit 0–9.
    """
    from sklearn import datasets

    scaled = check_bool(scaled, "scaled")
    bunch = datasets.load_digits()
    X = np.asarray(bunch.data, dtype=np.float64)
    if scaled:
        X = X / 16.0
    description = (
        "Optical recognition of handwritten digits (E. Alpaydin, C. Kaynak, UCI 1998; "
        "test part, 1797 images). "
        + _SKLEARN_NOTE
        + (" Pixels divided by 16 (range [0, 1]); load_digits(scaled=False) gives the original 0-16 levels."
           if scaled else " Original grey levels 0-16.")
    )
    return Dataset(
        name="digits",
        X=np.ascontiguousarray(X),
        y=np.asarray(bunch.target, dtype=np.int64),
        feature_names=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
        target_names=tuple(str(d) for d in range(10)),
        description=description,
    )


# The nine condition files of Sachs et al. (2005), in the order cdt concatenated them, with row counts.
_SACHS_CONDITIONS = (
    ("cd3cd28", 853),
    ("cd3cd28icam2", 902),
    ("cd3cd28+aktinhib", 911),
    ("cd3cd28+g0076", 723),
    ("cd3cd28+psitect", 810),
    ("cd3cd28+u0126", 799),
    ("cd3cd28+ly", 848),
    ("pma", 913),
    ("b2camp", 707),
)


def load_sachs() -> GraphDataset:
    """Sachs et al. (2005) protein-signalling flow-cytometry data with the consensus graph shipped by cdt.

    Returns
    -------
    GraphDataset
        ``X`` float64 (7466, 11): raw (positive, heavily skewed) abundances of 11 phosphorylated proteins and
        phospholipids in single cells, all nine experimental conditions pooled (``np.log(X)`` is the usual
        transform); ``adjacency`` int64 (11, 11) with 18 edges, ``adjacency[i, j] = 1`` for ``i -> j``;
        ``experiment`` the condition index of each row (see ``experiment_names``).

    Notes
    -----
    The graph is the "consensus" network exactly as in the Causal Discovery Toolbox (cdt 0.6.0,
    ``cyto_full_target.csv``). It is not acyclic: it contains the cycle PIP3 -> plcg -> PIP2 -> PIP3.
    The experiment labels are reconstructed from the per-condition cell counts (see ``graph_description``
    and ``certkit/datasets/data/PROVENANCE.md``).
    """
    header, rows = read_table("sachs_cyto_full_data.csv.gz")
    X = np.array(rows, dtype=np.float64)
    _, edge_rows = read_table("sachs_cyto_full_target.csv")
    index = {name: i for i, name in enumerate(header)}
    adjacency = np.zeros((len(header), len(header)), dtype=np.int64)
    for cause, effect in edge_rows:
        adjacency[index[cause], index[effect]] = 1
    counts = [n for _, n in _SACHS_CONDITIONS]
    experiment = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    description = (
        "Sachs et al. flow cytometry: K. Sachs, O. Perez, D. Pe'er, D. A. Lauffenburger, G. P. Nolan, "
        "'Causal protein-signaling networks derived from multiparameter single-cell data', Science "
        "308(5721):523-529, 2005. 7466 cells x 11 variables (all nine conditions). Files taken unchanged "
        "from the Causal Discovery Toolbox wheel cdt 0.6.0 (cdt/data/resources/cyto_full_data.csv and "
        "cyto_full_target.csv; the wheel's LICENSE.md is MIT, its METADATA says Apache 2.0); no separate "
        "licence is attached to the measurements."
    )
    graph_description = (
        "Ground truth: the 18-edge 'consensus' network as shipped by cdt 0.6.0 (cyto_full_target.csv), "
        "unchanged. It contains one directed cycle, PIP3 -> plcg -> PIP2 -> PIP3 (the textbook consensus "
        "orients these plcg -> PIP2, plcg -> PIP3, PIP3 -> PIP2), so it is not a DAG. Experiment labels: the "
        "rows are the nine Sachs condition files concatenated in file order with counts "
        + ", ".join(f"{name} {n}" for name, n in _SACHS_CONDITIONS)
        + "; reconstructed from these counts and checked against the first rows of an independent copy."
    )
    return GraphDataset(
        name="sachs",
        X=X,
        feature_names=header,
        adjacency=adjacency,
        edges=tuple((cause, effect) for cause, effect in edge_rows),
        experiment=experiment,
        experiment_names=tuple(name for name, _ in _SACHS_CONDITIONS),
        description=description,
        graph_description=graph_description,
    )


_LALONDE_COVARIATES = ("age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75")


def load_lalonde(*, controls: str = "experimental") -> TreatmentDataset:
    """LaLonde's National Supported Work (NSW) job-training data, Dehejia–Wahba sample.

    Parameters
    ----------
    controls : {"experimental", "cps"}
        ``"experimental"`` (default): the randomised NSW sample, 185 treated and 260 experimental controls
        (445 rows). ``"cps"``: the same 185 treated with the 15,992 non-experimental CPS-1 comparison
        individuals as controls (16,177 rows), the classic observational benchmark.

    Returns
    -------
    TreatmentDataset
        ``X`` float64 (n, 8) with columns age (years), educ (years of schooling), black, hisp, marr (married),
        nodegree (no high-school degree) as 0/1 indicators, re74 and re75 (real earnings in 1974 and 1975,
        US dollars); ``treatment`` 1 = assigned to the NSW programme; ``outcome`` re78 (real earnings 1978).
    """
    controls = check_in_options(controls, "controls", ("experimental", "cps"))
    header, rows = read_table("lalonde_nsw_dw.csv")
    table = np.array(rows, dtype=np.float64)
    if controls == "cps":
        cps_header, cps_rows = read_table("lalonde_cps1_controls.csv.gz")
        if cps_header != header:  # pragma: no cover - guards the embedded files
            raise RuntimeError(f"embedded CPS-1 file has columns {cps_header}, expected {header}")
        treated = table[table[:, header.index("treat")] == 1]
        table = np.concatenate([treated, np.array(cps_rows, dtype=np.float64)])
    columns = [header.index(c) for c in _LALONDE_COVARIATES]
    description = (
        "LaLonde NSW job-training data, Dehejia-Wahba sample (R. LaLonde, 'Evaluating the Econometric "
        "Evaluations of Training Programs with Experimental Data', AER 76(4):604-620, 1986; R. Dehejia, "
        "S. Wahba, 'Causal Effects in Nonexperimental Studies', JASA 94(448):1053-1062, 1999). "
        + ("Randomised NSW experiment: 185 treated, 260 controls. " if controls == "experimental" else
           "NSW treated (185) with CPS-1 non-experimental controls (15,992). ")
        + "Columns: treatment = treat; outcome = re78 (real earnings 1978, USD); covariates age, educ, "
        "black, hisp, marr, nodegree, re74, re75. Taken from the causaldata 0.1.5 package (MIT licence; "
        "files nsw_mixtape.dta / cps_mixtape.dta of 'Causal Inference: The Mixtape', S. Cunningham); no "
        "separate licence is attached to the data."
    )
    return TreatmentDataset(
        name="lalonde" if controls == "experimental" else "lalonde_cps",
        X=np.ascontiguousarray(table[:, columns]),
        treatment=table[:, header.index("treat")].astype(np.int64),
        outcome=np.ascontiguousarray(table[:, header.index("re78")]),
        feature_names=_LALONDE_COVARIATES,
        outcome_name="re78",
        description=description,
    )
