"""Issue 36: the conformal classifiers follow scikit-learn's label conventions: ``classes_`` after ``fit`` /
``calibrate``, any hashable labels mapped through the model's class order, and sets reached through a
``Pipeline`` that ends with the estimator."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from certkit.conformal import (
    BinCPClassifier,
    RCP1Classifier,
    RSCPPlusClassifier,
    SplitConformalClassifier,
    coverage,
    evaluate_sets,
)

CLASSIFIERS = [
    lambda model: RCP1Classifier(model, sigma=0.25, radius=0.05, rng=3),
    lambda model: SplitConformalClassifier(model, rng=3),
    lambda model: SplitConformalClassifier(model, conformity_score="aps", noise="uniform", sigma=0.2, rng=3),
    lambda model: BinCPClassifier(model, sigma=0.25, radius=0.05, n_samples=8, rng=3),
    lambda model: RSCPPlusClassifier(model, sigma=0.25, radius=0.05, n_samples=8, rng=3),
]
NAMES = np.array(["cat", "dog", "eel"])


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int) + (X[:, 1] > 0.8)
    return X, y


class Relabelled:
    """The same probabilities as ``model``, with the class of every column in ``classes_``."""

    def __init__(self, model, classes):
        self.model, self.classes_ = model, np.asarray(classes)

    def __call__(self, X):
        return self.model(X)


@pytest.fixture(scope="module")
def fitted():
    X, y = _data(seed=1)
    return LogisticRegression(max_iter=1000).fit(X, y)


@pytest.mark.parametrize("make", CLASSIFIERS)
def test_string_labels_give_the_sets_of_the_integer_coded_labels(make, fitted):
    X, y = _data()
    coded = make(fitted.predict_proba).fit(X, y)
    assert coded.classes_.tolist() == [0, 1, 2] and coded.n_classes_ == 3
    # through the model's classes_: a string-label classifier's predict_proba (the same probabilities)
    named = make(Relabelled(fitted.predict_proba, NAMES)).fit(X, NAMES[y])
    # without classes_ on the model: the labels are sorted, as scikit-learn orders classes_
    plain = make(lambda Z: fitted.predict_proba(Z)).calibrate(X, NAMES[y])
    for est in (named, plain):
        assert est.classes_.tolist() == ["cat", "dog", "eel"]
        assert est.threshold_ == coded.threshold_
        np.testing.assert_array_equal(est.calibration_scores_, coded.calibration_scores_)
        np.testing.assert_array_equal(est.predict_set(X[:50]), clone(coded).fit(X, y).predict_set(X[:50]))


def test_labels_follow_the_models_class_order_not_their_sorted_order(fitted):
    X, y = _data()
    coded = SplitConformalClassifier(fitted.predict_proba).fit(X, y)
    order = np.array(["eel", "cat", "dog"])  # column j of the model is order[j], not the sorted labels
    est = SplitConformalClassifier(Relabelled(fitted.predict_proba, order)).fit(X, order[y])
    assert est.classes_.tolist() == ["eel", "cat", "dog"]
    assert est.threshold_ == coded.threshold_
    np.testing.assert_array_equal(est.predict(X), coded.predict(X))
    # {1, 2}: a scikit-learn classifier trained on those labels, its bound predict_proba as the model
    Xb, yb = X, (y > 0).astype(int)
    one_two = LogisticRegression().fit(Xb, yb + 1)
    est = RCP1Classifier(one_two.predict_proba, sigma=0.25, radius=0.05, rng=0).fit(Xb, yb + 1)
    assert est.classes_.tolist() == [1, 2]
    ref = RCP1Classifier(Relabelled(one_two.predict_proba, [0, 1]), sigma=0.25, radius=0.05, rng=0).fit(
        Xb, yb
    )
    assert est.threshold_ == ref.threshold_
    np.testing.assert_array_equal(est.predict_set(Xb), ref.predict_set(Xb))


def test_label_errors_are_clear(fitted):
    X, y = _data()
    with pytest.raises(
        ValueError,
        match=r"y has labels that are not among the model's classes_ "
        r"\['cat', 'dog', 'eel'\]: \['emu'\]",
    ):
        SplitConformalClassifier(Relabelled(fitted.predict_proba, NAMES)).fit(
            X, np.where(y == 2, "emu", NAMES[y])
        )
    with pytest.raises(ValueError, match=r"model's classes_ has 2 classes but the output has 3 columns"):
        SplitConformalClassifier(Relabelled(fitted.predict_proba, ["a", "b"])).fit(X, y)
    two = NAMES[np.minimum(y, 1)]  # "eel" never appears and the model says nothing of its columns
    with pytest.raises(
        ValueError,
        match=r"y has 2 distinct labels but the model returns 3 classes and has "
        r"no classes_ giving their order",
    ):
        SplitConformalClassifier(lambda Z: fitted.predict_proba(Z)).fit(X, two)
    with pytest.raises(TypeError, match=r"y must contain class labels .*non-integer floats"):
        SplitConformalClassifier(lambda Z: fitted.predict_proba(Z)).fit(X, y + 0.5)
    with pytest.raises(ValueError, match=r"not among the model's classes_ \[0, 1, 2\]: \[0.5, 1.5, 2.5\]"):
        SplitConformalClassifier(fitted.predict_proba).fit(X, y + 0.5)
    with pytest.raises(ValueError, match=r"y must contain class labels, got NaN"):
        SplitConformalClassifier(fitted.predict_proba).fit(X, np.where(y == 2, np.nan, y))
    with pytest.raises(ValueError, match=r"y must be 1-D"):
        SplitConformalClassifier(fitted.predict_proba).fit(X, y[:, None])
    with pytest.raises(TypeError, match=r"hashable class labels, got a list"):
        SplitConformalClassifier(fitted.predict_proba).fit(X[:2], np.array([[0], [1, 2]], dtype=object))


def test_classes_that_repeat_a_label_or_are_not_1d_are_refused(fitted):
    """Issue 43 item 6: a classes_ that repeats a label was accepted (its labels were all mapped to the first
    of the repeated columns), and a 2-D classes_ was ignored (the labels were sorted instead)."""
    X, y = _data()
    for make in CLASSIFIERS:
        with pytest.raises(
            ValueError,
            match=r"^the model's classes_ repeats the class 'cat' \(columns 0 and 2\); each output column "
            r"must stand for a different class$",
        ):
            make(Relabelled(fitted.predict_proba, ["cat", "dog", "cat"])).fit(X, NAMES[np.minimum(y, 1)])
        for classes in ([NAMES], NAMES[:, None], []):
            with pytest.raises(ValueError, match=r"^the model's classes_ must be a non-empty 1-D array, the "
                               r"class of every output column, got shape \(\d*,? ?\d*\)"):
                make(Relabelled(fitted.predict_proba, classes)).fit(X, NAMES[y])
    # 1 and 1.0 are one label: a repeat too
    with pytest.raises(ValueError, match=r"repeats the class 1.0 \(columns 1 and 2\)"):
        classes = np.array([0, 1, 1.0], dtype=object)
        SplitConformalClassifier(Relabelled(fitted.predict_proba, classes)).fit(X, y)
    sets = SplitConformalClassifier(fitted.predict_proba).fit(X, y).predict_set(X)
    with pytest.raises(ValueError, match=r"^classes repeats the class 'dog' \(columns 1 and 2\)"):
        coverage(sets, NAMES[np.minimum(y, 1)], classes=["cat", "dog", "dog"])


def test_coverage_of_class_labels_says_how_to_pass_the_classes(fitted):
    """Issue 43 item 6: string labels without classes= said only "y must contain integers"."""
    X, y = _data()
    named = SplitConformalClassifier(Relabelled(fitted.predict_proba, NAMES)).fit(X, NAMES[y])
    sets = named.predict_set(X)
    for labels in (NAMES[y], NAMES[y].astype(object), y == 1):
        with pytest.raises(TypeError, match=r"^y holds class labels \(dtype \S+\), not column indices of "
                           r"sets: pass the class of every column with classes=, e\.g\. coverage\(sets, y, "
                           r"classes=clf\.classes_\)"):
            coverage(sets, labels)
    assert coverage(sets, NAMES[y], classes=named.classes_) == coverage(sets, y)


def test_metrics_take_the_labels_given_to_calibrate(fitted):
    X, y = _data()
    coded = SplitConformalClassifier(fitted.predict_proba).fit(X, y)
    named = SplitConformalClassifier(Relabelled(fitted.predict_proba, NAMES)).fit(X, NAMES[y])
    sets = named.predict_set(X)
    assert coverage(sets, NAMES[y], classes=named.classes_) == coverage(sets, y)
    assert evaluate_sets(named, X, NAMES[y]).coverage == evaluate_sets(coded, X, y).coverage
    with pytest.raises(ValueError, match=r"classes must have one class per column of sets \(3\)"):
        coverage(sets, NAMES[y], classes=NAMES[:2])
    with pytest.raises(ValueError, match=r"y has labels that are not among classes"):
        coverage(sets, np.where(y == 0, "emu", NAMES[y]), classes=named.classes_)


def test_refit_takes_the_new_models_classes(fitted):
    X, y = _data()
    est = SplitConformalClassifier(fitted.predict_proba).fit(X, y)
    est.set_params(
        model=Relabelled(
            lambda Z: (
                fitted.predict_proba(Z)[:, :2] / fitted.predict_proba(Z)[:, :2].sum(axis=1, keepdims=True)
            ),
            ["no", "yes"],
        )
    )
    est.fit(X, np.where(y > 0, "yes", "no"))
    assert est.classes_.tolist() == ["no", "yes"] and est.n_classes_ == 2
    assert est.predict_set(X).shape == (300, 2)


@pytest.mark.parametrize("make", CLASSIFIERS)
def test_sets_through_a_pipeline_that_ends_with_the_estimator(make, fitted):
    X, y = _data()
    X = 10.0 * X + 3.0  # the pipeline standardises X for the model, fitted on standardised inputs
    pipe = make_pipeline(StandardScaler(), make(Relabelled(fitted.predict_proba, NAMES))).fit(X, NAMES[y])
    same = clone(pipe).fit(X, NAMES[y])  # the same noise draws from the same rng
    sets = pipe.predict(X[:40])
    assert sets.shape == (40, 3) and sets.dtype == bool
    np.testing.assert_array_equal(sets, same[-1].predict_set(same[:-1].transform(X[:40])))
    assert pipe[-1].classes_.tolist() == ["cat", "dog", "eel"]
