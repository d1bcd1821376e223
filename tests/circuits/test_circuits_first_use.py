"""Issue 23: `at_radius` returns a certificate with `summary()` (the old tuple unpacking still works, with a
DeprecationWarning), and a `discover` defined inside the script's main guard is refused before any worker
starts, with advice that is true."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from certkit.circuits import CircuitCertificate, ScoreRule, certify_circuit


@pytest.fixture(scope="module")
def certificate():
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(3, 1, (100, 5)), rng.normal(0, 1, (100, 15))], axis=1)
    return certify_circuit(ScoreRule(scores, threshold=1.5), subsample_size=20, n_subsamples=1000, radius=0,
                           rng=0)


def test_at_radius_is_a_certificate_with_a_summary(certificate):
    at = certificate.at_radius(3)
    assert isinstance(at, CircuitCertificate) and at.radius == 3
    decided = certificate.certified_radius >= 3
    assert np.array_equal(at.included, decided & (certificate.lower > 0.5))
    assert np.array_equal(at.abstained, ~decided)
    assert np.array_equal(at.certified_radius, certificate.certified_radius)
    text = at.summary()
    assert "threat / radius" in text and "edit / 3" in text
    assert certificate.at_radius(0).radius == 0 and certificate.radius == 0  # the original is unchanged


def test_at_radius_tuple_unpacking_is_deprecated_but_works(certificate):
    at = certificate.at_radius(2)
    with pytest.warns(DeprecationWarning, match=r"use \.included, \.excluded and \.abstained"):
        inc, exc, abst = certificate.at_radius(2)
    assert np.array_equal(inc, at.included) and np.array_equal(exc, at.excluded)
    assert np.array_equal(abst, at.abstained)
    with pytest.warns(DeprecationWarning):
        assert np.array_equal(certificate.at_radius(2)[0], at.included)


SCRIPT = textwrap.dedent('''
    import numpy as np
    import certkit
    from certkit.parallel import _check_sendable


    def module_level(X_subset):
        return np.asarray(X_subset).mean(axis=0) > 2.0


    if __name__ == "__main__":
        def discover(X_subset):
            return np.asarray(X_subset).mean(axis=0) > 2.0

        X = np.random.default_rng(0).gamma(2.0, size=(40, 8))
        try:
            certkit.certify_circuit(discover, X, subsample_size=10, n_subsamples=20, radius=1,
                                    confidence_level=0.9, rng=0, executor=2, progress=False)
        except TypeError as exc:
            print("ERROR", exc)
        _check_sendable(module_level)  # a module-level discover is accepted
        print("MODULE LEVEL OK")
''')


def test_discover_inside_the_main_guard_is_refused_with_true_advice(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "ERROR 'discover' is defined inside the `if __name__ == \"__main__\":` block" in out.stdout
    assert "Define 'discover' at module level, above the block" in out.stdout
    assert "MODULE LEVEL OK" in out.stdout
