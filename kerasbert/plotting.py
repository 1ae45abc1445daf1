"""Matplotlib figures that leave pyplot alone, saved through a temporary
name. A leaf module: models (attention maps) and runs (training curves)
both draw with it."""

from kerasbert.io_utils import atomic_file


def new_figure(**kwargs):
    """A matplotlib `Figure` outside pyplot: no backend is chosen or
    changed (a notebook's inline plots keep working) and nothing is left
    open in pyplot's figure list. Show one in a notebook with `display(fig)`."""
    from matplotlib.figure import Figure  # lazy: matplotlib is imported only to draw

    return Figure(**kwargs)


def save_figure_atomically(fig, path):
    """Saves a matplotlib figure as PNG through a temporary name."""
    with atomic_file(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100)
