"""Plot helpers (matplotlib, Debian python3-matplotlib): one PNG per curve, Epoch blue, etcd red."""

import os

from scalelib.util import log

STYLE = {"epoch": dict(marker="o", color="tab:blue"), "etcd": dict(marker="s", color="tab:red")}


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (logged) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib (Debian python3-matplotlib): no plots")
        return None
    return plt


def series(recs, xkey, f):
    """(system, xs, ys) per system, sorted by x, where f(rec) is not None."""
    for s in ("epoch", "etcd"):
        pts = sorted((r[xkey], f(r)) for r in recs if r["system"] == s and f(r) is not None)
        if pts:
            yield s, [p[0] for p in pts], [p[1] for p in pts]


def save(plt, fig, out, name):
    """Writes out/name at 90 dpi, closes fig, returns the path."""
    path = os.path.join(out, name)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
