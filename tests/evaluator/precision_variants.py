"""Tasks and candidate computations for the precision contract (imported by tests/evaluator/test_precision_contract.py
and benchmarks/precision_contract.py; not a test module).

Each task is a reference module and its input maker; each variant computes the task's outputs another way: honest
fp32 ones (another summation order, split-K, sequential or compensated sums, float64 accumulation rounded once,
another formula) and lowered ones (operands rounded to TF32/fp16/bf16, to nearest or truncated, accumulated in fp32).
The rounding here is written independently of `judge.precision.round_mantissa` (frexp/ldexp, and torch's own fp16
and bf16 conversions), so a test that passes does not only agree with itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from cuda_agent.evaluator.judge.precision import Call, ZeroMeanPlan, plan_zero_mean


# -- tasks ------------------------------------------------------------------------------------------------------------
class Gemm(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


class Conv(nn.Module):
    def __init__(self, cin: int = 16, cout: int = 32, k: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class LinearScaleGelu(nn.Module):
    def __init__(self, fin: int = 1024, fout: int = 256, scale: float = 0.37) -> None:
        super().__init__()
        self.linear = nn.Linear(fin, fout)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x) * self.scale)


class LinearRowSum(nn.Module):
    """KernelBench L2/18's shape: a linear layer whose outputs are summed (the rest of that task is the identity)."""

    def __init__(self, fin: int = 2048, fout: int = 2048) -> None:
        super().__init__()
        self.linear = nn.Linear(fin, fout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).sum(dim=1, keepdim=True)


