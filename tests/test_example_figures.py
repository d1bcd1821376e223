"""The examples' figures are readable: ticks that mean something, legends that do not cover data."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses need their module registered
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_circuits_digits_bar_chart_has_digit_ticks_and_a_legend_clear_of_the_bars(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    example = _load("circuits_digits")
    rng = np.random.default_rng(0)
    circuits = [
        example.ClassCircuits(digit, {}, rng.random(32), rng.integers(-1, 7, 32)) for digit in range(10)
    ]
    saved = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (saved.append(fig), original(fig, *a, **k)))
    example.plot(circuits, str(tmp_path / "c.png"))
    fig = saved[0]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    bars_ax = fig.axes[1]
    assert [t.get_text() for t in bars_ax.get_xticklabels()] == [str(d) for d in range(10)]
    ticks = bars_ax.get_xticks()
    for digit, tick in enumerate(ticks):  # each tick sits in the middle of its digit's group of bars
        group = [p for p in bars_ax.patches if digit - 0.05 <= p.get_x() + p.get_width() / 2 < digit + 0.95]
        assert len(group) == 4  # radii 0, 1, 2, 5
        lo, hi = min(p.get_x() for p in group), max(p.get_x() + p.get_width() for p in group)
        assert tick == pytest.approx((lo + hi) / 2)
    renderer = canvas.get_renderer()
    legend = bars_ax.get_legend().get_window_extent(renderer)
    for patch in bars_ax.patches:
        assert not legend.overlaps(patch.get_window_extent(renderer))
