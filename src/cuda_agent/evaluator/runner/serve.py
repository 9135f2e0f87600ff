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
  {"op": "calls", ...}    K calls back to back (forward on views of the regions, outputs copied into the call's
                          buffers), one synchronisation at the end -> output metadata per call (times: diagnostics);
                          with "graph": N (and "first", the first call's token), a replay of captured graph N
  {"op": "capture", ...}  K calls and their output copies captured in one CUDA graph -> its number, or why not
  {"op": "release"}       drop the candidate's graphs
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
from .graphs import end_failed_capture
from .perturb import perturbed_init
from .shm import SharedRegion, dtype_from_name, dtype_name

_perf = time.perf_counter
_MAX_TEXT = 4000
REQUEST_SPIN_S = 0.02  # CPU seconds a GPU candidate's runner polls for the next request before it sleeps


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
        self.graphs: dict[int, _Graph] = {}
        self.received = 0.0  # when the request being served arrived (this process's monotonic clock)

    # -- loading ------------------------------------------------------------------------------------------------
    def warm(self, device: str, tap: bool) -> None:
        """Before any candidate is known: initialise the device and start the kernel tap (seconds of CUDA and
        CUPTI start-up that a spare process spends while it waits)."""
        self.device = torch.device(device)
        # fp32 tasks are held to fp32 (the evaluator README's precision contract): PyTorch's own convolutions in the
        # candidate's forward (relaxed mode) run without TF32, as the judge's references and baselines do
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
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
            from .kernel_abi import OpLibrary  # cuda_agent.kernel_abi, shipped here by the judge's runner_copy

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

    # -- the calls ----------------------------------------------------------------------------------------------
    def calls(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One request: ``msg["calls"]`` run back to back, the same way for every call and every request: forward on
        the call's own input views, its outputs copied into the call's own output buffers on the current stream,
        then the next call; the whole device is synchronised once, after the last. The judge times the request on
        its own clock; the times reported here (events around each forward, the host clock around the request) are
        diagnostics only."""
        if msg.get("graph") is not None:
            return self._replay(msg)
        null = bool(msg.get("null"))
        prepared = self._prepare(msg["calls"])
        cuda = self.device.type == "cuda"
        stream = torch.cuda.current_stream(self.device) if cuda else None
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in prepared] if cuda else []
        tap = self.tap if not null else None
        metas: list[list[Any]] = []
        host_events: list[float] = []
        t0 = _perf()
        try:
            for k, (args, outs, token) in enumerate(prepared):
                model = self.model if not null else self._null_model(outs)
                if model is None:
                    raise CandidateFailure("eval_error", "call before load")
                if tap is not None:
                    tap.begin(token, "call")
                t_call = _perf()
                if cuda:
                    events[k][0].record(stream)
                try:
                    with torch.no_grad():
                        out = model(*args)
                    if cuda:
                        events[k][1].record(stream)
                    host_events.append((_perf() - t_call) * 1e3)
                    if tap is not None:
                        tap.end()
                        tap.begin(token, "copy")
                    metas.append(_copy_out(out, outs, self.device))
                finally:
                    if tap is not None:
                        tap.end()
                del out
            if cuda:
                torch.cuda.synchronize(self.device)
        except CandidateFailure:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise _failure(exc, "forward") from exc
        synced = _perf()
        host_ms = (synced - t0) * 1e3
        reported = [start.elapsed_time(end) for start, end in events] if cuda else host_events
        stamps = {"received": self.received, "started": t0, "synced": synced, "replied": _perf()}
        return {"ok": True, "calls": [{"outs": meta} for meta in metas], "host_ms": host_ms, "event_ms": reported,
                "stamps": stamps}

    def _prepare(self, specs: list[dict[str, Any]]) -> list[tuple[list[Any], list[torch.Tensor], int]]:
        return [([self._arg(a) for a in spec["args"]], [self._view(o) for o in spec["outs"]], int(spec["token"]))
                for spec in specs]

    def capture(self, msg: dict[str, Any]) -> dict[str, Any]:
        """``msg["calls"]`` captured in one CUDA graph, each call's forward then the runner's copy of its outputs
        (under the kernel tap's ranges, as a request's calls are); the graph's number, or ``"graph": None`` and the
        reason capture failed (then the judge times host-launched requests: a failed capture is no verdict). The
        forward runs once eagerly on the capture stream first, so per-stream handles and workspaces exist."""
        if self.device.type != "cuda":
            raise CandidateFailure("eval_error", "CUDA graphs need a CUDA device")
        null = bool(msg.get("null"))
        prepared = self._prepare(msg["calls"])
        if not prepared:
            raise CandidateFailure("eval_error", "capture of no calls")
        model_for = (lambda outs: self._null_model(outs)) if null else (lambda outs: self.model)
        if model_for(prepared[0][1]) is None:
            raise CandidateFailure("eval_error", "capture before load")
        tap = self.tap if not null else None
        current = torch.cuda.current_stream(self.device)
        stream = torch.cuda.Stream(self.device)
        try:
            stream.wait_stream(current)
            with torch.cuda.stream(stream), torch.no_grad():
                model_for(prepared[0][1])(*prepared[0][0])
            current.wait_stream(stream)
            torch.cuda.synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001 - a forward that fails here fails as a call too
            return {"ok": True, "graph": None, "reason": f"warm-up on the capture stream: {_brief(exc)}"}
        graph = torch.cuda.CUDAGraph()
        metas: list[list[Any]] = []
        try:  # noqa: SIM105 - the finally below must run whatever the capture raised
            with torch.cuda.graph(graph, stream=stream):
                for args, outs, token in prepared:
                    if tap is not None:
                        tap.begin(token, "call")
                    try:
                        with torch.no_grad():
                            out = model_for(outs)(*args)
                    finally:
                        if tap is not None:
                            tap.end()
                    if tap is not None:
                        tap.begin(token, "copy")
                    try:
                        meta = _copy_out(out, outs, self.device)
                    finally:
                        if tap is not None:
                            tap.end()
                    problem = _not_graphable(out, meta)
                    if problem:
                        raise _NotGraphable(problem)
                    metas.append(meta)
                    del out
        except BaseException as exc:  # noqa: BLE001 - capture refuses much legitimate code (it synchronises, ...)
            end_failed_capture(graph, current)
            return {"ok": True, "graph": None, "reason": _brief(exc)}
        number = len(self.graphs) + 1
        self.graphs[number] = _Graph(graph, null)
        return {"ok": True, "graph": number, "calls": [{"outs": meta} for meta in metas]}

    def release(self) -> dict[str, Any]:
        """Drop the candidate's captured graphs and their memory (the null model's stay): the judge times
        host-launched requests from here on."""
        self.graphs = {n: g for n, g in self.graphs.items() if g.null}
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
        return {"ok": True}

    def _replay(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A request answered by replaying captured graph ``msg["graph"]`` (its calls and copies, on the buffers it
        was captured on: the judge sends fresh values into those and no specs), one synchronisation after it.
        Nothing else runs here, and the reply carries nothing per call (the judge kept the capture's): the
        runner's own host work inside the judge's clock is the same few steps for the null model's graph and the
        candidate's, with nothing in it to leave out."""
        held = self.graphs.get(int(msg["graph"]))
        if held is None:
            raise CandidateFailure("eval_error", f"no captured graph {msg['graph']}")
        tap = self.tap if not held.null else None
        t0 = _perf()
        try:
            if tap is not None:
                tap.begin(int(msg["first"]), "graph")
            held.graph.replay()
            if tap is not None:
                tap.end()
            torch.cuda.synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001
            raise _failure(exc, "graph replay") from exc
        synced = _perf()
        return {"ok": True, "stamps": {"received": self.received, "started": t0, "synced": synced,
                                       "replied": _perf()}}

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


class _Graph:
    """A captured request: the graph, and whether it is the null model's."""

    def __init__(self, graph: Any, null: bool) -> None:
        self.graph = graph
        self.null = null


class _NotGraphable(Exception):
    pass


def _not_graphable(out: Any, meta: list[Any]) -> str:
    """Why a captured call's output copies would not replay as the plain copies an eager call makes, or ""."""
    leaves = _flatten(out)
    if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        return "forward returns values other than tensors"
    if not all(isinstance(m, dict) and m.get("copied") for m in meta):
        return "an output does not match the reference's shape, dtype or device"
    if not all(leaf.is_contiguous() for leaf in leaves):
        return "an output is not contiguous"
    return ""


def _brief(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:500]}"


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
        "calls": lambda m, f: server.calls(m),
        "capture": lambda m, f: server.capture(m),
        "release": lambda m, f: server.release(),
        "inventory": lambda m, f: server.inventory(),
    }
    channel.send(sock, {"ok": True, "ready": True, "pid": os.getpid()})
    while True:
        try:
            if server.device.type == "cuda":
                channel.wait_readable(sock, REQUEST_SPIN_S)
            msg, fds = channel.receive(sock)
            server.received = _perf()
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