class SumMean(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.sum(dim=-1), x.mean(dim=-1)


class Unary(nn.Module):
    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {"gelu": F.gelu, "exp": torch.exp, "log": torch.log, "tanh": torch.tanh,
                "gelu_tanh": gelu_tanh}[self.op](x)


def gelu_tanh(x: torch.Tensor, tanh: Callable[[torch.Tensor], torch.Tensor] = torch.tanh) -> torch.Tensor:
    """minGPT's GELU (KernelBench L1/88), with ``tanh`` replaceable."""
    return 0.5 * x * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


@dataclass(frozen=True)
class Task:
    name: str
    kind: str                                  # gemm, conv, reduction, gelu, exp, log, tanh, gelu_tanh
    make_model: Callable[[], nn.Module]
    make_inputs: Callable[[torch.Generator], list[torch.Tensor]]
    positive: bool                             # the task's own inputs are all positive (torch.rand)


def _draw(shape: tuple[int, ...], positive: bool, gen: torch.Generator, device: str) -> torch.Tensor:
    x = torch.rand(shape, generator=gen) if positive else torch.randn(shape, generator=gen)
    return x.to(device)


def gemm_task(m: int, k: int, n: int, positive: bool, device: str = "cpu") -> Task:
    data = "rand" if positive else "randn"
    return Task(f"gemm {m}x{k}x{n} {data}", "gemm", Gemm,
                lambda g: [_draw((m, k), positive, g, device), _draw((k, n), positive, g, device)], positive)


def conv_task(positive: bool, device: str = "cpu", size: int = 48, batch: int = 4) -> Task:
    data = "rand" if positive else "randn"

    def model() -> nn.Module:
        torch.manual_seed(0)
        return Conv().to(device)

    return Task(f"conv2d 16->32 3x3 {batch}x{size}x{size} {data}", "conv", model,
                lambda g: [_draw((batch, 16, size, size), positive, g, device)], positive)


def linear_task(positive: bool, device: str = "cpu") -> Task:
    data = "rand" if positive else "randn"

    def model() -> nn.Module:
        torch.manual_seed(0)
        return LinearScaleGelu().to(device)

    return Task(f"linear*s+gelu 64x1024->256 {data}", "linear", model,
                lambda g: [_draw((64, 1024), positive, g, device)], positive)


def shortcut_task(device: str = "cpu") -> Task:
    def model() -> nn.Module:
        torch.manual_seed(0)
        return LinearRowSum().to(device)

    return Task("linear then row sum 64x2048->2048 rand", "shortcut", model,
                lambda g: [_draw((64, 2048), True, g, device)], True)


def reduction_task(rows: int = 32, length: int = 65536, device: str = "cpu") -> Task:
    return Task(f"sum+mean over {length} rand", "reduction", SumMean,
                lambda g: [_draw((rows, length), True, g, device)], True)


def unary_task(op: str, positive: bool, n: int = 1 << 20, device: str = "cpu") -> Task:
    """An elementwise task on ``n`` values: torch.rand (or randn) times 4, except log, tanh and the tanh GELU, which
    take KernelBench's own range (L1/22, L1/88: torch.rand)."""
    data = "rand" if positive else "randn"
    scale = 1.0 if op in ("log", "tanh", "gelu_tanh") else 4.0
    return Task(f"{op} {data}", op, lambda: Unary(op),
                lambda g: [(_draw((n,), positive, g, device) * scale)], positive)


# -- rounding, written independently of the judge's ---------------------------------------------------------------
def mantissa(x: torch.Tensor, bits: int, mode: str) -> torch.Tensor:
    """``x`` (float32) with ``bits`` explicit mantissa bits: frexp gives m in [0.5, 1); keep bits + 1 of it."""
    m, e = torch.frexp(x.double())
    scale = float(2 ** (bits + 1))
    kept = torch.round(m * scale) if mode == "nearest" else torch.trunc(m * scale)
    return torch.ldexp(kept / scale, e).float()


def dither(x: torch.Tensor, bits: int, gen: torch.Generator) -> torch.Tensor:
    """Stochastic rounding to ``bits`` mantissa bits (a lowered format that matches no fixed rounding)."""
    m, e = torch.frexp(x.double())
    scale = float(2 ** (bits + 1))
    noise = torch.rand(m.shape, generator=gen, dtype=torch.float64).to(m.device)
    return torch.ldexp(torch.floor(m * scale + noise) / scale, e).float()


def _tf32(bits: int, mode: str) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda t: mantissa(t, bits, mode)


LOWER: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tf32 nearest": _tf32(10, "nearest"),
    "tf32 truncated": _tf32(10, "truncate"),
    "fp16 operands": lambda t: t.half().float(),
    "fp16 truncated": lambda t: mantissa(t, 10, "truncate").clamp(-65504, 65504),
    "bf16 operands": lambda t: t.bfloat16().float(),
    "bf16 truncated": _tf32(7, "truncate"),
}


# -- variants ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    name: str
    honest: bool
    run: Callable[[nn.Module, list[torch.Tensor]], list[torch.Tensor]]
    exact_format: bool = True    # lowered by one of the four fixed roundings (the signature rule's formats)


