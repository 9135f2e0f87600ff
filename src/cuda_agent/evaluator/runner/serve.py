"""The candidate process: loads ``ModelNew`` and runs the calls the judge asks for, nothing else.

Runs inside the sandbox (``python -m ca_runner.serve --control-fd N``). It holds no golden, no reference, no
verdict: inputs arrive in shared memory the judge fills, outputs are copied into shared memory the judge reads, and
every call goes through the same code path (`Server.call`), so nothing here can tell a checked call from one that
is only timed; which calls are checked is decided by the judge after they return. Everything this process reports
(times, kernel inventories, errors) is the candidate's word: the judge believes the output tensors and what it
measures itself, and uses the rest as evidence to cross-check.

Protocol (`channel` messages, one request then one reply):
  {"op": "load", ...}     import the solution, construct ModelNew under the judge's seed -> parameter summary
  {"op": "regions", ...}  + descriptors: map shared regions
  {"op": "call", ...}     run forward on views of the regions, copy outputs, synchronise -> times, output metadata
  {"op": "inventory"}     the kernels each call launched (when the kernel tap is on)
  {"op": "stop"}          exit
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import socket
import sys
import time
import traceback
import types
from typing import Any

import torch

from . import channel
from .perturb import perturbed_init
from .shm import SharedRegion, dtype_from_name, dtype_name

_perf = time.perf_counter
_MAX_TEXT = 4000


def _trim(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT // 2] + "\n...\n" + text[-_MAX_TEXT // 2:]


def decode_value(value: Any) -> Any:
    """The inverse of the judge's encoding of ``get_init_inputs()`` values (see `judge.values.encode`)."""
    if isinstance(value, dict):
        if "float" in value:
            return float(value["float"])
        if "tuple" in value:
            return tuple(decode_value(v) for v in value["tuple"])
        if "list" in value:
            return [decode_value(v) for v in value["list"]]
        if "dtype" in value:
            return dtype_from_name(value["dtype"])
        if "tensor" in value:
            spec = value["tensor"]
            return torch.tensor(spec["data"], dtype=dtype_from_name(spec["dtype"])).reshape(spec["shape"])
        raise ValueError(f"cannot decode {value!r}")
    return value


def _flatten(obj: Any) -> list[Any]:
    if type(obj) in (tuple, list):
        out: list[Any] = []
        for item in obj:
            out.extend(_flatten(item))
        return out
    return [obj]


