"""Bad input to certkit.mibp (issue 14, items 5, 7 and 10): a clear error naming the argument and what was
expected, never a silently wrong result, a numpy/solver message or an AttributeError."""

import numpy as np
import pytest

from certkit.mibp import (
    MLP,
    Budget,
    FeatureBox,
    GurobiLicenseError,
    InputSets,
    LabelFlips,
    MissingValues,
    certified_training,
    certify_predictions,
)
from certkit.mibp.programs.program import Program
from certkit.mibp.programs.solvers import BackendOptions, solve_program


def _binary_case():
    """Binary hinge model on 50 points whose certified accuracy on +-1 labels is far from 0."""
    gen = np.random.default_rng(3)
    X = gen.normal(size=(50, 2))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    res = certified_training(
        MLP.random([2, 6, 1], rng=0),
        X,
        y,
        loss="hinge",
        perturbation=FeatureBox(1e-3),
        epochs=3,
        learning_rate=0.5,
    )
    return X, y, res


def _multiclass_case():
    gen = np.random.default_rng(4)
    X = gen.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0).astype(int)
    res = certified_training(
        MLP.random([2, 5, 3], rng=1), X, y, loss="hinge", perturbation=FeatureBox(1e-3), epochs=2
    )
    return X, y, res


# ------------------------------------------------------------------ item 5: labels outside the label set
def test_certified_accuracy_rejects_labels_the_model_cannot_predict():
    X, y, res = _binary_case()
    cert = certify_predictions(res, X)
    expected = float(np.mean(cert.certified & (cert.prediction == y)))
    assert cert.certified_accuracy(y) == pytest.approx(expected) and expected > 0.3
    assert cert.certified_accuracy(y.astype(float)) == expected  # -1.0 / +1.0 are the same labels
    with pytest.raises(ValueError, match=r"labels y must be -1 or \+1.*2\*y - 1"):
        cert.certified_accuracy((y + 1) // 2)  # 0/1 labels
    with pytest.raises(TypeError, match=r"labels y must be real numbers \(-1 or \+1\), got dtype <U"):
        cert.certified_accuracy(np.where(y > 0, "pos", "neg"))
    with pytest.raises(TypeError, match=r"labels y must be real numbers.*dtype bool"):
        cert.certified_accuracy(y > 0)
    with pytest.raises(TypeError, match=r"labels y must be real numbers.*dtype complex"):
        cert.certified_accuracy(y.astype(complex))


def test_certified_accuracy_multiclass_labels_are_class_indices():
    X, y, res = _multiclass_case()
    cert = certify_predictions(res, X)
    assert cert.n_outputs == 3
    assert cert.certified_accuracy(y) == float(np.mean(cert.certified & (cert.prediction == y)))
    with pytest.raises(ValueError, match=r"labels y must be integers in 0\.\.2"):
        cert.certified_accuracy(y + 1)
    with pytest.raises(ValueError, match=r"labels y must be integers in 0\.\.2"):
        cert.certified_accuracy(y - 0.5)


def test_training_rejects_bool_and_complex_labels():
    X, y, _ = _binary_case()
    model = MLP.random([2, 3, 1], rng=0)
    for bad, dtype in ((y > 0, "bool"), (y.astype(complex), "complex")):
        with pytest.raises(TypeError, match=f"labels y must be real numbers.*{dtype}"):
            certified_training(model, X, bad, loss="hinge", perturbation=FeatureBox(0.01))


def test_attack_checks_its_labels_and_options():
    pytest.importorskip("torch")
    from certkit.mibp.certification.attack import attack_violation

    X, y, res = _binary_case()
    box = FeatureBox(1e-3)
    with pytest.raises(ValueError, match=r"labels y must be -1 or \+1"):
        attack_violation(res, X, (y + 1) // 2, box, restarts=1, steps=1, rng=0)
    with pytest.raises(TypeError, match="labels y must be real numbers"):
        attack_violation(res, X, y.astype(str), box, restarts=1, steps=1, rng=0)
    with pytest.raises(ValueError, match="restarts must be >= 1"):
        attack_violation(res, X, y, box, restarts=0, rng=0)
    with pytest.raises(TypeError, match="result must be a CertifiedTrainingResult"):
        attack_violation(res.nominal, X, y, box, restarts=1, rng=0)
    with pytest.raises(ValueError, match=r"X must have shape \(any, 2\)"):
        attack_violation(res, X[:, :1], y, box, restarts=1, rng=0)
    violation, count = attack_violation(res, X, y, box, restarts=1, steps=1, rng=0)
    assert violation <= 0 and count >= 1


# ------------------------------------------------------------------ item 7: booleans and epochs
def test_sample_labels_flips_only_binary_labels():
    sets = (FeatureBox(0.1) & LabelFlips(2)).sets(np.zeros((4, 2)))
    y = np.array([1.0, -1.0, 1.0, -1.0])
    flipped = sets.sample_labels(y, 0)
    assert np.all(np.isin(flipped, (-1, 1))) and np.sum(flipped != y) <= 2
    with pytest.raises(ValueError, match=r"labels y must be -1 or \+1 to be flipped"):
        sets.sample_labels(np.array([0, 1, 0, 1]), 0)
    with pytest.raises(TypeError, match="y must be a numeric array"):
        sets.sample_labels(np.array([None] * 4), 0)


def test_sample_vertex_must_be_a_bool():
    sets = FeatureBox(0.1).sets(np.zeros((4, 2)))
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="vertex must be a bool"):
            sets.sample(0, vertex=bad)
    X = sets.sample(0, vertex=np.True_)
    assert np.all(np.isin(np.abs(X), [0.1]))
    assert isinstance(InputSets.exact(np.ones((2, 2))).sample(0), np.ndarray)


@pytest.mark.parametrize(
    ("epoch", "error", "message"),
    [
        (True, TypeError, "epoch must be an integer, got bool"),
        ("1", TypeError, "epoch must be an integer, got str"),
        (1.0, TypeError, "epoch must be an integer, got float"),
        (5, ValueError, r"epoch must be in 0\.\.3 \(or -4\.\.-1 from the end\).*got 5"),
        (-5, ValueError, r"epoch must be in 0\.\.3.*got -5"),
    ],
)
def test_epoch_is_checked(epoch, error, message):
    X, _, res = _binary_case()
    with pytest.raises(error, match=message):
        certify_predictions(res, X, epoch=epoch)
    with pytest.raises(error, match=message):
        res.contains(res.nominal, epoch=epoch)


def test_valid_epochs_select_their_box():
    X, _, res = _binary_case()
    assert res.contains(res.nominal_path[0], epoch=0) and res.contains(res.nominal_path[0], epoch=-4)
    assert res.contains(res.nominal_path[2], epoch=np.int64(2))
    first = certify_predictions(res, X, epoch=0)  # the initial model is a point: everything certified
    assert first.certified.all()


# ------------------------------------------------------------------ item 10: unclear errors
def test_contains_checks_the_model():
    _, _, res = _binary_case()
    with pytest.raises(
        ValueError,
        match=r"model has layer sizes \[2, 4, 1\] but the certified boxes are for "
        r"\[2, 6, 1\]",
    ):
        res.contains(MLP.random([2, 4, 1], rng=0))
    with pytest.raises(TypeError, match=r"model must be a certkit\.mibp\.MLP, got ndarray"):
        res.contains(res.nominal.to_vector())


def test_from_vector_checks_the_length_before_reshaping():
    v = MLP.random([2, 3, 1], rng=0).to_vector()
    assert MLP.from_vector(v, [2, 3, 1]) == MLP.random([2, 3, 1], rng=0)
    with pytest.raises(ValueError, match=r"vector has 12 entries but sizes \[2, 3, 1\] need 13"):
        MLP.from_vector(v[:-1], [2, 3, 1])
    with pytest.raises(ValueError, match=r"vector has 13 entries but sizes \[2, 4, 1\] need 17"):
        MLP.from_vector(v, [2, 4, 1])
    with pytest.raises(TypeError, match=r"sizes\[i\] must be an integer"):
        MLP.from_vector(v, [2, 3.0, 1])
    with pytest.raises(TypeError, match="sizes must be a sequence of layer widths"):
        MLP.from_vector(v, 13)


def test_huge_sizes_are_refused_before_allocating():
    with pytest.raises(
        ValueError,
        match=r"sizes=\[2, 1000000000000, 1\] is too large: the network's "
        r"parameters would need about",
    ):
        MLP.random([2, 10**12, 1], rng=0)


def test_overflowing_learning_rate_is_named():
    X, y, _ = _binary_case()
    model = MLP.random([2, 6, 1], rng=0)
    overflow = r"training overflowed.*learning_rate=1e\+300.*smaller learning_rate"
    with pytest.raises(ValueError, match=overflow):
        certified_training(
            model, X, y, loss="hinge", perturbation=FeatureBox(0.01), epochs=3, learning_rate=1e300
        )
    with pytest.raises(ValueError, match="training overflowed"):
        model.train(X, y, epochs=3, learning_rate=1e300)


def _step_program() -> Program:
    """The second step's program of one training point (a 2-8-1 model on a non-trivial parameter box:
    Gurobi's presolve outlasts a 1e-6 s time limit, so it stops without any bound)."""
    from certkit.mibp.programs.encoding import build_decomposed

    X, y, _ = _binary_case()
    X, y = X[:20], y[:20]
    model = MLP.random([2, 8, 1], rng=0)
    box = FeatureBox(0.1)
    first = certified_training(model, X, y, loss="hinge", perturbation=box)
    return build_decomposed(first.lower[1], first.upper[1], box.sets(X), 0, float(y[0]), "hinge", 0.1)


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate:UserWarning")  # cvxpy's, at GUROBI's limit
@pytest.mark.parametrize(
    ("backend", "solver"),
    [
        ("gurobi", None),
        ("scip", None),
        ("milp", None),
        ("lp", None),
        ("milp", "SCIP"),
        ("lp", "SCIP"),
        ("milp", "GUROBI"),
        ("lp", "GUROBI"),
    ],
)
def test_tiny_time_limit_gives_no_solver_bound_and_no_attribute_error(backend, solver):
    module = {"gurobi": "gurobipy", "scip": "pyscipopt", "SCIP": "pyscipopt", "GUROBI": "gurobipy"}
    pytest.importorskip(module.get(solver or backend, "highspy"))
    program = _step_program()
    tasks = [(j, s) for j in range(len(program.objectives)) for s in (1, -1)]
    full = solve_program(program, tasks, BackendOptions(backend, solver=solver))
    early = solve_program(program, tasks, BackendOptions(backend, time_limit=1e-9, solver=solver))
    interval = np.array([program.objective_bounds[j][0 if s > 0 else 1] for j, s in tasks])
    sense = np.array([s for _, s in tasks])
    # sound: never tighter than the full solve, never looser than the interval bound
    assert np.all(sense * early["bounds"] <= sense * full["bounds"] + 1e-7)
    assert np.all(sense * early["bounds"] >= sense * interval)


@pytest.mark.parametrize("formulation", ["decomposed", "hybrid"])
def test_gurobi_tiny_time_limit_in_training(formulation):
    pytest.importorskip("gurobipy")
    X, y, _ = _binary_case()
    model = MLP.random([2, 8, 1], rng=0)
    box = FeatureBox(0.1)
    X, y = X[:20], y[:20]
    res = certified_training(
        model,
        X,
        y,
        loss="hinge",
        perturbation=box,
        epochs=2,
        backend="gurobi",
        formulation=formulation,
        time_limit=1e-6,
    )
    assert res.solver_stats[1].not_optimal == res.solver_stats[1].solves > 0
    ref = certified_training(model, X, y, loss="hinge", perturbation=box, epochs=2)
    assert np.all(res.lower[-1].to_vector() >= ref.lower[-1].to_vector())
    assert np.all(res.upper[-1].to_vector() <= ref.upper[-1].to_vector())


def test_executor_is_checked_even_when_unused():
    X, y, res = _binary_case()
    model = MLP.random([2, 3, 1], rng=0)
    with pytest.raises(ValueError, match=r"executor=100000000 local worker processes is more than"):
        certified_training(model, X, y, loss="hinge", perturbation=FeatureBox(0.1), executor=10**8)
    with pytest.raises(TypeError, match="executor must be None, an int number of workers"):
        certify_predictions(res, X, executor="2")


def test_perturbation_and_network_containers_are_checked():
    with pytest.raises(TypeError, match="levels must be a mapping feature -> sequence of values"):
        MissingValues(np.zeros((2, 2), dtype=bool), 0.0, 1.0, levels=5)
    w, b = MLP.random([2, 3, 1], rng=0).weights, MLP.random([2, 3, 1], rng=0).biases
    with pytest.raises(TypeError, match=r"weights must be a sequence \(one array per layer\), got NoneType"):
        MLP(None, b)
    with pytest.raises(TypeError, match=r"biases must be a sequence \(one array per layer\), got ndarray"):
        MLP(w, b[0])
    with pytest.raises(ValueError, match=r"biases\[0\] has 1 entries but weights\[0\] has 3 rows"):
        MLP(w, b[::-1])


def test_cli_rejects_bad_options_in_one_line(capsys):
    from certkit.cli import main

    for argv, flag in (
        (["--seed", "-1"], "--seed must be >= 0"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["--workers", "100000000"], "--workers must be <= 1024"),
        (["--epsilon", "nan"], "epsilon must be finite"),
        (["--learning-rate", "1e300"], "training overflowed"),
        (["--epochs", "0"], "--epochs must be >= 1"),
    ):
        assert main(["mibp", "--dataset", "iris2", "--hidden", "2", "--epochs", "1", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("certkit mibp: error: ") and flag in err and err.count("\n") == 1, err


def _badly_scaled_program() -> Program:
    """A joint 1-3-3 hinge program whose largest coefficient is moderate (under `MAX_SCALE`) but whose
    smallest are ~1e-14: SoPlex fails on it ("SCIP: error in LP solver!") with the pinned pyscipopt."""
    from certkit.mibp.programs.encoding import build_joint

    model = MLP.random([1, 3, 3], rng=16)
    X = np.array([[-1.17], [0.64], [1.32]])
    return build_joint(model, model, FeatureBox(3000.0).sets(X), np.array([1, 2, 1]), "hinge", 0.1)


def test_scip_error_on_a_badly_scaled_program_keeps_the_interval_bound():
    pytest.importorskip("pyscipopt")
    from certkit.mibp import MAX_SCALE
    from certkit.mibp.programs.solvers import program_scale

    program = _badly_scaled_program()
    assert program_scale(program) < MAX_SCALE  # the scale guard lets it through
    tasks = [(0, 1), (0, -1)]
    out = solve_program(program, tasks, BackendOptions("scip"))
    lo, hi = program.objective_bounds[0]
    # sound whether SCIP fails (interval bound, not optimal) or solves it
    assert lo <= out["bounds"][0] and out["bounds"][1] <= hi
    failed = out["bounds"][0] == lo
    assert out["not_optimal"] >= failed


def test_scip_errors_give_no_solver_bound(monkeypatch):
    pytest.importorskip("pyscipopt")
    from certkit.mibp.programs.solvers import scip

    program = _step_program()
    tasks = [(j, s) for j in range(len(program.objectives)) for s in (1, -1)]
    build = scip.scip_model

    class Failing:
        """A SCIP model whose solve raises like PySCIPOpt on a SCIP error code."""

        def __init__(self, model, message):
            self.model, self.message = model, message

        def __getattr__(self, name):
            return getattr(self.model, name)

        def optimize(self):
            raise Exception(self.message)

    def failing_model(message):
        def make(p, o):
            model, x = build(p, o)
            return Failing(model, message), x

        return make

    for message in ("SCIP: error in LP solver!", "not a SCIP error code"):
        monkeypatch.setattr(scip, "scip_model", failing_model(message))
        if message.startswith("SCIP"):
            out = solve_program(program, tasks, BackendOptions("scip"))
            interval = np.array([program.objective_bounds[j][0 if s > 0 else 1] for j, s in tasks])
            assert np.array_equal(out["bounds"], interval)
            assert out["not_optimal"] == out["solves"] > 0
        else:
            with pytest.raises(Exception, match="not a SCIP error code"):
                solve_program(program, tasks, BackendOptions("scip"))


# ------------------------------------------------------------------ issue 30, items 9 and 16
def test_three_classes_for_one_output_say_so():
    X = np.zeros((6, 2))
    with pytest.raises(ValueError, match=r"have 3 classes but the network has one output.*0..C-1"):
        certified_training(
            MLP.random([2, 3, 1], rng=0),
            X,
            np.array([0, 1, 2, 0, 1, 2]),
            loss="hinge",
            perturbation=FeatureBox(0.1),
        )
    with pytest.raises(ValueError, match=r"2\*y - 1, or use loss='binary_cross_entropy'"):
        certified_training(
            MLP.random([2, 3, 1], rng=0),
            X,
            np.array([0, 1, 1, 0, 1, 0]),
            loss="hinge",
            perturbation=FeatureBox(0.1),
        )


def test_nan_coded_missing_values_are_accepted_where_the_mask_covers_them():
    gen = np.random.default_rng(0)
    X = gen.normal(size=(12, 2))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    mask = np.zeros_like(X, dtype=bool)
    mask[[1, 4], 1] = True
    filled = X.copy()
    filled[mask] = 0.0  # the centre of [-1, 1]
    coded = X.copy()
    coded[mask] = np.nan
    model = MLP.random([2, 3, 1], rng=0)
    for pert in (
        MissingValues(mask, -1.0, 1.0),
        Budget(MissingValues(mask, -1.0, 1.0) & FeatureBox(0.01), 3),
    ):
        a = certified_training(model, coded, y, loss="hinge", perturbation=pert, epochs=2)
        b = certified_training(model, filled, y, loss="hinge", perturbation=pert, epochs=2)
        for lo_a, lo_b in zip(a.lower, b.lower):
            np.testing.assert_array_equal(lo_a.to_vector(), lo_b.to_vector())
        from certkit.mibp.certification.attack import attack_violation

        assert attack_violation(a, coded, y, pert, restarts=1, steps=1, rng=0)[0] <= 0
    coded[0, 0] = np.nan  # not under the mask
    with pytest.raises(ValueError, match=r"X\[0, 0\] is nan and no MissingValues mask covers it"):
        certified_training(model, coded, y, loss="hinge", perturbation=MissingValues(mask, -1.0, 1.0))
    with pytest.raises(ValueError, match="no MissingValues mask covers it"):
        certified_training(model, coded, y, loss="hinge", perturbation=FeatureBox(0.1))


def test_a_gurobi_program_too_large_for_the_licence_is_refused_before_any_solve():
    """Issue 30 item 8: the first step (from a point) fitted and was solved for 40 s before the second
    step's bilinear program was found too large."""
    pytest.importorskip("gurobipy")
    from certkit.mibp.programs.solvers import gurobi

    if not gurobi.gurobi_size_limited():
        pytest.skip("a full Gurobi licence has no size limit")
    gen = np.random.default_rng(0)
    X, y = gen.normal(size=(10, 30)), np.where(gen.random(10) < 0.5, -1.0, 1.0)
    calls = []
    import certkit.mibp.programs.steps as steps

    original = steps.solve_program
    steps.solve_program = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        with pytest.raises(GurobiLicenseError, match="size-limited"):
            certified_training(
                MLP.random([30, 8, 1], rng=0),
                X,
                y,
                perturbation=FeatureBox(0.01),
                loss="hinge",
                epochs=2,
                backend="gurobi",
                formulation="joint",
            )
    finally:
        steps.solve_program = original
    assert calls == []
    # one step from a point has no bilinear term: it still runs
    res = certified_training(
        MLP.random([2, 3, 1], rng=0),
        X[:4, :2],
        y[:4],
        perturbation=FeatureBox(0.01),
        loss="hinge",
        epochs=1,
        backend="gurobi",
        formulation="joint",
    )
    assert res.epochs == 1


@pytest.mark.parametrize("target", [10**20, -(2**60), 2**53 + 1])
def test_a_flip_target_beyond_every_label_names_target(target):
    """Round-6 regression: LabelFlips(k, target=10**20) failed inside NumPy without naming target."""
    with pytest.raises(ValueError, match=r"target must be a label value of the loss .*got"):
        LabelFlips(1, target=target)
    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(ValueError, match=r"LabelFlips\(target=7\) must be one of the labels"):
        certified_training(
            MLP.random([2, 3, 3], rng=0), X, np.arange(6) % 3, perturbation=LabelFlips(1, target=7),
            loss="cross_entropy",
        )
