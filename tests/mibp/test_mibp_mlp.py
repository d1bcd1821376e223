"""MLP container and nominal gradient descent, checked against PyTorch autograd."""

import numpy as np
import pytest

from certkit.mibp import MLP

torch = pytest.importorskip("torch")


def _torch_step(model, X, y, loss, lr):
    net = model.to_torch()
    out = net(torch.from_numpy(X))
    if loss == "mse":
        target = torch.from_numpy(np.asarray(y, dtype=np.float64).reshape(out.shape))
        J = ((out - target) ** 2).sum(dim=1).mean()
    elif out.shape[1] == 1:
        J = torch.clamp(1 - torch.from_numpy(y.astype(np.float64))[:, None] * out, min=0).mean()
    else:
        yt = torch.from_numpy(y)
        fy = out.gather(1, yt[:, None])
        terms = torch.clamp(1 + out - fy, min=0)
        mask = torch.ones_like(terms)
        mask[torch.arange(len(y)), yt] = 0
        J = (terms * mask).sum(dim=1).mean()
    J.backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
    return MLP.from_torch(net)


@pytest.mark.parametrize(
    ("sizes", "loss"),
    [
        ([2, 8, 1], "hinge"),
        ([3, 5, 4, 1], "hinge"),
        ([2, 6, 3], "hinge"),
        ([2, 4, 1], "mse"),
        ([2, 4, 2], "mse"),
    ],
)
def test_gd_step_matches_torch(sizes, loss):
    rng = np.random.default_rng(1)
    model = MLP.random(sizes, rng=2)
    X = rng.normal(size=(30, sizes[0]))
    if loss == "mse":
        y = rng.normal(size=30) if sizes[-1] == 1 else rng.normal(size=(30, sizes[-1]))
    elif sizes[-1] == 1:
        y = np.where(rng.random(30) < 0.5, -1, 1)
    else:
        y = rng.integers(0, sizes[-1], 30)
    ours = model.gd_step(X, y, loss=loss, learning_rate=0.3)
    ref = _torch_step(model, X, y, loss, 0.3)
    np.testing.assert_allclose(ours.to_vector(), ref.to_vector(), atol=1e-12)


def test_forward_roundtrip_and_structure():
    model = MLP.random([3, 4, 2], rng=0)
    X = np.random.default_rng(0).normal(size=(5, 3))
    net = model.to_torch()
    np.testing.assert_allclose(model.forward(X), net(torch.from_numpy(X)).detach().numpy(), atol=1e-14)
    assert MLP.from_torch(net) == model
    assert model.sizes == (3, 4, 2) and model.n_layers == 2 and model.n_params == 3 * 4 + 4 + 4 * 2 + 2
    assert MLP.from_vector(model.to_vector(), model.sizes) == model
    W1 = model.weights[0]
    manual = np.maximum(X @ W1.T + model.biases[0], 0) @ model.weights[1].T + model.biases[1]
    np.testing.assert_allclose(model(X), manual)
    assert set(model.predict(X)) <= {0, 1}
    path = model.train(X, np.array([0, 1, 0, 1, 1]), epochs=3)
    assert len(path) == 4 and path[0] is model


def test_random_is_deterministic():
    assert MLP.random([2, 3, 1], rng=5) == MLP.random([2, 3, 1], rng=5)
    assert MLP.random([2, 3, 1], rng=5) != MLP.random([2, 3, 1], rng=6)


def test_bad_inputs():
    model = MLP.random([2, 3, 1], rng=0)
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="-1 or \\+1"):
        model.gd_step(X, np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="must have shape"):
        model.forward(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="finite"):
        model.forward(np.full((1, 2), np.nan))
    with pytest.raises(ValueError, match="unknown loss"):
        model.gd_step(X, np.ones(4), loss="logistic")
    with pytest.raises(ValueError, match="learning_rate"):
        model.gd_step(X, np.ones(4), learning_rate=-1.0)
    with pytest.raises(ValueError, match="inconsistent"):
        model.gd_step(X, np.ones(3))
    with pytest.raises(ValueError, match=r"integers in 0\.\.2"):
        MLP.random([2, 3, 3], rng=0).gd_step(X, np.array([0, 1, 3, 1]))
    with pytest.raises(ValueError, match="inputs"):
        MLP([np.zeros((3, 2)), np.zeros((1, 4))], [np.zeros(3), np.zeros(1)])
    with pytest.raises(ValueError, match="layers"):
        MLP([np.zeros((3, 2))], [])
    with pytest.raises(TypeError, match=r"nn\.Sequential"):
        MLP.from_torch(torch.nn.Linear(2, 1))
    with pytest.raises(ValueError, match=r"nn\.ReLU"):
        MLP.from_torch(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1)))
    with pytest.raises(ValueError, match="at least"):
        MLP.random([2], rng=0)