class CandidateFailure(Exception):
    def __init__(self, stage: str, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.log = log


class Server:
    """One candidate's process state: its model, the mapped regions and the views over them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.device = torch.device("cpu")
        self.model: Any = None
        self.regions: dict[int, SharedRegion] = {}
        self.views: dict[tuple[Any, ...], torch.Tensor] = {}
        self.tap: Any = None
        self.null_outputs: dict[tuple[Any, ...], torch.Tensor] = {}

    # -- loading ------------------------------------------------------------------------------------------------
    def warm(self, device: str, tap: bool) -> None:
        """Before any candidate is known: initialise the device and start the kernel tap (seconds of CUDA and
        CUPTI start-up that a spare process spends while it waits)."""
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.empty(1, device=self.device)
            torch.cuda.synchronize(self.device)
        if tap:
            from .tap import KernelTap

            self.tap = KernelTap(cuda=self.device.type == "cuda")

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        if torch.device(msg["device"]) != self.device:
            self.warm(msg["device"], False)
        module = self._import(msg)
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type):
            raise CandidateFailure("runtime_error", "the solution defines no class ModelNew(nn.Module)")
        init = [decode_value(v) for v in msg["init_inputs"]]
        try:
            torch.manual_seed(int(msg["seed"]))
            perturb = msg.get("perturb_init")
            with perturbed_init(bool(perturb), int(msg["seed"]), perturb.get("keys") if isinstance(perturb, dict)
                                else None):
                model = cls(*init)
            if not isinstance(model, torch.nn.Module):
                raise CandidateFailure("runtime_error", "ModelNew(...) is not a torch.nn.Module")
            self.model = model.to(self.device)
            self.model.eval()
        except CandidateFailure:
            raise
        except BaseException as exc:  # noqa: BLE001 - the candidate may raise anything
            raise _failure(exc, "ModelNew(*get_init_inputs())") from exc
        if self.tap is not None and not msg.get("kernel_tap"):
            self.tap.stop()
            self.tap = None
        elif self.tap is None and msg.get("kernel_tap"):
            from .tap import KernelTap

            self.tap = KernelTap(cuda=self.device.type == "cuda")
        return {"ok": True, "parameters": _parameter_summary(self.model)}

    def _import(self, msg: dict[str, Any]) -> types.ModuleType:
        path = msg["module"]
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        if msg["kind"] == "workspace":
            from .abi import OpLibrary

            binding = types.ModuleType("binding")
            binding.ops = OpLibrary(msg["library"]) if msg.get("library") else None  # type: ignore[attr-defined]
            sys.modules["binding"] = binding
            name = "model_new"
        else:
            import torch.utils.cpp_extension as cpp_extension

            from .inline import prebuilt_loader

            cpp_extension.load_inline = prebuilt_loader(msg.get("inline_dir") or "")  # type: ignore[assignment]
            name = "cuda_agent_solution"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CandidateFailure("runtime_error", f"cannot import {os.path.basename(path)}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - SystemExit included
            stage = "build_failed" if type(exc).__name__ == "InlineBuildMissing" else "runtime_error"
            raise CandidateFailure(stage, f"importing {os.path.basename(path)} raised {type(exc).__name__}: "
                                          f"{str(exc)[:1500]}", _trim(traceback.format_exc())) from exc
        return module

    # -- shared memory ------------------------------------------------------------------------------------------
    def map_regions(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        specs = msg["regions"]
        if len(specs) != len(fds):
            raise CandidateFailure("eval_error", f"{len(specs)} regions announced, {len(fds)} descriptors received")
        for spec, fd in zip(specs, fds):
            self.regions[int(spec["id"])] = SharedRegion.attach(fd, int(spec["nbytes"]), self.device)
        return {"ok": True}

    def _view(self, spec: list[Any]) -> torch.Tensor:
        key = (spec[0], spec[1], tuple(spec[2]), tuple(spec[3]), spec[4])
        view = self.views.get(key)
        if view is None:
            region = self.regions[int(spec[0])]
            view = region.view(int(spec[1]), spec[2], spec[3], dtype_from_name(spec[4]))
            self.views[key] = view
        return view

    def _arg(self, spec: dict[str, Any]) -> Any:
        if "t" in spec:
            return self._view(spec["t"])
        return decode_value(spec["v"])

    # -- the call -----------------------------------------------------------------------------------------------
    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One forward call, the same way for every call: events around forward on the current stream, the outputs
        copied into the judge's buffers on that stream (work not joined back to it is not there yet), then the whole
        device synchronised, so the host bracket also covers work on other streams."""
        args = [self._arg(a) for a in msg["args"]]
        outs = [self._view(o) for o in msg["outs"]]
        token = int(msg["token"])
        model = self.model if not msg.get("null") else self._null_model(outs)
        if model is None:
            raise CandidateFailure("eval_error", "call before load")
        cuda = self.device.type == "cuda"
        if cuda:
            stream = torch.cuda.current_stream(self.device)
            start, end, copied = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        tap = self.tap if not msg.get("null") else None
        if tap is not None:
            tap.begin(token, "call")
        t0 = _perf()
        if cuda:
            start.record(stream)
        try:
            with torch.no_grad():
                out = model(*args)
            if cuda:
                end.record(stream)
            t1 = _perf()
            if tap is not None:
                tap.end()
                tap.begin(token, "copy")
            meta = _copy_out(out, outs, self.device)
            if cuda:
                copied.record(stream)
                torch.cuda.synchronize(self.device)
        except CandidateFailure:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise _failure(exc, "forward") from exc
        finally:
            if tap is not None:
                tap.end()
        t2 = _perf()
        del out
        reply: dict[str, Any] = {"ok": True, "outs": meta, "host_ms": (t2 - t0) * 1e3}
        if cuda:
            reply["event_ms"] = start.elapsed_time(end)
            reply["copy_ms"] = end.elapsed_time(copied)
        else:
            reply["event_ms"] = (t1 - t0) * 1e3
            reply["copy_ms"] = 0.0
        return reply

    def _null_model(self, outs: list[torch.Tensor]) -> Any:
        """The calibration model: returns ready-made tensors shaped like the outputs (no kernels of its own)."""
        ready = []
        for o in outs:
            key = (tuple(o.shape), o.dtype)
            if key not in self.null_outputs:
                # random bits, not zeros: copying zeros runs measurably faster, and this copy is the overhead the
                # judge subtracts from the real calls' round trips
                ready_out = torch.empty(o.shape, dtype=o.dtype, device=self.device)
                ready_out.view(-1).view(torch.uint8).random_(0, 256) if ready_out.numel() else None
                self.null_outputs[key] = ready_out
            ready.append(self.null_outputs[key])
        result = ready[0] if len(ready) == 1 else tuple(ready)
        return lambda *args: result

    def inventory(self) -> dict[str, Any]:
        if self.tap is None:
            return {"ok": True, "calls": {}, "tap": False}
        return {"ok": True, "calls": self.tap.finish(), "tap": True}


def _copy_out(out: Any, outs: list[torch.Tensor], device: torch.device) -> list[Any]:
    """Copy the k-th tensor leaf into the k-th buffer when shape, dtype and device match; describe every leaf."""
    meta: list[Any] = []
    k = 0
    for leaf in _flatten(out):
        if isinstance(leaf, torch.Tensor):
            entry: dict[str, Any] = {"shape": list(leaf.shape), "dtype": dtype_name(leaf.dtype),
                                     "device": leaf.device.type, "plain": type(leaf) is torch.Tensor}
            if (k < len(outs) and entry["plain"] and tuple(leaf.shape) == tuple(outs[k].shape)
                    and leaf.dtype == outs[k].dtype and leaf.device.type == device.type):
                outs[k].copy_(leaf)
                entry["copied"] = True
            k += 1
            meta.append(entry)
        elif isinstance(leaf, (bool, int, float)) or leaf is None:
            meta.append({"value": leaf if not isinstance(leaf, float) or math.isfinite(leaf) else repr(leaf)})
        else:
            meta.append({"type": type(leaf).__name__})
    return meta


def _parameter_summary(model: torch.nn.Module) -> list[list[Any]]:
    """(name, shape, sum, sum of squares) of every parameter and buffer: the judge compares them with the
    reference's to explain a mismatch (layers made in another order get other weights)."""
    rows = []
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if tensor.is_floating_point() and tensor.numel():
                t = tensor.detach().double()
                rows.append([name, list(tensor.shape), float(t.sum()), float((t * t).sum())])
    return rows[:2000]


def _failure(exc: BaseException, where: str) -> CandidateFailure:
    text = _trim(traceback.format_exc())
    message = f"{where}: {type(exc).__name__}: {str(exc)[:1500]}"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return CandidateFailure("out_of_memory", message, text)
    return CandidateFailure("runtime_error", message, text)


def serve(sock: socket.socket, device: str = "", tap: bool = False) -> int:
    server = Server(sock)
    if device:
        server.warm(device, tap)
    handlers = {
        "load": lambda m, f: server.load(m),
        "regions": server.map_regions,
        "call": lambda m, f: server.call(m),
        "inventory": lambda m, f: server.inventory(),
    }
    channel.send(sock, {"ok": True, "ready": True, "pid": os.getpid()})
    while True:
        try:
            msg, fds = channel.receive(sock)
        except channel.WireError:
            return 0
        op = msg.get("op")
        if op == "stop":
            channel.send(sock, {"ok": True})
            return 0
        handler = handlers.get(op)  # type: ignore[arg-type]
        try:
            if handler is None:
                raise CandidateFailure("eval_error", f"unknown op {op!r}")
            reply = handler(msg, fds)
        except CandidateFailure as exc:
            reply = {"ok": False, "stage": exc.stage, "reason": exc.reason, "log": exc.log}
        except BaseException as exc:  # noqa: BLE001 - report, keep serving
            failure = _failure(exc, str(op))
            reply = {"ok": False, "stage": failure.stage, "reason": failure.reason, "log": failure.log}
        channel.send(sock, reply)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ca_runner.serve")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--device", default="")
    parser.add_argument("--tap", action="store_true")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.control_fd)
    sys.stdin.close()
    return serve(sock, args.device, args.tap)


if __name__ == "__main__":
    sys.exit(main())