def _gemm_sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Recursive summation over K, one rank-1 update at a time (a product and a sum, each rounded): the order of a
    naive kernel with one accumulator per output, and the largest error of any honest order."""
    c = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    for k in range(a.shape[1]):
        c = c + a[:, k:k + 1] * b[k:k + 1, :]
    return c


def _gemm_kahan(a: torch.Tensor, b: torch.Tensor, block: int = 64) -> torch.Tensor:
    """Compensated (Kahan) summation over blocks of K, each block an fp32 matmul."""
    total = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    comp = torch.zeros_like(total)
    for s in range(0, a.shape[1], block):
        y = a[:, s:s + block] @ b[s:s + block] - comp
        t = total + y
        comp = (t - total) - y
        total = t
    return total


def _split_k(a: torch.Tensor, b: torch.Tensor, parts: int = 8) -> torch.Tensor:
    step = max(1, a.shape[1] // parts)
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    for s in range(0, a.shape[1], step):
        out = out + a[:, s:s + step] @ b[s:s + step]
    return out


def gemm_variants(gen: torch.Generator | None = None) -> list[Variant]:
    out = [
        Variant("fp32 (torch)", True, lambda m, x: [x[0] @ x[1]]),
        Variant("fp32, K reversed", True, lambda m, x: [x[0].flip(1) @ x[1].flip(0)]),
        Variant("fp32, split-K x8", True, lambda m, x: [_split_k(x[0], x[1])]),
        Variant("fp32, sequential rank-1", True, lambda m, x: [_gemm_sequential(x[0], x[1])]),
        Variant("fp32, Kahan over K blocks", True, lambda m, x: [_gemm_kahan(x[0], x[1])]),
        Variant("float64 accumulate, rounded", True, lambda m, x: [(x[0].double() @ x[1].double()).float()]),
    ]
    out += [Variant(name, False, lambda m, x, f=f: [f(x[0]) @ f(x[1])]) for name, f in LOWER.items()]
    out.append(Variant("bf16 in and out", False, lambda m, x: [(x[0].bfloat16() @ x[1].bfloat16()).float()]))
    if gen is not None:
        out.append(Variant("tf32 dithered", False, lambda m, x: [dither(x[0], 10, gen) @ dither(x[1], 10, gen)],
                           exact_format=False))
    return out


def _conv_im2col(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    conv = model.conv
    cols = F.unfold(x, conv.kernel_size)                       # (B, Cin*k*k, L)
    w = conv.weight.reshape(conv.out_channels, -1)
    out = w @ cols + conv.bias[:, None]
    side = x.shape[-1] - conv.kernel_size[0] + 1
    return out.reshape(x.shape[0], conv.out_channels, x.shape[-2] - conv.kernel_size[0] + 1, side)


def _conv_split_channels(model: nn.Module, x: torch.Tensor, parts: int = 4) -> torch.Tensor:
    conv = model.conv
    step = conv.in_channels // parts
    out = conv.bias[None, :, None, None].expand(x.shape[0], -1, x.shape[-2] - 2, x.shape[-1] - 2).clone()
    for s in range(0, conv.in_channels, step):
        out = out + F.conv2d(x[:, s:s + step], conv.weight[:, s:s + step])
    return out


def conv_variants() -> list[Variant]:
    def lowered(f: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[nn.Module, list[torch.Tensor]], list[Any]]:
        return lambda m, x: [F.conv2d(f(x[0]), f(m.conv.weight), m.conv.bias)]

    out = [
        Variant("fp32 (torch)", True, lambda m, x: [m(x[0])]),
        Variant("fp32, im2col + matmul", True, lambda m, x: [_conv_im2col(m, x[0])]),
        Variant("fp32, split over channels", True, lambda m, x: [_conv_split_channels(m, x[0])]),
        Variant("float64 accumulate, rounded", True,
                lambda m, x: [F.conv2d(x[0].double(), m.conv.weight.double(), m.conv.bias.double()).float()]),
    ]
    return out + [Variant(name, False, lowered(f)) for name, f in LOWER.items()]


def linear_variants() -> list[Variant]:
    """Folding the scale into the weights and bias (in fp32, in __init__ as a kernel would) and a fused epilogue are
    honest; lowered operands (x and the weight, as tensor cores take them; the bias added in fp32) are not."""
    def folded(m: nn.Module, x: list[torch.Tensor]) -> list[torch.Tensor]:
        w, b = m.linear.weight * m.scale, m.linear.bias * m.scale
        return [F.gelu(torch.addmm(b, x[0], w.t()))]

    def lowered(f: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[nn.Module, list[torch.Tensor]], list[Any]]:
        return lambda m, x: [F.gelu((f(x[0]) @ f(m.linear.weight).t() + m.linear.bias) * m.scale)]

    out = [
        Variant("fp32 (torch)", True, lambda m, x: [m(x[0])]),
        Variant("fp32, scale folded into W, b", True, folded),
        Variant("fp32, split-K x8, epilogue", True,
                lambda m, x: [F.gelu((_split_k(x[0], m.linear.weight.t().contiguous()) + m.linear.bias) * m.scale)]),
    ]
    return out + [Variant(name, False, lowered(f)) for name, f in LOWER.items()]


def shortcut_variants() -> list[Variant]:
    """The algebraic shortcut x @ colsum(W) + sum(b) (exact in real arithmetic), with the column sums from torch or
    from one fp32 accumulator per column: 4 times the reference's error here, 14 times (84 units) at KernelBench's
    8192 features, within the floor."""
    def shortcut(colsum: Callable[[torch.Tensor], torch.Tensor],
                 f: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> Callable[..., list[Any]]:
        return lambda m, x: [(f(x[0]) @ f(colsum(m.linear.weight)) + m.linear.bias.sum()).unsqueeze(1)]

    return [
        Variant("fp32 (torch)", True, lambda m, x: [m(x[0])]),
        Variant("shortcut, torch column sums", True, shortcut(lambda w: w.sum(0))),
        Variant("shortcut, sequential column sums", True, shortcut(lambda w: _sequential_sum(w.t()))),
        Variant("shortcut, bf16 operands", False, shortcut(lambda w: w.sum(0), LOWER["bf16 operands"])),
        Variant("shortcut, tf32 operands", False, shortcut(lambda w: w.sum(0), LOWER["tf32 nearest"])),
    ]


def _sequential_sum(x: torch.Tensor) -> torch.Tensor:
    """One fp32 accumulator per row, summed element after element (recursive summation: the largest error of any
    honest order, about u * sqrt(n) / 3 relative on positive data)."""
    acc = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
    for j in range(x.shape[-1]):
        acc = acc + x[:, j]
    return acc


def reduction_variants() -> list[Variant]:
    def both(total: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[nn.Module, list[torch.Tensor]], list[Any]]:
        return lambda m, x: [total(x[0]), total(x[0]) / x[0].shape[-1]]

    return [
        Variant("fp32 (torch)", True, lambda m, x: list(m(x[0]))),
        Variant("fp32, sequential per row", True, both(_sequential_sum)),
        Variant("fp32, 256 partial sums", True, both(lambda t: t.reshape(t.shape[0], 256, -1).sum(-1).sum(-1))),
        Variant("float64 accumulate, rounded", True, both(lambda t: t.double().sum(-1).float())),
        Variant("bf16 inputs", False, both(lambda t: t.bfloat16().float().sum(-1))),
    ]


def _fast_exp(t: torch.Tensor) -> torch.Tensor:
    """exp with the error of ``-use_fast_math``'s ``__expf`` (ex2.approx after a multiply): up to 2 ulp plus the
    rounding of ``t * log2(e)`` carried through the exponential, drawn from a fixed generator."""
    gen = torch.Generator().manual_seed(7)
    wobble = (torch.rand(t.shape, generator=gen, dtype=torch.float64) * 2 - 1).to(t.device)
    arg = (t * (1.0 / math.log(2.0))).double()
    return (torch.exp2(arg) * (1 + wobble * 2.0 ** -22)).float()


def _tanh_from_exp(t: torch.Tensor, exp: Callable[[torch.Tensor], torch.Tensor] = torch.exp) -> torch.Tensor:
    return 1.0 - 2.0 / (exp(2.0 * t) + 1.0)


def tanh_rounded(bits: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """tanh with its result kept to ``bits`` mantissa bits: 11 bits is half precision's, and about the error of the
    hardware's tanh.approx.f32 (what ``-use_fast_math`` makes of ``tanhf``: relative error up to 2^-10.99); 12 bits
    is what it measured on L1/88's inputs on the H200 (accepted there under the 512-unit floor)."""
    return lambda t: mantissa(torch.tanh(t), bits, "nearest")


