// cuda_agent.h: the small C++ API through which kernel files register host functions with Python.
// Protected file: do not edit. No torch headers here on purpose: a kernel file builds in 1-2 seconds.
//
//   #include "cuda_agent.h"
//   __global__ void relu_kernel(const float* x, float* y, int64_t n) { ... }
//   void relu(ca::Tensor x, ca::Tensor out) {
//     CA_CHECK(x.dtype == ca::DType::Float32, "relu expects float32");
//     relu_kernel<<<blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
//   }
//   CA_EXPORT(relu);            // Python: from binding import ops; ops.relu(x, out)
//
// Exported functions return void and take ca::Tensor (by value or const&), int64_t / int, double / float, bool.
// Errors: CA_CHECK(cond, msg) or ca::fail(msg) raise a RuntimeError in Python; a failed launch is reported too.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ca {

enum class DType : int32_t {
  Float32 = 0, Float16 = 1, BFloat16 = 2, Float64 = 3, Int32 = 4, Int64 = 5, Bool = 6, Int8 = 7, UInt8 = 8, Int16 = 9
};

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32"; case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16"; case DType::Float64: return "float64";
    case DType::Int32: return "int32"; case DType::Int64: return "int64"; case DType::Bool: return "bool";
    case DType::Int8: return "int8"; case DType::UInt8: return "uint8"; case DType::Int16: return "int16";
  }
  return "unknown";
}

constexpr int kMaxDims = 8;

// A non-owning view of a CUDA tensor that Python passed in. Layout shared with cuda_agent/compiler/runtime.py.
struct Tensor {
  void* data;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];  // in elements, as in PyTorch
  int32_t ndim;
  DType dtype;
  int32_t device;
  int32_t element_size;

  template <typename T> T* data_ptr() const { return static_cast<T*>(data); }
  int64_t size(int i) const { return sizes[i < 0 ? i + ndim : i]; }
  int64_t stride(int i) const { return strides[i < 0 ? i + ndim : i]; }
  int dim() const { return ndim; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[i];
    return n;
  }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (sizes[i] != 1 && strides[i] != expected) return false;
      expected *= sizes[i];
    }
    return true;
  }
};

// One argument as Python passes it. kind: 0 tensor, 1 integer, 2 floating point, 3 bool.
struct Value {
  int32_t kind;
  int32_t pad_;
  int64_t i;
  double f;
  Tensor t;
};

namespace detail {
struct CallState {
  cudaStream_t stream;
  char* error;
  int32_t error_len;
};
inline CallState*& call_state() {
  static thread_local CallState* state = nullptr;
  return state;
}
struct Failure {
  std::string message;
};
}  // namespace detail

// The stream the caller is on (PyTorch's current stream). Launch every kernel on it.
inline cudaStream_t stream() {
  auto* s = detail::call_state();
  return s ? s->stream : nullptr;
}

[[noreturn]] inline void fail(const std::string& message) { throw detail::Failure{message}; }

#define CA_CHECK(cond, msg)                                                                  \
  do {                                                                                       \
    if (!(cond)) ::ca::fail(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                            "check failed: " #cond ": " + (msg));                          \
  } while (0)

#define CA_CUDA_CHECK(expr)                                                                   \
  do {                                                                                        \
    cudaError_t ca_err_ = (expr);                                                             \
    if (ca_err_ != cudaSuccess) ::ca::fail(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                           ": " #expr " failed: " + cudaGetErrorString(ca_err_)); \
  } while (0)

namespace detail {

using Trampoline = int (*)(const Value* args, int32_t nargs, CallState* state);

extern "C" void ca_register_op(const char* name, const char* signature, Trampoline fn);

template <typename T> struct ArgTraits;
template <> struct ArgTraits<Tensor> {
  static constexpr char code = 't';
  static Tensor get(const Value& v) { return v.t; }
};
template <> struct ArgTraits<int64_t> {
  static constexpr char code = 'i';
  static int64_t get(const Value& v) { return v.i; }
};
template <> struct ArgTraits<int> {
  static constexpr char code = 'i';
  static int get(const Value& v) { return static_cast<int>(v.i); }
};
template <> struct ArgTraits<double> {
  static constexpr char code = 'f';
  static double get(const Value& v) { return v.f; }
};
template <> struct ArgTraits<float> {
  static constexpr char code = 'f';
  static float get(const Value& v) { return static_cast<float>(v.f); }
};
template <> struct ArgTraits<bool> {
  static constexpr char code = 'b';
  static bool get(const Value& v) { return v.i != 0; }
};

template <typename T> using Bare = std::remove_cv_t<std::remove_reference_t<T>>;

template <typename... Args> std::string signature_of(void (*)(Args...)) {
  return std::string{ArgTraits<Bare<Args>>::code...};
}

inline int report(CallState* state, const std::string& message) {
  if (state && state->error && state->error_len > 0) {
    std::snprintf(state->error, static_cast<size_t>(state->error_len), "%s", message.c_str());
  }
  return 1;
}

template <typename... Args, size_t... I>
void call_with(void (*fn)(Args...), const Value* args, std::index_sequence<I...>) {
  fn(ArgTraits<Bare<Args>>::get(args[I])...);
}

template <typename... Args>
int invoke(void (*fn)(Args...), const char* name, const Value* args, int32_t nargs, CallState* state) {
  if (nargs != static_cast<int32_t>(sizeof...(Args))) {
    return report(state, std::string(name) + ": expected " + std::to_string(sizeof...(Args)) + " arguments, got " +
                             std::to_string(nargs));
  }
  CallState* previous = call_state();
  call_state() = state;
  int status = 0;
  try {
    call_with(fn, args, std::index_sequence_for<Args...>{});
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) status = report(state, std::string(name) + ": CUDA error: " + cudaGetErrorString(err));
  } catch (const Failure& f) {
    status = report(state, std::string(name) + ": " + f.message);
  } catch (const std::exception& e) {
    status = report(state, std::string(name) + ": C++ exception: " + e.what());
  } catch (...) {
    status = report(state, std::string(name) + ": unknown C++ exception");
  }
  call_state() = previous;
  return status;
}

struct Registrar {
  Registrar(const char* name, const std::string& signature, Trampoline fn) {
    ca_register_op(name, signature.c_str(), fn);
  }
};

}  // namespace detail
}  // namespace ca

#define CA_EXPORT(fn)                                                                              \
  static ::ca::detail::Registrar ca_registrar_##fn(                                                \
      #fn, ::ca::detail::signature_of(&fn),                                                        \
      [](const ::ca::Value* args, int32_t nargs, ::ca::detail::CallState* state) -> int {          \
        return ::ca::detail::invoke(&fn, #fn, args, nargs, state);                                 \
      })
