"""Issue 30: sigma is compared with every feature's scale, not with the spread of all entries."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from certkit.conformal import RCP1Classifier


def test_raw_scale_features_drowned_by_sigma_warn_per_feature():
    X, y = load_breast_cancer(return_X_y=True)  # overall std 228, smallest feature std 0.003
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X[:300], y[:300])
    with pytest.warns(UserWarning, match=r"sigma=0\.25 exceeds the standard deviation of 18 of 30 features "
                                         r"\(smallest: feature 19: 0\.00198"):
        clf = RCP1Classifier(model.predict_proba, sigma=0.25, radius=0.1, rng=0).calibrate(X[300:], y[300:])
    assert clf.threshold_ == 0.0


def test_one_large_irrelevant_column_does_not_hide_the_drowned_features():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 4))
    y = (X[:, 0] > 0).astype(int)
    X[:, 3] *= 1e4  # overall std about 5000, above sigma; features 0-2 have std 1
    model = LogisticRegression().fit(X[:300], y[:300])
    with pytest.warns(UserWarning, match=r"sigma=50 exceeds the standard deviation of 3 of 4 features"):
        RCP1Classifier(model.predict_proba, sigma=50.0, radius=0.1, rng=0).calibrate(X[300:], y[300:])


def test_a_sigma_that_overflows_the_inputs_is_named():
    from sklearn.linear_model import LogisticRegression

    X = np.random.default_rng(0).normal(size=(100, 2))
    y = (X[:, 0] > 0).astype(int)
    model = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match=r"^sigma=1e\+308 makes the noisy inputs overflow float64"):
        RCP1Classifier(model.predict_proba, sigma=1e308, radius=0.1, rng=0).calibrate(X, y)
