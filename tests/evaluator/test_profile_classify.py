"""Kernel-name classification (names as CUPTI reports them) and the trace parser, on the CPU."""
from __future__ import annotations

import pytest
import torch

from cuda_agent.evaluator.profile import (
    KERNEL_CLASSES,
    KernelTime,
    ProfilingUnavailable,
    _kernels_from_trace,
    classify_kernel,
    format_breakdown,
    is_reduced_precision,
    kernel_origin,
    launched_kernels,
)

NAMES = {
    # PyTorch (ATen, its helpers, inductor)
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)": "pytorch",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4, 4> >(at::native::ReduceOp<float>)": "pytorch",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
    "(float*, float const*, int, int, int, bool const*, int, bool)": "pytorch",
    "void cunn_SoftMaxForward<4, float, float, float, Epilogue>(float*, float const*, int)": "pytorch",
    "triton_poi_fused_relu_0": "pytorch",
    "triton_red_fused__softmax_0": "pytorch",
    "void at_cuda_detail::cub::DeviceReduceKernel<float>(float const*)": "pytorch",
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, "
    "true, 64, 64, 64, true, true>::Params)": "pytorch",
    # cuBLAS, fp32
    "ampere_sgemm_128x64_nn": "cublas",
    "volta_sgemm_32x128_tn": "cublas",
    "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas":
        "cublas",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParams<"
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<float>, float, float)": "cublas",
    "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<float>)":
        "cublas",
    "nvjet_sss_64x32_64x8_2x1_v_bz_NNT": "cublas",
    # cuDNN, fp32
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
    "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)": "cudnn",
    "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float const*)":
        "cudnn",
    "void cudnn::cnn::conv2d_grouped_direct_kernel<false, true, false, false, 0, 0, int, float, float, float>"
    "(cudnnTensorStruct, float const*)": "cudnn",
    # reduced precision, whoever launched it
    "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel":
        "reduced_precision",
    "sm86_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize64x32x64_stage5_warpsize2x2x1_g1_"
    "tensor16x8x8_kernel": "reduced_precision",
    "volta_h884gemm_64x64_ldg8_nn": "reduced_precision",
    "turing_h1688gemm_128x128_ldg8_tn": "reduced_precision",
    "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4": "reduced_precision",
    "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8": "reduced_precision",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel":
        "reduced_precision",
    "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNT": "reduced_precision",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::Half>, std::array<char*, 3ul>)": "reduced_precision",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
    "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, char, c10::BFloat16>": "reduced_precision",
    "void gemm_kernel<__half>(__half const*, __half const*, __half*, int, int, int)": "reduced_precision",
    "void mm_bf16(__nv_bfloat16 const*, __nv_bfloat16*, int)": "reduced_precision",
    # the candidate's own
    "void relu_kernel(float const*, float*, long)": "other",
    "void fused_softmax_kernel<256>(float const*, float*, int, int)": "other",
    "void tiled_matmul(float const*, float const*, float*, int, int, int)": "other",
    "void mask_kernel(unsigned char const*, uint8_t*)": "other",
    "void cub::DeviceReduceSingleTileKernel<float>(float const*)": "other",
    "void halfway_kernel(float*)": "other",
}


@pytest.mark.parametrize(("name", "expected"), sorted(NAMES.items()))
def test_classify(name: str, expected: str) -> None:
    assert classify_kernel(name) == expected
    assert classify_kernel(name) in KERNEL_CLASSES


def test_origin_ignores_precision() -> None:
    assert kernel_origin("volta_h884gemm_64x64_ldg8_nn") == "cublas"
    assert kernel_origin("sm86_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_kernel") == "cudnn"
    assert kernel_origin("triton_poi_fused__to_copy_0") == "pytorch"
    assert is_reduced_precision("void k<__half>(__half*)")
    assert not is_reduced_precision("void k(float*)")


def _kernel(name: str, stream: int, corr: int, ts: float, ext: int | None = None, dur: float = 2.0) -> dict:
    args = {"stream": stream, "correlation": corr, "grid": [4, 1, 1], "block": [256, 1, 1], "device": 0}
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": stream, "args": args}


def test_trace_parser_marks_caller_stream_and_launching_op() -> None:
    """The parser reads the kineto chrome-trace schema: kernel events with stream/grid/block/correlation args and
    CPU operator events linked through "External id"."""
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >()"
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 5.0, "dur": 3.0, "args": {"External id": 11}},
        _kernel("void side_kernel(float*)", stream=13, corr=30, ts=12.0),
        _kernel(fill, stream=7, corr=20, ts=1.0),
        _kernel("ampere_sgemm_128x64_nn", stream=7, corr=25, ts=6.0, ext=11, dur=40.0),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5.5, "dur": 1.0, "args": {}},
    ]
    audit = _kernels_from_trace(events)
    assert audit.caller_stream == 7
    assert [k.name for k in audit.kernels] == ["ampere_sgemm_128x64_nn", "void side_kernel(float*)"]
    gemm, side = audit.kernels
    assert gemm.on_caller_stream and gemm.launched_by == "aten::mm" and gemm.duration_us == 40.0
    assert gemm.grid == (4, 1, 1) and gemm.block == (256, 1, 1) and gemm.kind == "cublas"
    assert not side.on_caller_stream and side.stream == 13 and side.kind == "other"
    assert gemm.on_current_stream and not side.on_current_stream


def test_trace_without_kernels_is_an_error() -> None:
    with pytest.raises(ProfilingUnavailable, match="no GPU kernels"):
        _kernels_from_trace([{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "args": {}}])


def test_cpu_inputs_cannot_be_profiled() -> None:
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    with pytest.raises(ProfilingUnavailable, match="CUDA device"):
        launched_kernels(torch.relu, [torch.randn(4)])


def test_format_breakdown() -> None:
    rows = [KernelTime("void relu_kernel(float const*, float*, long)", 75.0, 1),
            KernelTime("triton_poi_fused_relu_0", 25.0, 2)]
    text = format_breakdown(rows, top=1)
    assert "75.0%" in text and "relu_kernel" in text and "other" in text
    assert "1 more kernels" in text
