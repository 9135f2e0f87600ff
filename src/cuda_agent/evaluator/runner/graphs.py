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
    reset_generator_after_failed_capture()


def reset_generator_after_failed_capture() -> None:
    """The current device's default random generator given a fresh state with the same seed and offset.

    Rationale (seen on the H200, torch 2.11): a capture begins by putting that generator's state into capture mode
    and only a successful end takes it out, so after a failed capture every later random draw on the device
    (``torch.randn(..., device="cuda")``) raised "Offset increment outside graph capture" for the rest of the
    process: one reference that cannot be captured broke every evaluation after it in a warm judge. The failed
    graph keeps its reference to the old state, so it can still be destroyed cleanly."""
    try:
        generator = torch.cuda.default_generators[torch.cuda.current_device()]
        fresh = torch.Generator(device=generator.device)
        fresh.set_state(generator.get_state())
        generator.graphsafe_set_state(fresh)
    except BaseException:  # noqa: BLE001 - a torch without these calls keeps its own behaviour
        pass
