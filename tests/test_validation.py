"""The shared validation helpers in certkit._validation."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from certkit._validation import (
    as_numpy,
    check_allocation,
    check_array,
    check_bool,
    check_in_options,
    check_integer,
    check_is_fitted,
    check_level,
    check_nonnegative,
    check_positive,
    check_probability,
    check_rng,
    check_same_length,
    check_squares_fit,
    memory_limit,
    seed_from_rng,
)


# ---------------------------------------------------------------- as_numpy
def test_as_numpy_refuses_sparse_input_saying_how_to_densify():
    import scipy.sparse as sp

    for sparse in (sp.csr_matrix(np.eye(3)), sp.coo_array(np.eye(3))):
        with pytest.raises(TypeError, match=rf"^X is a scipy.sparse {type(sparse).__name__}; sparse input is "
                                            r"not supported: pass a dense array \(X.toarray\(\)"):
            check_array(sparse, "X")


def test_check_squares_fit_names_the_columns_to_rescale():
    X = np.ones((4, 3))
    check_squares_fit(X, "X", range(3))
    check_squares_fit(np.zeros((4, 3)), "X", range(3))  # zeros are a constant, not a scale problem
    X[:, 1] = 1e-200
    with pytest.raises(ValueError, match=r"^X has all magnitudes below 1e-150 in column\(s\) 1; rescale"):
        check_squares_fit(X, "X", range(3))
    check_squares_fit(X, "X", [0, 2])
    X[0, 2] = 1e150
    with pytest.raises(ValueError, match=r"^X has magnitudes above 1e100 in column\(s\) 2; rescale"):
        check_squares_fit(X, "X", [0, 2])


def test_as_numpy_passes_arrays_and_lists():
    arr = np.arange(3.0)
    assert as_numpy(arr, "x") is arr
    assert np.array_equal(as_numpy([1, 2], "x"), [1, 2])
    assert as_numpy(2.5, "x").shape == ()


def test_as_numpy_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, 2.0]], requires_grad=True)
    out = as_numpy(t, "x")
    assert isinstance(out, np.ndarray) and out.shape == (1, 2)
    assert np.array_equal(out, [[1.0, 2.0]])
    param = torch.nn.Parameter(torch.ones(2))  # a tensor subclass from torch.nn
    assert np.array_equal(as_numpy(param, "w"), [1.0, 1.0])
    assert check_array(torch.arange(4), "idx", dtype=int).dtype == np.int64


def test_as_numpy_rejects_non_tensor_torch_objects():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="x must be an array or a tensor, got device"):
        as_numpy(torch.device("cpu"), "x")


@pytest.mark.parametrize("value", ["abc", b"abc", None])
def test_as_numpy_rejects_strings_and_none(value):
    with pytest.raises(TypeError, match="x must be array-like"):
        as_numpy(value, "x")


def test_as_numpy_rejects_ragged_input():
    with pytest.raises(TypeError, match="x must be array-like"):
        as_numpy([[1.0], [1.0, 2.0]], "x")


# ---------------------------------------------------------------- check_array
def test_check_array_converts_to_float64():
    out = check_array([1, 2, 3], "x")
    assert out.dtype == np.float64 and np.array_equal(out, [1.0, 2.0, 3.0])
    same = np.zeros(3)
    assert check_array(same, "x") is same  # no copy when already float64


def test_check_array_ndim_and_shape():
    assert check_array(np.zeros((2, 3)), "x", ndim=2).shape == (2, 3)
    assert check_array(np.zeros(3), "x", ndim=(1, 2)).shape == (3,)
    with pytest.raises(ValueError, match=r"x must be 1-D or 2-D, got an array of shape \(1, 1, 1\)"):
        check_array(np.zeros((1, 1, 1)), "x", ndim=(1, 2))
    assert check_array(np.zeros((4, 3)), "x", shape=(None, 3)).shape == (4, 3)
    with pytest.raises(ValueError, match=r"x must have shape \(any, 2\), got \(4, 3\)"):
        check_array(np.zeros((4, 3)), "x", shape=(None, 2))
    with pytest.raises(ValueError, match=r"x must have shape \(any, 3\), got \(3,\)"):
        check_array(np.zeros(3), "x", shape=(None, 3))


def test_check_array_empty():
    with pytest.raises(ValueError, match="x must not be empty"):
        check_array([], "x")
    assert check_array([], "x", allow_empty=True).size == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_array_rejects_non_finite(bad):
    with pytest.raises(ValueError, match=r"x must be finite \(no NaN or inf\)"):
        check_array([1.0, bad], "x")


def test_check_array_finite_false_keeps_nan():
    out = check_array([1.0, np.nan, np.inf], "x", finite=False)
    assert np.isnan(out[1]) and np.isinf(out[2])


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.array([True, False]), "x must be a real numeric array, got dtype bool"),
        (np.array([1 + 2j]), "x must be a real numeric array, got dtype complex128"),
        (np.array(["a"]), "x must be a real numeric array"),
        (np.array([1, "a"], dtype=object), "x must be a numeric array, got an array of Python objects"),
    ],
)
def test_check_array_rejects_non_real(value, match):
    with pytest.raises(TypeError, match=match):
        check_array(value, "x")


def test_check_array_int_dtype():
    out = check_array(np.array([1, 2], dtype=np.int32), "k", dtype=int)
    assert out.dtype == np.int64
    out = check_array([1.0, -3.0], "k", dtype=int)  # integer-valued floats are accepted
    assert out.dtype == np.int64 and np.array_equal(out, [1, -3])
    with pytest.raises(TypeError, match="k must contain integers, got dtype float64"):
        check_array([1.5], "k", dtype=int)
    with pytest.raises(TypeError, match="k must contain integers, got dtype float64"):
        check_array([np.nan], "k", dtype=int)
    with pytest.raises(TypeError, match="k must contain integers, got dtype bool"):
        check_array([True], "k", dtype=int)


def test_check_array_int_dtype_rejects_values_beyond_int64():
    # used to wrap silently to garbage values
    with pytest.raises(ValueError, match="k has integer values outside the int64 range"):
        check_array([1e20], "k", dtype=int)
    with pytest.raises(ValueError, match="k has integer values outside the int64 range"):
        check_array(np.array([2**64 - 1], dtype=np.uint64), "k", dtype=int)
    assert check_array(np.array([7], dtype=np.uint64), "k", dtype=int)[0] == 7


def test_check_array_bool_dtype():
    mask = np.array([True, False])
    assert check_array(mask, "m", dtype=bool) is mask
    with pytest.raises(TypeError, match="m must be a boolean array, got dtype int64"):
        check_array(np.array([1, 0]), "m", dtype=bool)


def test_check_array_dtype_none_keeps_dtype():
    assert check_array(np.array([1, 2], dtype=np.int16), "x", dtype=None).dtype == np.int16


# ---------------------------------------------------------------- scalar checks
@pytest.mark.parametrize("value", [0.5, 1e-9, 1 - 1e-9, np.float32(0.25), np.float64(0.9)])
def test_check_level_accepts(value):
    assert check_level(value) == float(value)
    assert type(check_level(value)) is float


@pytest.mark.parametrize("value", [0.0, 1.0, -0.1, 1.1, 95])
def test_check_level_rejects_out_of_range(value):
    with pytest.raises(ValueError, match="confidence_level must lie strictly between 0 and 1"):
        check_level(value)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_check_level_rejects_non_finite(value):
    with pytest.raises(ValueError, match="confidence_level must be finite"):
        check_level(value)


@pytest.mark.parametrize("value", [True, np.True_, "0.9", None, [0.9], np.array(0.9)])
def test_scalar_checks_reject_non_numbers_and_bools(value):
    for check in (check_level, check_nonnegative, check_positive):
        with pytest.raises(TypeError, match="alpha must be a real number"):
            check(value, "alpha")
    with pytest.raises(TypeError, match="alpha must be a real number"):
        check_probability(value, "alpha")


def test_check_level_custom_name():
    with pytest.raises(ValueError, match="coverage must lie strictly"):
        check_level(2.0, "coverage")


def test_check_probability():
    assert check_probability(0.0, "p") == 0.0 and check_probability(1.0, "p") == 1.0
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\], got 1.5"):
        check_probability(1.5, "p")
    with pytest.raises(ValueError, match=r"p must lie in \(0, 1\), got 0.0"):
        check_probability(0.0, "p", closed=False)
    assert check_probability(0.5, "p", closed=False) == 0.5
    with pytest.raises(ValueError, match="p must be finite"):
        check_probability(np.nan, "p")


def test_check_nonnegative_and_positive():
    assert check_nonnegative(0, "radius") == 0.0
    assert check_nonnegative(np.int64(3), "radius") == 3.0
    with pytest.raises(ValueError, match=r"radius must be >= 0, got -0\.5"):
        check_nonnegative(-0.5, "radius")
    with pytest.raises(ValueError, match="radius must be finite"):
        check_nonnegative(np.inf, "radius")
    assert check_positive(1e-300, "sigma") == 1e-300
    with pytest.raises(ValueError, match=r"sigma must be > 0, got 0\.0"):
        check_positive(0.0, "sigma")
    with pytest.raises(ValueError, match="sigma must be > 0"):
        check_positive(-2, "sigma")
    with pytest.raises(ValueError, match="sigma must be finite"):
        check_positive(np.nan, "sigma")


def test_check_integer():
    assert check_integer(5, "n") == 5
    assert type(check_integer(np.int32(5), "n")) is int
    assert check_integer(5, "n", minimum=5, maximum=5) == 5
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_integer(0, "n", minimum=1)
    with pytest.raises(ValueError, match="n must be <= 10, got 11"):
        check_integer(11, "n", maximum=10)
    for bad in (5.0, True, np.bool_(False), "5", None, np.array(5)):
        with pytest.raises(TypeError, match="n must be an integer"):
            check_integer(bad, "n")


def test_check_in_options():
    assert check_in_options("gaussian", "noise", ("gaussian", "uniform")) == "gaussian"
    assert check_in_options("a", "mode", iter(["a", "b"])) == "a"  # any iterable of options
    expected = r"unknown noise 'laplace'; expected one of \('gaussian', 'uniform'\)"
    with pytest.raises(ValueError, match=expected):
        check_in_options("laplace", "noise", ("gaussian", "uniform"))
    with pytest.raises(TypeError, match="noise must be one of"):
        check_in_options(None, "noise", ("gaussian",))
    with pytest.raises(ValueError, match="unknown noise"):
        check_in_options("Gaussian", "noise", ("gaussian",))  # case-sensitive


def test_check_bool():
    assert check_bool(True, "flag") is True
    assert check_bool(np.bool_(False), "flag") is False
    for bad in (1, 0, "yes", None, 1.0):
        with pytest.raises(TypeError, match="flag must be a bool"):
            check_bool(bad, "flag")


def test_check_same_length():
    assert check_same_length(("X", np.zeros((4, 2))), ("y", np.zeros(4))) == 4
    assert check_same_length(("X", [1, 2, 3])) == 3
    with pytest.raises(ValueError, match="inconsistent numbers of samples: X has 4, y has 3"):
        check_same_length(("X", np.zeros((4, 2))), ("y", np.zeros(3)))


# ---------------------------------------------------------------- rng
def test_check_rng_int_seed_is_deterministic():
    a = check_rng(42).random(5)
    b = check_rng(42).random(5)
    assert np.array_equal(a, b)
    assert np.array_equal(check_rng(np.int64(42)).random(5), a)
    assert not np.array_equal(check_rng(43).random(5), a)


def test_check_rng_returns_the_same_generator():
    gen = np.random.default_rng(0)
    assert check_rng(gen) is gen
    first = check_rng(gen).random()
    second = check_rng(gen).random()
    assert first != second  # the caller's stream advances


def test_check_rng_none_gives_fresh_generators():
    a, b = check_rng(None), check_rng(None)
    assert isinstance(a, np.random.Generator)
    assert a.integers(2**62) != b.integers(2**62)


@pytest.mark.parametrize("bad", [1.5, "0", True, np.random.RandomState(0), [0]])
def test_check_rng_rejects_other_types(bad):
    with pytest.raises(TypeError, match=r"rng must be None, an int seed or a numpy\.random\.Generator"):
        check_rng(bad)


def test_check_rng_rejects_negative_seed():
    with pytest.raises(ValueError, match="rng seed must be >= 0, got -1"):
        check_rng(-1)


def test_seed_from_rng():
    seed = seed_from_rng(7)
    assert type(seed) is int and 0 <= seed < 2**63
    assert seed_from_rng(7) == seed
    gen = np.random.default_rng(7)
    assert seed_from_rng(gen) == seed
    assert seed_from_rng(gen) != seed  # advances the generator
    seeds = {seed_from_rng(s) for s in range(200)}
    assert len(seeds) == 200


# ---------------------------------------------------------------- check_is_fitted
class _Estimator:
    pass


def test_check_is_fitted():
    est = _Estimator()
    expected = r"This _Estimator instance is not fitted yet; call calibrate\(\.\.\.\) first"
    with pytest.raises(NotFittedError, match=expected):
        check_is_fitted(est, "threshold_")
    with pytest.raises(NotFittedError, match=r"call fit\(\.\.\.\) first"):
        check_is_fitted(est, ["a_", "b_"], method="fit")
    est.a_ = 1
    with pytest.raises(NotFittedError):
        check_is_fitted(est, ["a_", "b_"])
    est.b_ = 2
    check_is_fitted(est, ["a_", "b_"])
    check_is_fitted(est, "a_")
    assert issubclass(NotFittedError, ValueError)  # so callers catching ValueError see it too


def test_check_allocation_names_argument_and_estimate():
    limit = memory_limit()
    assert limit > 2**27  # at least 128 MiB on any machine running the tests
    check_allocation(limit / 2, "n_parts", 10, what="the vote matrix")
    match = r"n_parts=100000000 is too large: the vote matrix would need about [0-9.]+ [GT]iB, more than"
    with pytest.raises(ValueError, match=match):
        check_allocation(2.0**40 if limit < 2**40 else 2.0 * limit, "n_parts", 10**8, what="the vote matrix")
