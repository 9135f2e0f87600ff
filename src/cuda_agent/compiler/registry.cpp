// The op table every workspace library carries: kernel files add entries through CA_EXPORT at load time, and
// cuda_agent/compiler/runtime.py reads them back through the three C functions below.
#include <cstdint>
#include <string>
#include <vector>

namespace {
using Trampoline = int (*)(const void* args, int32_t nargs, void* state);
struct Entry {
  std::string name;
  std::string signature;
  Trampoline fn;
};
std::vector<Entry>& table() {
  static std::vector<Entry> entries;
  return entries;
}
}  // namespace

extern "C" {
void ca_register_op(const char* name, const char* signature, Trampoline fn) {
  table().push_back(Entry{name, signature, fn});
}
int32_t ca_op_count() { return static_cast<int32_t>(table().size()); }
const char* ca_op_name(int32_t i) { return table()[i].name.c_str(); }
const char* ca_op_signature(int32_t i) { return table()[i].signature.c_str(); }
void* ca_op_function(int32_t i) { return reinterpret_cast<void*>(table()[i].fn); }
}
