"""Exact labels read from disk for training (the shell half of ``dabjax.training.supervised``): which set's
positions stay out of them, so that the set that measures a run stays unseen. ``dabjax pretrain`` and
``train.exact_labels`` use it.
"""

from __future__ import annotations

from dabjax import package_data
from dabjax.solvers import labelled


def set_to_leave_out(exclude: str | None, geometry) -> tuple[labelled.LabelledSet | None, str]:
    """``(set, name)``: the set whose positions stay out of training on ``geometry``'s labels: ``exclude`` (a
    built-in set's name or a file; ``"none"``: no set), else the board's built-in set (None, "" for none).
    Raises FileNotFoundError, or ValueError for a set of another board."""
    if exclude is not None and exclude.lower() == "none":
        return None, ""
    if exclude is not None:
        excluded, name = labelled.load(package_data.labelled_set_file(exclude)), exclude
    else:
        builtin = package_data.builtin_sets().get(geometry.name)
        if builtin is None or not builtin.exists():
            return None, ""
        excluded, name = labelled.load(builtin), f"the built-in set {geometry.name}"
    if (excluded.rows, excluded.cols) != (geometry.rows, geometry.cols):
        raise ValueError(f"a {excluded.rows}x{excluded.cols} set; the labels are {geometry.name}")
    return excluded, name


def left_out(dropped: int, name: str) -> str:
    """What the source record says of the positions left out."""
    return f"{dropped} positions also in {name} left out" if name else "nothing left out"
