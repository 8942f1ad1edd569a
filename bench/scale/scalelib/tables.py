"""Table helpers: ratio, mean, number formatting, aligned columns, a point's two systems."""


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b not in (None, 0) else "-"


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def fmt(x, d=0):
    return "-" if x is None else f"{x:.{d}f}"


def table(rows):
    widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).rjust(w) for v, w in zip(r, widths)) for r in rows)


def systems_at(recs, xkey, x):
    """The Epoch and the etcd record of the point where recs[xkey] == x ({} when missing)."""
    e = next((r for r in recs if r[xkey] == x and r["system"] == "epoch"), {})
    d = next((r for r in recs if r[xkey] == x and r["system"] == "etcd"), {})
    return e, d


def dig(r, *path):
    """r[path[0]][path[1]]..., None where a level is missing."""
    for p in path:
        r = r.get(p) if isinstance(r, dict) else None
    return r


def both(e, d, key):
    """'epoch/etcd' of one field, as the elections and ok columns show it."""
    return f"{e.get(key)}/{d.get(key)}"
