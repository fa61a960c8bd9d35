"""Fig. 7.6, the flow of backpropagation through time, drawn by seqlib.diagrams.bptt."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from seqlib.diagrams.bptt import bptt_flow  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


@pytest.mark.parametrize("T, steps", [(None, ["1", "2", "T-1", "T"]), (1, ["1"]),
                                      (3, ["1", "2", "3"]), (9, ["1", "2", "8", "9"])])
def test_one_state_adjoint_and_input_per_step(T, steps):
    fig = bptt_flow(T)
    assert isinstance(fig, Figure)
    drawn = texts(fig)
    for name in ("h", r"\zeta", "x", r"\hat{y}"):
        found = [s for s in drawn if s.startswith(f"${name}^{{")]
        assert found == [rf"${name}^{{\langle {t} \rangle}}$" for t in steps], name
    assert drawn.count(r"$\cdots$") == (2 if len(steps) < (T or 5) else 0)
    assert {"$W$", "$g_W$"} <= set(drawn)
    assert any(s.startswith("Loss $C$") for s in drawn)


def test_bad_length():
    for T in (0, -2, 2.5, True, "T"):
        with pytest.raises(ValueError, match="T must be a positive int"):
            bptt_flow(T)
