"""The spectral-radius explorer and the adjoint norms it draws, (7.11)-(7.12)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from seqlib.diagrams.widgets import adjoint_norms, plot_adjoint_norms, spectral_radius_explorer  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_linear_regime_is_geometric():
    """Tiny inputs: tanh is linear, the adjoints shrink or grow like radius^(T - t)."""
    T = 40
    for radius in (0.5, 1.5):
        ratios = adjoint_norms(radius, T=T, input_scale=1e-12)
        assert ratios.shape == (T,) and ratios.dtype == torch.float64
        assert ratios[0] == 1
        # the growth rate per step tends to the spectral radius
        rate = (ratios[-1] / ratios[T // 2]) ** (1 / (T - 1 - T // 2))
        assert abs(rate - radius) < 0.05 * radius
    assert adjoint_norms(0.5, T=T, input_scale=1e-12)[-1] < 1e-10
    assert adjoint_norms(1.5, T=T, input_scale=1e-12)[-1] > 1e5


def test_tiny_inputs_make_tanh_the_linear_rnn():
    """With inputs of size 1e-12, tanh's sigma_dot is 1 to round-off: the adjoints are those
    of the identity activation, the linear RNN of (7.12)."""
    linear = adjoint_norms(1.2, T=30, nonlinearity="identity")
    torch.testing.assert_close(adjoint_norms(1.2, T=30, nonlinearity="tanh"), linear,
                               rtol=1e-9, atol=0)


def test_tanh_saturation_makes_even_large_radius_vanish():
    """Unit inputs: S_h' <= 1 shrinks every step, radius 1.5 no longer explodes."""
    ratios = adjoint_norms(1.5, T=50, input_scale=1.0)
    assert ratios[-1] < 1e-2
    assert ratios[-1] < adjoint_norms(1.5, T=50, input_scale=1e-12)[-1] * 1e-6


def test_adjoint_norms_rejects_bad_arguments():
    with pytest.raises(ValueError, match="radius"):
        adjoint_norms(-1.0)
    with pytest.raises(ValueError, match="T must"):
        adjoint_norms(1.0, T=0)
    with pytest.raises(ValueError, match="nonlinearity"):
        adjoint_norms(1.0, nonlinearity="sigmoid")


def test_plot_adjoint_norms_draws_curve_and_reference():
    fig, ax = plt.subplots()
    results = plot_adjoint_norms([0.5, 1.0], T=10, ax=ax)
    assert set(results) == {0.5, 1.0}
    assert len(ax.lines) == 2 * 2 + 1  # a curve and a dotted reference per radius, a key
    assert ax.get_yscale() == "log"
    assert all(t.get_fontsize() >= 9 for t in ax.get_legend().get_texts())


def test_explorer_redraws_on_slider_changes():
    import ipywidgets

    w = spectral_radius_explorer(T=30)
    assert isinstance(w, ipywidgets.VBox)
    controls = {c.description: c for c in w.children if hasattr(c, "description")}
    assert {"radius", "T", "input scale", "S_h"} <= set(controls)
    assert "identity" in controls["S_h"].options
    output = w.children[-1]
    assert isinstance(output, ipywidgets.Output) and len(output.outputs) == 1  # first figure
    controls["radius"].value = 0.5  # observers redraw at once
    assert w.result.shape == (30,) and w.result[-1] < 1e-6
    controls["radius"].value = 1.5
    controls["T"].value = 20
    assert w.result.shape == (20,) and w.result[-1] > 1e2
    controls["input scale"].value = 1.0  # tanh saturates: even radius 1.5 vanishes
    assert w.result[-1] < 1
    assert len(output.outputs) == 1  # each redraw replaces the figure
    assert output.outputs[0]["output_type"] == "display_data"
    assert not plt.get_fignums()  # and closes it
