"""Perturbation models: the sets they produce, sampling, composition and input checks."""

import numpy as np
import pytest

from certkit.mibp import Budget, Compose, FeatureBox, LabelFlips, MissingValues, OrdinalShift

X = np.arange(12, dtype=float).reshape(4, 3)


def _in_sets(sets, Xp):
    n, d = Xp.shape
    for k in range(n):
        for f in range(d):
            vals = sets.options[k, f, : sets.n_options[k, f]]
            off = Xp[k, f] - vals
            if not np.any((off >= sets.offset_lo[k, f] - 1e-12) & (off <= sets.offset_hi[k, f] + 1e-12)):
                return False
    return True


def test_feature_box():
    s = FeatureBox(0.5).sets(X)
    np.testing.assert_array_equal(s.lower, X - 0.5)
    np.testing.assert_array_equal(s.upper, X + 0.5)
    s = FeatureBox(np.array([0.1, 0.0, 0.2]), points=[1]).sets(X)
    np.testing.assert_allclose(s.upper - X, [[0, 0, 0], [0.1, 0, 0.2], [0, 0, 0], [0, 0, 0]])
    assert s.varies.sum() == 2
    s = FeatureBox(1.0, features=[2]).sets(X)
    assert np.array_equal(s.varies, np.tile([False, False, True], (4, 1)))


def test_missing_values_and_levels():
    mask = np.zeros((4, 3), dtype=bool)
    mask[0, 1] = mask[2, 0] = True
    s = MissingValues(mask, lower=-1.0, upper=np.array([1.0, 2.0, 3.0]), levels={0: [5.0, 7.0]}).sets(X)
    assert s.lower[0, 1] == -1.0 and s.upper[0, 1] == 2.0
    assert s.n_options[2, 0] == 2 and s.lower[2, 0] == 5.0 and s.upper[2, 0] == 7.0
    assert s.offset_hi[2, 0] == 0.0
    assert not s.varies[1].any()


def test_ordinal_shift_and_compose():
    s = OrdinalShift([0], shifts=(-1, 0, 1)).sets(X)
    assert np.all(s.n_options[:, 0] == 3) and np.all(s.n_options[:, 1:] == 1)
    np.testing.assert_array_equal(s.options[1, 0, :3], [2.0, 3.0, 4.0])
    both = (OrdinalShift([0], shifts=(0, 2)) & FeatureBox(0.1)).sets(X)
    assert isinstance(OrdinalShift([0]) & FeatureBox(0.1), Compose)
    np.testing.assert_allclose(both.lower[:, 0], X[:, 0] - 0.1)
    np.testing.assert_allclose(both.upper[:, 0], X[:, 0] + 2.1)
    rng = np.random.default_rng(0)
    for _ in range(50):
        Xp = both.sample(rng)
        assert _in_sets(both, Xp)
        # values between the two islands are impossible
        assert np.all(
            (np.abs(Xp[:, 0] - X[:, 0]) <= 0.1 + 1e-12) | (np.abs(Xp[:, 0] - X[:, 0] - 2) <= 0.1 + 1e-12)
        )


def test_budget_sampling():
    s = Budget(FeatureBox(1.0), 1).sets(X)
    assert s.budget == 1
    rng = np.random.default_rng(0)
    for _ in range(30):
        Xp = s.sample(rng, vertex=True)
        assert (np.abs(Xp - X).sum(axis=1) > 0).sum() <= 1
        assert _in_sets(s, Xp)