def unary_variants(op: str) -> list[Variant]:
    honest = {
        "gelu": lambda t: 0.5 * t * (1.0 + torch.erf(t * (1.0 / math.sqrt(2.0)))),
        "exp": lambda t: torch.exp2(t * (1.0 / math.log(2.0))),
        "log": lambda t: torch.log2(t) * math.log(2.0),
        "tanh": _tanh_from_exp,
        "gelu_tanh": lambda t: t / (1.0 + torch.exp(-2.0 * math.sqrt(2.0 / math.pi) * (t + 0.044715 * t * t * t))),
    }[op]
    out = [
        Variant("fp32 (torch)", True, lambda m, x: [m(x[0])]),
        Variant("fp32, another formula", True, lambda m, x: [honest(x[0])]),
        Variant("float64, rounded", True, lambda m, x: [m.double()(x[0].double()).float()]),
        Variant("fp16 inputs", False, lambda m, x: [m(x[0].half().float())]),
    ]
    if op == "tanh":
        out += [Variant("fp32, fast-math exp (2 ulp)", True,
                        lambda m, x: [_tanh_from_exp(x[0], _fast_exp)])]
    if op == "gelu_tanh":
        out += [Variant("fp32, fast-math exp (2 ulp)", True,
                        lambda m, x: [gelu_tanh(x[0], lambda v: _tanh_from_exp(v, _fast_exp))])]
    if op in ("tanh", "gelu_tanh"):
        apply = (lambda f: lambda m, x: [f(x[0])]) if op == "tanh" else \
            (lambda f: lambda m, x: [gelu_tanh(x[0], f)])
        out += [Variant(f"tanh to {bits} bits{label}", False, apply(tanh_rounded(bits)))
                for bits, label in ((11, " (fp16, tanh.approx)"), (12, " (tanh.approx on L1/88)"), (14, ""))]
    return out


