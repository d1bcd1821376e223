"""Random soundness sweep: every backend × formulation × perturbation type on tiny configurations,
attacked by projected gradient ascent through the unrolled training (`attack_violation`)."""

import importlib.util
import itertools

import numpy as np
import pytest

from certkit.mibp import certified_training
from certkit.mibp.certification.attack import attack_violation
from certkit.mibp.certification.cases import PERTURBATION_KINDS, random_case

pytest.importorskip("torch")

_MODULES = {"scip": "pyscipopt", "gurobi": "gurobipy", "milp": "highspy", "lp": "highspy"}
_FOUND = {name: importlib.util.find_spec(module) is not None for name, module in _MODULES.items()}
COMBOS = [
    ("interval", "decomposed"),
    *list(itertools.product(["lp", "milp", "scip", "gurobi"], ["joint", "decomposed", "hybrid"])),
]
# appended (not mixed into COMBOS) so that the earlier cases keep their seeds:
# the affine carry-over (zonotope between steps) on top of the cheap and the exact per-sample bounds,
# then the Lagrangian decomposition
AFFINE_COMBOS = [("interval", "decomposed"), ("lp", "decomposed"), ("scip", "decomposed")]
CASES = (
    [(kind, backend, formulation, "box") for kind in PERTURBATION_KINDS for backend, formulation in COMBOS]
    + [
        (kind, backend, formulation, "affine")
        for kind in PERTURBATION_KINDS
        for backend, formulation in AFFINE_COMBOS
    ]
    + [
        (kind, backend, "lagrangian", "box")
        for kind in PERTURBATION_KINDS
        for backend in ["lp", "milp", "scip", "gurobi"]
    ]
)


@pytest.mark.filterwarnings("ignore:carry='affine' relaxes:UserWarning")  # soundness, not advice
@pytest.mark.parametrize(("index", "case"), list(enumerate(CASES)), ids=["-".join(c) for c in CASES])
def test_no_attacked_trajectory_leaves_its_box(index, case):
    kind, backend, formulation, carry = case
    if backend != "interval" and not _FOUND[backend]:
        pytest.skip(f"backend {backend} is not installed")
    gen = np.random.default_rng(1000 + index)
    config = random_case(gen, kind, max_hidden=3, max_points=5, max_epochs=2)
    if backend == "gurobi" and formulation == "joint":
        config["X"], config["y"] = config["X"][:3], config["y"][:3]  # fits the size-limited pip licence
    res = certified_training(**config, backend=backend, formulation=formulation, carry=carry)
    violation, trajectories = attack_violation(
        res, config["X"], config["y"], config["perturbation"], restarts=4, steps=6, rng=index
    )
    assert trajectories >= 20
    assert violation <= 0.0, f"a trajectory leaves its box by {violation}"