def test_bad_perturbations():
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        FeatureBox(-0.1)
    with pytest.raises(ValueError, match="finite"):
        FeatureBox(np.nan)
    with pytest.raises(ValueError, match="one entry per feature"):
        FeatureBox(np.ones(2)).sets(X)
    with pytest.raises(ValueError, match="points must be indices"):
        FeatureBox(0.1, points=[7]).sets(X)
    with pytest.raises(ValueError, match="outermost"):
        Compose(Budget(FeatureBox(0.1), 1), FeatureBox(0.1)).sets(X)
    with pytest.raises(ValueError, match="lower must be <= upper"):
        MissingValues(np.zeros((4, 3), dtype=bool), 1.0, 0.0)
    with pytest.raises(ValueError, match="shape of X"):
        MissingValues(np.zeros((2, 3), dtype=bool), 0.0, 1.0).sets(X)
    with pytest.raises(TypeError, match="Perturbation"):
        Budget("box", 1)
    with pytest.raises(ValueError, match="k must be >= 0"):
        Budget(FeatureBox(0.1), -1)


def test_label_flips():
    s = (FeatureBox(0.1) & LabelFlips(2)).sets(X)
    assert s.label_flips == 2 and s.budget is None
    y = np.array([1.0, -1.0, 1.0, 1.0])
    rng = np.random.default_rng(0)
    counts = {int((s.sample_labels(y, rng) != y).sum()) for _ in range(40)}
    assert counts == {0, 1, 2}
    assert np.array_equal(FeatureBox(0.1).sets(X).sample_labels(y, rng), y)
    with pytest.raises(ValueError, match="before LabelFlips"):
        (LabelFlips(1) & FeatureBox(0.1)).sets(X)
    with pytest.raises(ValueError, match=r"cannot follow a Budget.*LabelFlips\(1\) inside it"):
        (Budget(FeatureBox(0.1), 1) & LabelFlips(1)).sets(X)
    with pytest.raises(ValueError, match=r"inside a Budget, LabelFlips\(1\).*got LabelFlips\(2\)"):
        Budget(FeatureBox(0.1) & LabelFlips(2), 1).sets(X)
    paired = Budget(FeatureBox(0.1) & LabelFlips(1), 1).sets(X)
    assert paired.budget == 1 and paired.flip_labels and paired.label_flips is None
    with pytest.raises(ValueError, match="k must be >= 0"):
        LabelFlips(-1)


# ------------------------------------------------------------------------------ issue 36: fuzz round 4
def test_a_budget_inside_a_budget_is_refused():
    # Budget(Budget(p, 2), 4) silently took the outer k = 4
    for nested in (
        Budget(FeatureBox(0.1), 2),
        Compose(Budget(FeatureBox(0.1), 2)),
        FeatureBox(0.1) & Budget(FeatureBox(0.1) & LabelFlips(1), 2),
    ):
        with pytest.raises(
            ValueError, match=r"Budget cannot hold another Budget \(got Budget\(.*, 2\) inside"
        ):
            Budget(nested, 4)
    assert Budget(FeatureBox(0.1) & LabelFlips(1), 4).sets(X).budget == 4  # one Budget is fine


def test_missing_values_wider_than_the_float_range_name_the_arguments():
    # MissingValues(mask, -1e308, 1e308) named an internal array (offset_hi)
    mask = np.zeros((4, 3), dtype=bool)
    mask[1, 2] = True
    with pytest.raises(
        ValueError, match=r"upper - lower must be finite: lower=-1e\+308 and upper=1e\+308"
    ) as info:
        MissingValues(mask, -1e308, 1e308)
    assert "offset" not in str(info.value) and "observed minimum and maximum" in str(info.value)
    with pytest.raises(ValueError, match=r"upper - lower must be finite: lower=\[0.0, -1e\+308, 0.0\]"):
        MissingValues(mask, [0.0, -1e308, 0.0], [1.0, 1e308, 1.0])
    # a set that leaves the float range through the observed value is named by its entry
    big = X.copy()
    big[2, 1] = 1.7e308
    with pytest.raises(ValueError, match=r"lets X\[2, 1\] \(observed 1.7e\+308\) leave the float64 range"):
        FeatureBox(1e308).sets(big)
    assert np.isfinite(MissingValues(mask, -1e300, 1e300).sets(X).upper).all()  # wide but representable
