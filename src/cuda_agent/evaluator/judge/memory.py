"""Whose fault a judge's out-of-memory error is, once the candidate's code has loaded.

The judge keeps what it needs on the device before any candidate code loads: its buffer sets, the reference's own
allocations (cached by its allocator from the calibration runs) and the room for a whole request's output copies
(`Session.reserve_request_memory`). What it allocates after that is small or of shapes it has not seen (a shape
variant). A candidate that takes the device's free memory once it has loaded (on H200, 2026-12-03:
`precision_probe_starved` kept all but 700 MiB) made the judge's first output copy fail, and the evaluation ended as
the judge's own `eval_error`: a label that a training loop may drop or retry as an infrastructure fault, so the cheat
was never scored as the candidate's.

The rule: a judge out of memory after the candidate loaded is the candidate's (stage ``out_of_memory``, reward -1)
where the device memory used outside the judge's process grew, since just before the load, by more than
`CANDIDATE_SHARE` of what was free then; otherwise it stays the judge's (``eval_error``). Memory outside the judge's
process is the device's used memory less the judge's allocator's reservation: the candidate's process, and the
spare processes a warm worker starts (a CUDA context each, well under the share on any GPU this runs on).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

CANDIDATE_SHARE = 0.5   # the candidate may grow into this share of the memory free before it loaded


@dataclass(frozen=True)
class DeviceUse:
    """Bytes on one device: free, and used outside this process's allocator."""

    free: int
    outside: int


def device_use(device: torch.device) -> DeviceUse | None:
    """The device's free memory and the memory used outside this process's allocator; None off a GPU."""
    if device.type != "cuda":
        return None
    try:
        free, total = torch.cuda.mem_get_info(device)
        return DeviceUse(int(free), int(total - free - torch.cuda.memory_reserved(device)))
    except RuntimeError:
        return None


def allocatable(device: torch.device) -> int:
    """Bytes this process can still allocate on ``device`` (a GPU): the device's free memory and what its own
    caching allocator holds unused."""
    return torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def candidates_fault(before: DeviceUse | None, now: DeviceUse | None) -> str:
    """Why a judge out of memory is the candidate's fault (`CANDIDATE_SHARE`), or "" where it is not shown to be."""
    if before is None or now is None or before.free <= 0:
        return ""
    grown = now.outside - before.outside
    if grown <= CANDIDATE_SHARE * before.free:
        return ""
    gib = 1 << 30
    return (f"the judge ran out of device memory after the candidate loaded: memory used outside the judge grew by "
            f"{grown / gib:.1f} GiB of the {before.free / gib:.1f} GiB free before the candidate loaded "
            f"({now.free / gib:.2f} GiB free now); the candidate may use at most {CANDIDATE_SHARE:.0%} of it")
