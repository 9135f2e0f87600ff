#pragma once
#include <cuda_runtime.h>
#include <cstdint>

// y[r, c] = max(y[r, c] + bias[c], 0) / divisor, in place on a contiguous (rows, cols) matrix.
void launch_bias_relu_div(float* y, const float* bias, int64_t rows, int64_t cols, float divisor, cudaStream_t stream);
