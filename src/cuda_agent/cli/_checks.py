"""Checks for numeric flags that click's own ranges miss: click's FloatRange lets NaN through (every comparison
with NaN is false), and a NaN or infinite limit later breaks whatever waits on it."""
from __future__ import annotations

import math

import typer


def finite(value: float | None, flag: str, low: float, high: float, *, low_excluded: bool = False) -> None:
    """Raise `typer.BadParameter` (exit status 2, naming ``flag``) unless ``value`` is None or a finite number in
    [low, high] ((low, high] with ``low_excluded``)."""
    if value is None:
        return
    below = value <= low if low_excluded else value < low
    if not math.isfinite(value) or below or value > high:
        bracket = "(" if low_excluded else "["
        raise typer.BadParameter(f"must be finite and in {bracket}{low:g}, {high:g}], got {value}", param_hint=flag)