def _with_tf32(fn: Callable[[nn.Module, list[torch.Tensor]], list[Any]]) -> Callable[..., list[Any]]:
    def run(m: nn.Module, x: list[torch.Tensor]) -> list[Any]:
        flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            return fn(m, x)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    return run


def hardware_variants(task: Task) -> list[Variant]:
    """Lowered computations as a GPU does them: cuBLAS TF32, fp16 and bf16 GEMMs (fp16/bf16 outputs), fp16 operands
    in an fp32 GEMM, cuDNN TF32."""
    if task.kind == "gemm":
        return [Variant("GPU: cuBLAS TF32", False, _with_tf32(lambda m, x: [x[0] @ x[1]])),
                Variant("GPU: fp16 GEMM", False, lambda m, x: [(x[0].half() @ x[1].half()).float()]),
                Variant("GPU: fp16 operands, fp32 GEMM", False,
                        lambda m, x: [x[0].half().float() @ x[1].half().float()]),
                Variant("GPU: bf16 GEMM", False, lambda m, x: [(x[0].bfloat16() @ x[1].bfloat16()).float()])]
    if task.kind in ("conv", "linear"):
        return [Variant("GPU: cuDNN/cuBLAS TF32", False, _with_tf32(lambda m, x: [m(x[0])]))]
    return []


def variants_for(task: Task, gen: torch.Generator | None = None) -> list[Variant]:
    if task.kind == "gemm":
        return gemm_variants(gen)
    if task.kind == "conv":
        return conv_variants()
    if task.kind == "linear":
        return linear_variants()
    if task.kind == "shortcut":
        return shortcut_variants()
    if task.kind == "reduction":
        return reduction_variants()
    return unary_variants(task.kind)


@dataclass(frozen=True)
class Drawn:
    """One draw of a task under a variant: its reference, the zero-mean plan, and the calls the judge would keep."""

    model: nn.Module
    plan: ZeroMeanPlan
    own: Call
    zero: Call | None


def draw(task: Task, variant: Variant, seed: int, device: str | torch.device = "cpu") -> Drawn:
    """The task's own inputs and zero-mean inputs (fresh draws under ``seed``) and the variant's outputs on both."""
    gen = torch.Generator().manual_seed(seed)
    model = task.make_model().to(device).eval()
    own = task.make_inputs(gen)
    plan = plan_zero_mean(model, own)
    zero = plan.apply(task.make_inputs(gen))
    with torch.no_grad():
        own_call = (own, variant.run(model, own))
        zero_call = (zero, variant.run(model, zero)) if zero is not None else None
    return Drawn(model, plan, own_call, zero_call)
