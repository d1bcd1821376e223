"""The frozen extractor's interval bounds (`certkit.mibp.enclosures.features`) on rows of every rank the
layers accept: exact oracles, corners, samples and projected gradient ascent against the bounds, the
training run behind an extractor attacked end to end, and the refusals."""

import warnings

import numpy as np
import pytest

from certkit.mibp import MLP, Budget, FeatureBox, LabelFlips, certified_training
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import random_extractor, random_row_shape

torch = pytest.importorskip("torch")
from certkit.mibp.enclosures.features import FrozenFeatures  # noqa: E402  (needs torch)

nn = torch.nn


def _seeded(seed, build):
    """``nn.Sequential(*build())`` in float64 and eval mode, its layers initialised from torch seed ``seed``
    (torch's global generator left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(*build()).double().eval()


def _ascent_excess(ext, X, eps, gen, steps=25):
    """The largest excess of any feature over its bounds found by projected gradient ascent from random
    starts in the box ``X ± eps``, each feature pushed up and down (torch autograd, float64); the features
    of each iterate are evaluated as the training run computes them (`FrozenFeatures.features`)."""
    lo, hi = ext.bounds(X - eps, X + eps)
    worst = -np.inf
    n_features = lo.shape[1]
    for unit in range(n_features):
        for sign in (1.0, -1.0):
            x = torch.tensor(X + gen.uniform(-eps, eps, X.shape), requires_grad=True)
            low, high = torch.tensor(X - eps), torch.tensor(X + eps)
            for _ in range(steps):
                out = ext.torch_forward(x)[:, unit]
                (grad,) = torch.autograd.grad((sign * out).sum(), x)
                with torch.no_grad():
                    x = torch.clamp(x + 0.25 * eps * torch.sign(grad), low, high).requires_grad_(True)
                f = ext.features(x.detach().numpy())
                worst = max(worst, float(np.max(np.maximum(lo - f, f - hi))))
    return worst


# ----------------------------------------------------------------------------- the reported defect
@pytest.mark.parametrize("out", [2, 8])
def test_linear_on_two_axis_rows_adds_its_bias_on_the_last_axis(out):
    """Rows of shape (2, 8) through Linear(8, out) then Flatten (the round-6 reproducer: the bias was added
    along the wrong axis, so a row's own features missed their box by 0.072; Linear(8, 8) raised)."""
    net = _seeded(0, lambda: [nn.Linear(8, out), nn.ReLU(), nn.Flatten()])
    ext = FrozenFeatures(net, (2, 8))
    X = np.random.default_rng(0).normal(size=(5, 16))
    lo, hi = ext.bounds(X, X)
    f = ext.features(X)
    assert ext.n_features == 2 * out and f.shape == (5, 2 * out)
    assert np.all(lo <= f) and np.all(f <= hi)
    np.testing.assert_allclose(lo, f, rtol=0, atol=1e-12)  # a point box: the bounds are the point, padded
    np.testing.assert_allclose(hi, f, rtol=0, atol=1e-12)


def test_linear_on_multi_axis_rows_is_exact_at_the_sign_vertex():
    """Exact oracle: one Linear on rows of shape (3, 4): each output's ends are attained where every input of
    its row takes the end given by the sign of its weight."""
    net = _seeded(1, lambda: [nn.Linear(4, 2), nn.Flatten()])
    ext = FrozenFeatures(net, (3, 4))
    x = np.random.default_rng(2).normal(size=(1, 12))
    eps = 0.1
    lo, hi = ext.bounds(x - eps, x + eps)
    W = net[0].weight.detach().numpy()
    for unit in range(6):
        channel, o = divmod(unit, 2)
        sign = np.zeros((3, 4))
        sign[channel] = np.sign(W[o])
        top = ext.features(x + eps * sign.reshape(1, -1))[0, unit]
        bottom = ext.features(x - eps * sign.reshape(1, -1))[0, unit]
        assert lo[0, unit] <= bottom <= top <= hi[0, unit]
        assert hi[0, unit] - top < 1e-12 and bottom - lo[0, unit] < 1e-12


def test_batch_norm_on_channel_length_rows_is_exact():
    """Exact oracle: eval-mode BatchNorm1d on (C, L) rows is a x + c per channel, so its bounds are the images
    of the box's ends (up to the padding)."""
    norm = nn.BatchNorm1d(3)
    with torch.no_grad():
        norm.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0]))
        norm.running_var.copy_(torch.tensor([0.25, 4.0, 1.0]))
        norm.weight.copy_(torch.tensor([2.0, -1.0, 0.5]))
        norm.bias.copy_(torch.tensor([0.125, 0.25, -0.375]))
    ext = FrozenFeatures(nn.Sequential(norm, nn.Flatten()).double().eval(), (3, 5))
    x = np.random.default_rng(3).normal(size=(2, 15))
    lo, hi = ext.bounds(x - 0.2, x + 0.2)
    a = np.repeat(np.array([2.0, -1.0, 0.5]) / np.sqrt(np.array([0.25, 4.0, 1.0]) + norm.eps), 5)
    c = np.repeat(np.array([0.125, 0.25, -0.375]), 5) - np.repeat([0.5, -1.0, 2.0], 5) * a
    ends = np.stack([a * (x - 0.2) + c, a * (x + 0.2) + c])
    np.testing.assert_allclose(lo, ends.min(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, ends.max(axis=0), rtol=0, atol=1e-12)
    assert np.all(lo <= ends.min(axis=0)) and np.all(ends.max(axis=0) <= hi)


# ----------------------------------------------------------------------------- every row rank, attacked
@pytest.mark.parametrize("seed", range(12))
def test_random_extractors_of_every_row_rank_hold_corners_samples_and_ascent(seed):
    """Random extractors on rows of rank 1, 2 and 3 (Linear on the last axis, convolutions, batch norm,
    pooling, flatten of the trailing axes): a point box holds its own features, and no corner, uniform sample
    or projected-gradient-ascent iterate of the input box leaves the feature bounds."""
    gen = np.random.default_rng([11, seed])
    for rank_draw in range(4):
        shape = random_row_shape(gen)
        net, width = random_extractor(gen, shape)
        ext = FrozenFeatures(net, shape)
        assert ext.n_features == width
        X = gen.normal(size=(3, int(np.prod(shape))))
        lo, hi = ext.bounds(X, X)
        f = ext.features(X)
        assert np.all(lo <= f) and np.all(f <= hi), (shape, net)
        eps = float(gen.choice([0.01, 0.1, 0.5]))
        lo, hi = ext.bounds(X - eps, X + eps)
        for draw in range(30):
            if draw % 2:
                noise = gen.choice([-eps, eps], size=X.shape)
            else:
                noise = gen.uniform(-eps, eps, X.shape)
            f = ext.features(X + noise)
            assert np.all(lo <= f) and np.all(f <= hi), (shape, net, rank_draw)
        assert _ascent_excess(ext, X[:1], eps, gen, steps=8) <= 0.0, (shape, net)


@pytest.mark.parametrize("seed", range(4))
def test_training_behind_a_random_multi_axis_extractor_stays_in_its_boxes(seed):
    """End to end: training a head behind random extractors of rows of rank 1-3 under feature budgets and
    paired poisoning; attacked datasets (ascent through the extractor and the unrolled training) retrained
    stay inside the certified boxes at every epoch."""
    gen = np.random.default_rng([12, seed])
    shape = random_row_shape(gen)
    net, width = random_extractor(gen, shape)
    n = 8
    X = gen.normal(size=(n, *shape))
    y = gen.integers(0, 2, n)
    perturbation = [
        Budget(FeatureBox(0.1), 2),
        FeatureBox(0.05),
        Budget(FeatureBox(0.05) & LabelFlips(1), 2),
        FeatureBox(0.02) & LabelFlips(1),
    ][seed]
    res = certified_training(
        MLP.random([width, 3, 2], rng=seed),
        X,
        y,
        perturbation=perturbation,
        loss="cross_entropy",
        epochs=2,
        learning_rate=0.5,
        batch_size=4,
        features=net,
    )
    violation, count = attack_violation(res, X, y, perturbation, restarts=3, steps=5, rng=seed)
    assert count >= 3 and violation <= 0.0


def test_the_reproducer_run_stays_in_its_boxes():
    """The round-6 reproducer end to end: rows (2, 8) through Linear(8, 2) and Flatten, a retrained allowed
    dataset left the boxes at epochs 1 and 2."""
    net = _seeded(0, lambda: [nn.Linear(8, 2), nn.ReLU(), nn.Flatten()])
    gen = np.random.default_rng(4)
    X = gen.normal(size=(10, 2, 8))
    y = gen.integers(0, 2, 10)
    pert = FeatureBox(0.01)
    res = certified_training(
        MLP.random([4, 3, 2], rng=0),
        X,
        y,
        perturbation=pert,
        loss="cross_entropy",
        epochs=2,
        learning_rate=0.5,
        features=net,
    )
    violation, count = attack_violation(res, X, y, pert, restarts=4, steps=6, rng=0)
    assert count >= 4 and violation <= 0.0


# ----------------------------------------------------------------------------- refusals and warnings
def test_max_pool_returning_indices_is_refused_by_name():
    net = nn.Sequential(nn.MaxPool1d(2, return_indices=True), nn.Flatten())
    with pytest.raises(TypeError, match=r"features\[0\] is MaxPool1d.*return_indices=True"):
        FrozenFeatures(net, (1, 6))


def test_rows_without_their_channel_axis_name_the_expected_shape():
    net = _seeded(0, lambda: [nn.Conv2d(1, 2, 3), nn.Flatten()])
    with pytest.raises(
        ValueError,
        match=r"features\[0\] \(Conv2d.*takes rows of shape \(channels, height, width\); the rows reaching "
        r"it have shape \(6, 6\); the rows lack the channel axis: give X the shape \(n, 1, 6, 6\)",
    ):
        certified_training(
            MLP.random([32, 2], rng=0),
            np.zeros((5, 6, 6)),
            np.arange(5) % 2,
            perturbation=FeatureBox(0.1),
            loss="cross_entropy",
            features=net,
        )
    conv = _seeded(0, lambda: [nn.Conv1d(3, 2, 2), nn.Flatten()])
    with pytest.raises(
        ValueError,
        match=r"takes rows with 3 channels on their first axis; the rows reaching "
        r"it have shape \(2, 5\)",
    ):
        FrozenFeatures(conv, (2, 5))
    with pytest.raises(
        ValueError,
        match=r"features\[1\] \(Linear.*acts on the last axis of each row, which "
        r"must have 7 entries; the rows reaching it have shape \(2, 4\)",
    ):
        FrozenFeatures(_seeded(0, lambda: [nn.Conv1d(1, 2, 2), nn.Linear(7, 2), nn.Flatten()]), (1, 5))


def test_a_non_finite_weight_names_the_extractor_layer():
    net = _seeded(0, lambda: [nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Sequential(nn.Flatten(), nn.Linear(8, 3))])
    with torch.no_grad():
        net[2][1].weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"features\[2\]\[1\] \(Linear.*has a non-finite weight"):
        FrozenFeatures(net, (1, 4, 4))
    norm = _seeded(0, lambda: [nn.BatchNorm1d(3), nn.Flatten()])
    with torch.no_grad():
        norm[0].running_var[1] = float("inf")
    with pytest.raises(ValueError, match=r"features\[0\] \(BatchNorm1d.*has a non-finite running_var"):
        FrozenFeatures(norm, (3,))


