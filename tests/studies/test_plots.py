"""The evaluation's plots say what they show: the DSE Pareto plot has no offset y axis (a
one-in-a-million spread no longer fills the height), breakdown.png has a title and one legend off
the bars, and sensitivity.png marks on each panel that workload's own fitted compute factor."""

from types import SimpleNamespace

import pytest

import studies.dse as dse
import studies.evaluation as evaluation
from sysmodel.workloads import WORKLOADS


@pytest.fixture
def captured(monkeypatch):
    """The figure a plot function would save (not written)."""
    figures = []

    def keep(fig, path, **kwargs):
        figures.append(fig)
    monkeypatch.setattr(dse, "save_png", keep)
    monkeypatch.setattr(evaluation, "save_png", keep)
    return figures


def test_pareto_plot_has_no_offset_and_a_visible_spread(captured, tmp_path):
    design = lambda name, area, t: SimpleNamespace(design=name, area_mm2=area, time_per_sample_s=t,
                                                   in_switch=False)
    # two designs one part in a million apart: the axis must not blow that up to its full height
    designs = [design("a", 1000.0, 0.2373), design("b", 2000.0, 0.2373 * (1 + 1e-6))]
    dse._plot(tmp_path / "p.png", "w", SimpleNamespace(designs=designs, pareto=["a"], reference=None))
    ax = captured[0].axes[0]
    captured[0].canvas.draw()
    assert ax.yaxis.get_major_formatter().get_offset() == ""
    low, high = ax.get_ylim()
    assert (high - low) >= 0.02 * 237.3 * 0.99


def _fake_result(factors):
    scales = [1.0, 10.0, 100.0]
    per = {wl: {f: [1.0, 1.2, 1.5] for f in evaluation.PAPER_SPEEDUP} for wl in WORKLOADS}
    sens = {p: {"scales": scales, **per} for p in ("overlap", "serialised")}
    fitted = {wl: SimpleNamespace(compute_scale=k, anchor=f"{wl}/fred-c") for wl, k in factors.items()}
    breakdown = {cat: 1.0 for cat in evaluation.CATEGORIES}
    return SimpleNamespace(compute_sensitivity=sens, calibration=SimpleNamespace(scale=7.0, anchor="resnet-152/fred-c"),
                           calibration_paper=SimpleNamespace(fitted=fitted),
                           iteration=lambda wl, f: SimpleNamespace(breakdown=breakdown))


def _vertical_lines(ax):
    return sorted({line.get_xdata()[0] for line in ax.get_lines()
                   if len(set(line.get_xdata())) == 1 and len(line.get_xdata()) == 2})


def test_sensitivity_marks_each_panels_own_fit(captured, tmp_path):
    factors = {wl: 2.0 + 3 * i for i, wl in enumerate(WORKLOADS)}
    evaluation._plot_sensitivity(tmp_path / "s.png", _fake_result(factors))
    for ax, wl in zip(captured[0].axes, WORKLOADS):
        assert _vertical_lines(ax) == [factors[wl]], wl
    assert captured[0].get_suptitle()


def test_breakdown_has_a_title_and_one_legend_outside_the_panels(captured, tmp_path):
    evaluation._plot_breakdown(tmp_path / "b.png", _fake_result({}))
    fig = captured[0]
    assert fig.get_suptitle() and len(fig.legends) == 1
    assert all(ax.get_legend() is None for ax in fig.axes)
