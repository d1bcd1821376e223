import numpy as np
import pytest


def _assert_sound(result, X, y, perturbation, *, rng, n_random=40, n_vertex=40):
    """Train on sampled perturbed datasets (uniform and vertex draws) and check every epoch's box."""
    sets = perturbation.sets(X)
    y_fit = y
    gen = np.random.default_rng(rng)
    draws = [sets.sample(gen) for _ in range(n_random)] + [
        sets.sample(gen, vertex=True) for _ in range(n_vertex)
    ]
    for i, Xp in enumerate(draws):
        y_fit = sets.sample_labels(y, gen) if i % 2 else y
        path = result.nominal_path[0].train(
            Xp, y_fit, loss=result.loss, epochs=result.epochs, learning_rate=result.learning_rate
        )
        for t, model in enumerate(path):
            v = model.to_vector()
            lo, hi = result.lower[t].to_vector(), result.upper[t].to_vector()
            assert np.all(lo <= v) and np.all(v <= hi), (
                f"epoch {t}: parameter outside its certified box by {max(np.max(lo - v), np.max(v - hi))}"
            )
    return len(draws)


@pytest.fixture
def assert_sound():
    return _assert_sound
