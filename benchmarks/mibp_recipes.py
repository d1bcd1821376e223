"""Which training recipes certify: full batch against mini-batches, momentum, rate and epochs.

Breast Cancer (427 training / 142 test rows, 30 standardised features, the CLI's split), a [30, 16, 2]
network with PyTorch's initialisation, cross-entropy, interval bounds (``carry="box"``), three
perturbations: every feature of every row within ±0.01, at most 5 rows moved by ±0.1, at most 2 labels
flipped.  For each recipe: the gradient steps it takes, the nominal and the certified test accuracy (mean
over the seeds), the mean parameter-box width under the feature box and its growth per gradient step
(the geometric mean of ``width[t] / width[t - 1]`` over the epochs after the first, per step), and the
certified accuracy after each epoch of the user's recipe (batch 32, momentum 0.9, 5 epochs).

    python benchmarks/mibp_recipes.py                  # seeds 0-4
    python benchmarks/mibp_recipes.py --seeds 0 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from certkit._results import format_table
from certkit.mibp import MLP, Budget, FeatureBox, LabelFlips, certified_training, certify_predictions
from certkit.mibp._cli_data import _builtin

PERTURBATIONS = {
    "features ±0.01": FeatureBox(0.01),
    "5 rows ±0.1": Budget(FeatureBox(0.1), 5),
    "2 label flips": LabelFlips(2),
}
SHUFFLED = dict(shuffle=True, rng=0)
RECIPES = {
    "full batch, lr 0.5, 5 epochs": dict(learning_rate=0.5, epochs=5),
    "full batch, lr 0.05, momentum 0.9, 5 epochs": dict(learning_rate=0.05, momentum=0.9, epochs=5),
    "batch 32, lr 0.05, momentum 0.9, 5 epochs": dict(
        learning_rate=0.05, momentum=0.9, batch_size=32, epochs=5, **SHUFFLED
    ),
    "batch 32, lr 0.05, 5 epochs": dict(learning_rate=0.05, batch_size=32, epochs=5, **SHUFFLED),
    "batch 32, lr 0.005, momentum 0.9, 5 epochs": dict(
        learning_rate=0.005, momentum=0.9, batch_size=32, epochs=5, **SHUFFLED
    ),
    "batch 32, lr 0.05, momentum 0.9, 1 epoch": dict(
        learning_rate=0.05, momentum=0.9, batch_size=32, epochs=1, **SHUFFLED
    ),
    "batch 128, lr 0.05, momentum 0.9, 5 epochs": dict(
        learning_rate=0.05, momentum=0.9, batch_size=128, epochs=5, **SHUFFLED
    ),
    "batch 128, lr 0.05, momentum 0.9, 2 epochs": dict(
        learning_rate=0.05, momentum=0.9, batch_size=128, epochs=2, **SHUFFLED
    ),
}
USERS = "batch 32, lr 0.05, momentum 0.9, 5 epochs"


def run(recipe: dict, perturbation, seed: int):
    data = _builtin("breast_cancer", rng=seed)
    model = MLP.random([data.X.shape[1], 16, data.n_classes], init="torch", rng=seed)
    res = certified_training(model, data.X, data.y, perturbation=perturbation, loss="cross_entropy", **recipe)
    certified = certify_predictions(res, data.X_test).certified_accuracy(data.y_test)
    nominal = float(np.mean(res.nominal.predict(data.X_test) == data.y_test))
    return res, data, nominal, certified


def growth_per_step(res) -> float:
    """Geometric mean growth of the mean box width per gradient step, after the first epoch."""
    widths = res.mean_widths()
    if res.epochs < 2:
        return float("nan")
    steps = res.recipe.steps_per_epoch * (res.epochs - 1)
    return float((widths[-1] / widths[1]) ** (1.0 / steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    start = time.process_time()
    rows = []
    for name, recipe in RECIPES.items():
        certified, nominal, widths, growth, steps = {}, [], [], [], 0
        for label, perturbation in PERTURBATIONS.items():
            scores = []
            for seed in args.seeds:
                res, _, nom, cert = run(recipe, perturbation, seed)
                scores.append(cert)
                if label == "features ±0.01":
                    nominal.append(nom)
                    widths.append(res.mean_widths()[-1])
                    growth.append(growth_per_step(res))
                    steps = res.recipe.n_steps
            certified[label] = float(np.mean(scores))
        rows.append(
            [
                name,
                steps,
                float(np.mean(nominal)),
                *certified.values(),
                float(np.exp(np.mean(np.log(widths)))),
                float(np.mean(growth)) if recipe["epochs"] > 1 else "-",
            ]
        )
    print(
        format_table(
            [
                "recipe",
                "steps",
                "nominal",
                *(f"cert. {p}" for p in PERTURBATIONS),
                "mean width (features)",
                "width growth / step",
            ],
            rows,
            title=f"Breast Cancer, [30, 16, 2], cross-entropy, interval bounds; mean over seeds {args.seeds}",
        )
    )
    print()
    per_epoch = []
    for seed in args.seeds:
        res, data, _, _ = run(RECIPES[USERS], PERTURBATIONS["features ±0.01"], seed)
        per_epoch.append(res.certified_accuracy(data.X_test, data.y_test))
    print(
        format_table(
            ["epoch", *(str(t) for t in range(1, 6))],
            [["certified, features ±0.01", *np.mean(per_epoch, axis=0)[1:].tolist()]],
            title=f"{USERS}: certified accuracy after each epoch",
        )
    )
    print(f"\nCPU seconds, all runs: {time.process_time() - start:.1f}")


if __name__ == "__main__":
    main()
