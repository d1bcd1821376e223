"""Tests of the torch helpers: neuron_scores, AblationDiscovery, circuit_accuracy, layer_mean, and the CLI."""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from certkit.circuits import (  # noqa: E402
    AblationDiscovery,
    certify_circuit,
    circuit_accuracy,
    layer_mean,
    neuron_scores,
)


def mlp(seed=0):
    """Linear(5 -> 6) - ReLU ("act") - Linear(6 -> 3) ("head"), float64 for exact comparisons."""
    torch.manual_seed(seed)
    return nn.Sequential(OrderedDict(lin=nn.Linear(5, 6), act=nn.ReLU(), head=nn.Linear(6, 3))).double()


def cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        OrderedDict(
            conv=nn.Conv2d(1, 4, 3, padding=1),
            act=nn.ReLU(),
            pool=nn.AdaptiveAvgPool2d(1),
            flat=nn.Flatten(),
            head=nn.Linear(4, 3),
        )
    ).double()


def hidden(model, X):
    with torch.no_grad():
        return model.act(model.lin(torch.from_numpy(X))).numpy()


def test_activation_scores_mlp_and_cnn():
    X = np.random.default_rng(0).normal(size=(7, 5))
    model = mlp()
    assert np.allclose(neuron_scores(model, "act", X), np.abs(hidden(model, X)))
    # a module instead of its name; batches
    assert np.allclose(neuron_scores(model, model.act, X, batch_size=2), np.abs(hidden(model, X)))
    conv = cnn()
    imgs = np.random.default_rng(1).normal(size=(6, 1, 5, 5))
    with torch.no_grad():
        act = conv.act(conv.conv(torch.from_numpy(imgs))).numpy()
    got = neuron_scores(conv, "act", imgs)
    assert got.shape == (6, 4) and got.dtype == np.float64
    assert np.allclose(got, np.abs(act).mean(axis=(2, 3)))  # per-channel mean |a| over positions


def test_attribution_scores_equal_exact_zero_ablation_drop_for_linear_head():
    """The network is linear after the hooked layer, so a * dlogit/da is exactly the zero-ablation drop."""
    X = np.random.default_rng(2).normal(size=(9, 5))
    model = mlp()
    W = model.head.weight.detach().numpy()
    a = hidden(model, X)
    got = neuron_scores(model, "act", X, method="attribution", target=1)
    assert np.allclose(got, a * W[1])
    target = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    got = neuron_scores(model, "act", X, method="attribution", target=target, batch_size=4)
    assert np.allclose(got, a * W[target])
    # default target: the predicted class
    with torch.no_grad():
        pred = model(torch.from_numpy(X)).argmax(1).numpy()
    assert np.allclose(neuron_scores(model, "act", X, method="attribution"), a * W[pred])
    # the model's mode and hooks are restored, no gradients left behind
    model.train()
    neuron_scores(model, "act", X, method="attribution", target=0)
    assert model.training and not model.act._forward_hooks
    assert all(p.grad is None for p in model.parameters())


def test_neuron_dim_for_token_layouts():
    class Tokens(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 6)
            self.head = nn.Linear(6, 2)

        def forward(self, x):  # (batch, tokens, 4)
            h = self.proj(x)
            return self.head(h.mean(dim=1))

    torch.manual_seed(0)
    model = Tokens().double()
    X = np.random.default_rng(3).normal(size=(5, 7, 4))
    with torch.no_grad():
        h = model.proj(torch.from_numpy(X)).numpy()
    assert np.allclose(neuron_scores(model, "proj", X, neuron_dim=-1), np.abs(h).mean(axis=1))
    W = model.head.weight.detach().numpy()
    att = neuron_scores(model, "proj", X, method="attribution", target=1, neuron_dim=-1)
    assert np.allclose(att, (h * W[1] / 7).sum(axis=1))


