"""Checks of flags shared by the commands: numbers that click's own ranges miss (click's FloatRange lets NaN
through, every comparison with NaN being false, and a NaN or infinite limit later breaks whatever waits on it),
and evaluator settings reported under the flag that set them rather than the Python field."""
from __future__ import annotations

import math
from typing import Any, Mapping

import typer

from cuda_agent.errors import ConfigError


def finite(value: float | None, flag: str, low: float, high: float, *, low_excluded: bool = False) -> None:
    """Raise `typer.BadParameter` (exit status 2, naming ``flag``) unless ``value`` is None or a finite number in
    [low, high] ((low, high] with ``low_excluded``)."""
    if value is None:
        return
    below = value <= low if low_excluded else value < low
    if not math.isfinite(value) or below or value > high:
        bracket = "(" if low_excluded else "["
        raise typer.BadParameter(f"must be finite and in {bracket}{low:g}, {high:g}], got {value}", param_hint=flag)


def eval_config(flags: Mapping[str, str], **fields: Any) -> Any:
    """``EvalConfig(**fields)``. A value it refuses is a `typer.BadParameter` (exit status 2) naming the flag that
    ``flags`` maps its field to (``{"mode": "--mode"}``), not ``EvalConfig.mode``; other errors pass through."""
    from cuda_agent.evaluator.config import EvalConfig

    try:
        return EvalConfig(**fields)
    except ConfigError as exc:
        message = str(exc)
        for field, flag in flags.items():
            prefix = f"EvalConfig.{field} "
            if message.startswith(prefix):
                raise typer.BadParameter(message[len(prefix):], param_hint=flag) from exc
        raise
