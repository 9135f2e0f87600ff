"""Cleaning up after a CUDA-graph capture that failed, for the runner and for the judge's own baselines.

Standalone (torch only): the runner package runs in the candidate's sandbox.
"""
from __future__ import annotations

from typing import Any

import torch


def end_failed_capture(graph: Any, stream: Any) -> None:
    """After a capture that raised: the capture ended (where the failure left it open) and the process back on
    ``stream``, the stream it was on before. Rationale: a failure inside `torch.cuda.graph` can skip its own clean-up
    and leave the process on the capture stream, where the host-launched calls that follow would run unordered
    against work launched on the default stream."""
    try:
        if torch.cuda.is_current_stream_capturing():
            graph.capture_end()
    except BaseException:  # noqa: BLE001 - ending a broken capture may raise again; the stream is what matters
        pass
    torch.cuda.set_stream(stream)
    try:
        torch.cuda.synchronize()
    except BaseException:  # noqa: BLE001 - a sticky error shows in the next call instead
        pass