def test_ablation_discovery_matches_linear_oracle_and_certifies():
    X = np.random.default_rng(4).normal(size=(20, 5))
    model = mlp()
    W = model.head.weight.detach().numpy()
    a = hidden(model, X)
    zero = AblationDiscovery(model, "act", target=2, top_k=2, ablation="zero")
    assert np.allclose(zero.importance(X), (a * W[2]).mean(axis=0))
    mean_self = AblationDiscovery(model, "act", target=2, top_k=2)
    assert np.allclose(mean_self.importance(X), ((a - a.mean(axis=0)) * W[2]).mean(axis=0))  # = 0
    ref = np.random.default_rng(5).normal(size=(30, 5))
    mean_ref = AblationDiscovery(model, "act", target=2, threshold=0.0, reference=ref)
    expect = ((a - hidden(model, ref).mean(axis=0)) * W[2]).mean(axis=0)
    assert np.allclose(mean_ref.importance(X), expect)
    assert np.array_equal(mean_ref(X), expect >= 0.0)
    mask = zero(X)
    imp = (a * W[2]).mean(axis=0)
    assert mask.dtype == bool and mask.sum() == 2 and set(np.flatnonzero(mask)) == set(np.argsort(-imp)[:2])
    clone = pickle.loads(pickle.dumps(zero))
    assert np.array_equal(clone(X), mask)
    res = certify_circuit(zero, X, subsample_size=8, n_subsamples=40, confidence_level=0.9, progress=False)
    assert res.included.size == 6 and res.counts.sum() == 40 * 2


def test_circuit_accuracy_oracles():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(40, 5))
    model = mlp()
    with torch.no_grad():
        pred = model(torch.from_numpy(X)).argmax(1).numpy()
    y = pred.copy()
    y[:10] = (y[:10] + 1) % 3
    keep_all = np.ones(6, bool)
    assert circuit_accuracy(model, "act", keep_all, X, y) == pytest.approx(0.75)
    # zero-ablating everything: logits = head bias, a constant prediction
    const = int(np.argmax(model.head.bias.detach().numpy()))
    none = np.zeros(6, bool)
    assert circuit_accuracy(model, "act", none, X, y, ablation="zero") == pytest.approx(np.mean(y == const))
    # mean ablation of a subset, against a manual computation
    ref = rng.normal(size=(50, 5))
    keep = np.array([True, False, True, False, False, True])
    h = hidden(model, X)
    h[:, ~keep] = hidden(model, ref).mean(axis=0)[~keep]
    with torch.no_grad():
        manual = model.head(torch.from_numpy(h)).argmax(1).numpy()
    expect = np.mean(manual == y)
    assert circuit_accuracy(model, "act", keep, X, y, reference=ref) == pytest.approx(expect)
    means = layer_mean(model, "act", ref)
    assert means.shape == (6,)
    assert circuit_accuracy(model, "act", keep, X, y, reference_mean=means) == pytest.approx(expect)
    # conv layers: the mean is per element (C, H, W)
    conv = cnn()
    imgs = rng.normal(size=(8, 1, 5, 5))
    assert layer_mean(conv, "act", imgs).shape == (4, 5, 5)


def test_bad_inputs_torch_helpers():
    model = mlp()
    X = np.zeros((3, 5))
    with pytest.raises(ValueError, match="model has no submodule named 'nope'"):
        neuron_scores(model, "nope", X)
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        neuron_scores(lambda x: x, "act", X)
    with pytest.raises(TypeError, match="layer must be a submodule name"):
        neuron_scores(model, 3, X)
    with pytest.raises(ValueError, match="not part of model"):
        neuron_scores(model, nn.ReLU(), X)
    with pytest.raises(ValueError, match="unknown method"):
        neuron_scores(model, "act", X, method="gradient")
    with pytest.raises(ValueError, match="target classes must be < 3"):
        neuron_scores(model, "act", X, method="attribution", target=3)
    with pytest.raises(ValueError, match="target must be an int or have shape"):
        neuron_scores(model, "act", X, method="attribution", target=[0, 1])
    with pytest.raises(ValueError, match="X must be finite"):
        neuron_scores(model, "act", np.full((3, 5), np.nan))
    with pytest.raises(ValueError, match="neuron_dim=0 is not a non-batch axis"):
        neuron_scores(model, "act", X, neuron_dim=0)
    with pytest.raises(ValueError, match="keep_mask has 5 entries but layer 'act' has 6 neurons"):
        circuit_accuracy(model, "act", np.ones(5, bool), X, [0, 1, 2])
    with pytest.raises(TypeError, match="keep_mask must be a boolean array"):
        circuit_accuracy(model, "act", np.ones(6), X, [0, 1, 2])
    with pytest.raises(ValueError, match="X has 3 examples but y has 2"):
        circuit_accuracy(model, "act", np.ones(6, bool), X, [0, 1])
    with pytest.raises(ValueError, match="unknown ablation"):
        circuit_accuracy(model, "act", np.ones(6, bool), X, [0, 1, 2], ablation="resample")
    with pytest.raises(ValueError, match="reference_mean has shape"):
        circuit_accuracy(model, "act", np.ones(6, bool), X, [0, 1, 2], reference_mean=np.zeros(4))
    with pytest.raises(ValueError, match="exactly one of top_k and threshold"):
        AblationDiscovery(model, "act", target=0)
    with pytest.raises(ValueError, match="top_k=9 exceeds the 6 neurons"):
        AblationDiscovery(model, "act", target=0, top_k=9)(X)