def test_a_layer_mixing_rows_is_refused():
    with pytest.raises(ValueError, match="mixes the rows of a batch"):
        FrozenFeatures(nn.Sequential(nn.Flatten(start_dim=0)), (3,))


def test_float32_or_train_mode_warns_once_naming_what_is_certified():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Dropout(0.2), nn.Flatten()
        )  # float32, train
    with pytest.warns(
        UserWarning,
        match="float32 weights and has dropout or batch norm in train mode: certkit "
        "certifies a float64 copy in eval mode",
    ) as record:
        ext = FrozenFeatures(net, (1, 4, 4))
    assert len(record) == 1
    assert net.training and net[0].weight.dtype == torch.float32  # the caller's module is unchanged
    X = np.random.default_rng(0).normal(size=(3, 16))
    with torch.no_grad():
        expected = net.double().eval()(torch.tensor(X.reshape(3, 1, 4, 4))).numpy()
    np.testing.assert_array_equal(ext.features(X), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FrozenFeatures(net, (1, 4, 4))  # float64 and eval now: silent
        FrozenFeatures(nn.Sequential(nn.Flatten(), nn.Linear(16, 2)).double(), (1, 4, 4))  # no modal layer


# ----------------------------------------------------------------------------- review 2 of the extractor
@pytest.mark.parametrize("seed", range(3))
def test_a_layer_object_used_twice_is_bounded_each_time_torch_runs_it(seed):
    """One ReLU instance used after both Linears, and a weight-tied Linear: Sequential.forward runs every
    entry, repeats included, and so do the bounds (corners, samples and ascent stay inside)."""
    gen = np.random.default_rng(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        act, tied = nn.ReLU(), nn.Linear(4, 4)
        shared = nn.Sequential(nn.Linear(4, 6), act, nn.Linear(6, 3), act).double().eval()
        weight_tied = nn.Sequential(tied, nn.ReLU(), tied).double().eval()
    for net, count in ((shared, 4), (weight_tied, 3)):
        ext = FrozenFeatures(net, (4,))
        assert len(ext.layers) == count
        X, eps = gen.normal(size=(6, 4)), 0.05
        lo, hi = ext.bounds(X - eps, X + eps)
        corners = X[:, None, :] + eps * np.array(list(np.ndindex(*(2,) * 4)))[None] * 2.0 - eps
        f = ext.features(corners.reshape(-1, 4)).reshape(6, 16, -1)
        assert np.all(lo[:, None] <= f) and np.all(f <= hi[:, None])
        inside = X[:, None, :] + gen.uniform(-eps, eps, size=(6, 50, 4))
        f = ext.features(inside.reshape(-1, 4)).reshape(6, 50, -1)
        assert np.all(lo[:, None] <= f) and np.all(f <= hi[:, None])
        assert _ascent_excess(ext, X, eps, gen, steps=10) <= 0.0


def test_a_sequential_with_its_own_forward_is_refused_by_name():
    class Residual(nn.Sequential):
        def forward(self, x):
            return x + super().forward(x)

    class Plain(nn.Sequential):  # a subclass that keeps Sequential.forward is a Sequential
        pass

    body = Residual(nn.Linear(3, 3), nn.ReLU())
    with pytest.raises(TypeError, match=r"features\[0\] is a Residual, a Sequential with its own forward"):
        FrozenFeatures(nn.Sequential(body, nn.Flatten()).double(), (3,))
    with pytest.raises(TypeError, match=r"features is a Residual, a Sequential with its own forward"):
        FrozenFeatures(Residual(nn.Linear(3, 3)).double(), (3,))
    assert FrozenFeatures(Plain(nn.Linear(3, 2)).double().eval(), (3,)).n_features == 2


@pytest.mark.parametrize(("eps", "var"), [(0.0, 0.0), (1e-5, -1.0)])
def test_batch_norm_with_a_non_positive_variance_names_the_layer(eps, var):
    norm = _seeded(0, lambda: [nn.Linear(3, 2), nn.BatchNorm1d(2, eps=eps)])
    with torch.no_grad():
        norm[1].running_var[0] = var
    with pytest.raises(ValueError, match=r"features\[1\] \(BatchNorm1d.*has running_var \+ eps <= 0"):
        FrozenFeatures(norm, (3,))


def test_flat_rows_for_a_multi_channel_convolution_get_the_reshape_that_fits():
    conv = _seeded(0, lambda: [nn.Conv1d(2, 1, 3), nn.Flatten()])
    with pytest.raises(ValueError, match=r"lack the channel axis: give X the shape \(n, 2, 6\)$"):
        FrozenFeatures(conv, (12,))
    conv2 = _seeded(0, lambda: [nn.Conv2d(3, 1, 3), nn.Flatten()])
    with pytest.raises(ValueError, match=r"give X the shape \(n, 3, \.\.\.\) with 3 channels of equal size$"):
        FrozenFeatures(conv2, (6, 6))
    with pytest.raises(ValueError, match=r"^input_shape must be the shape of one row.*got \(\)$"):
        FrozenFeatures(nn.Sequential(nn.Flatten()), ())