def test_cli_module_shape_and_demo(tmp_path, capsys):
    from certkit.circuits import _cli

    assert _cli.NAME == "circuits" and _cli.HELP
    text = _cli.demo(np.random.default_rng(0))
    assert "512 neurons" in text and "abstained" in text
    parser = argparse.ArgumentParser()
    _cli.add_arguments(parser)
    scores = np.random.default_rng(0).normal(size=(50, 20))
    path = tmp_path / "scores.npy"
    np.save(path, scores)
    assert _cli.run(parser.parse_args(["--scores", str(path), "--top-k", "5", "--subsample-size", "10"])) == 0
    out = capsys.readouterr().out
    assert "components N" in out and "Decisions by radius" in out and "20" in out
    assert _cli.run(parser.parse_args(["--deletion-prob", "0.9", "--threshold", "1.0", "--radius", "2"])) == 0
    assert "poisson" in capsys.readouterr().out


@pytest.mark.slow
def test_digits_example_runs_end_to_end(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "circuits_digits.py"
    spec = importlib.util.spec_from_file_location("circuits_digits_example", path)
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # dataclasses need their module registered
    try:
        spec.loader.exec_module(example)
    finally:
        del sys.modules[spec.name]
    plot = tmp_path / "circuits.png"
    headers, rows = example.run(n_subsamples=300, plot_path=str(plot))
    assert headers == ["circuit", "neurons", "clean", "noise", "rotation", "shift"]
    table = {row[0]: row[1:] for row in rows}
    assert table["full model"][1] > 0.9  # the CNN trains
    sizes = [table[name][0] for name in ("smoothed", "certified r=1", "certified r=2", "certified r=5")]
    assert all(a >= b for a, b in itertools.pairwise(sizes))  # certified circuits shrink with the radius
    assert all(0.0 <= v <= 1.0 for row in rows for v in row[2:])
    assert plot.stat().st_size > 10_000


def test_inputs_must_fit_the_model():
    """Issue 14 items 6 and 10: X[None] was read as one example whose rows are neurons, and a wrong
    feature count surfaced as the model's own matmul error; both now name the argument up front."""
    model = mlp()
    X = np.random.default_rng(7).normal(size=(20, 5))
    extra = r"one example of X \(shape \(1, 20, 5\)\) gave \(1, 20, 3\); does X have an extra leading axis"
    for call in (
        lambda: neuron_scores(model, "act", X[None]),
        lambda: neuron_scores(model, "act", X[None], method="attribution"),
        lambda: layer_mean(model, "act", X[None]),
        lambda: circuit_accuracy(model, "act", np.ones(6, bool), X[None], [0]),
    ):
        with pytest.raises(ValueError, match=extra):
            call()
    features = r"X of shape \(20, 4\) does not fit model: its first layer \(Linear.*\) expects 5 input"
    for call in (
        lambda: neuron_scores(model, "act", X[:, :4]),
        lambda: layer_mean(model, "act", X[:, :4]),
        lambda: circuit_accuracy(model, "act", np.ones(6, bool), X[:, :4], np.zeros(20, int)),
    ):
        with pytest.raises(ValueError, match=features):
            call()
    with pytest.raises(ValueError, match=r"reference of shape \(3, 4\) does not fit model"):
        circuit_accuracy(model, "act", np.ones(6, bool), X, np.zeros(20, int), reference=np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"X_subset of shape \(20, 4\) does not fit model"):
        AblationDiscovery(model, "act", target=0, top_k=1)(X[:, :4])
    with pytest.raises(ValueError, match=r"X of shape \(3, 2, 5, 5\) does not fit model: .* expects inputs "
                                         r"\(batch, 1 channels, ...\)"):
        neuron_scores(cnn(), "act", np.zeros((3, 2, 5, 5)))

    class Broken(nn.Module):  # no Linear first: the model's own error is reported as a bad X
        def forward(self, x):
            return x @ torch.ones(7, 3, dtype=x.dtype)

    with pytest.raises(ValueError, match=r"X of shape \(20, 5\) is not a valid input of model: "):
        layer_mean(nn.Sequential(OrderedDict(act=Broken())), "act", X)
    # the probe leaves no hooks behind and keeps the model's mode
    model.train()
    assert neuron_scores(model, "act", X).shape == (20, 6)
    assert model.training and not model.lin._forward_pre_hooks and not model.act._forward_hooks
