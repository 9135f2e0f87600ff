// Rewrites the global offset table entries of every loaded library that imports `name` so that they point at
// `replacement`: a call from libtorch_cuda or libc10_cuda into the CUDA runtime then lands here instead.
#pragma once
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace got {

struct Request {
  const char* name;
  void* replacement;
  uintptr_t own_base;
  int patched;
};

inline uintptr_t absolute(const dl_phdr_info* info, ElfW(Addr) pointer) {
  return pointer < info->dlpi_addr ? info->dlpi_addr + pointer : pointer;
}

inline bool is_slot(unsigned type) {
#if defined(__x86_64__)
  return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
  return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT;
#else
  return false;
#endif
}

inline void rewrite(Request* request, const dl_phdr_info* info, const ElfW(Rela)* relocs, size_t bytes,
                    const ElfW(Sym)* symbols, const char* strings) {
  long page = sysconf(_SC_PAGESIZE);
  for (size_t i = 0; relocs != nullptr && i < bytes / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)& r = relocs[i];
    if (!is_slot(ELF64_R_TYPE(r.r_info)) || ELF64_R_SYM(r.r_info) == 0) continue;
    if (strcmp(strings + symbols[ELF64_R_SYM(r.r_info)].st_name, request->name) != 0) continue;
    void** slot = reinterpret_cast<void**>(info->dlpi_addr + r.r_offset);
    uintptr_t start = reinterpret_cast<uintptr_t>(slot) & ~(uintptr_t)(page - 1);
    if (mprotect(reinterpret_cast<void*>(start), page, PROT_READ | PROT_WRITE) != 0) continue;
    *slot = request->replacement;
    request->patched += 1;
  }
}

inline int visit(dl_phdr_info* info, size_t, void* data) {
  Request* request = static_cast<Request*>(data);
  if (info->dlpi_addr == request->own_base) return 0;
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dynamic == nullptr || info->dlpi_name == nullptr || strstr(info->dlpi_name, "vdso") != nullptr) return 0;
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Rela)* plt = nullptr;
  const ElfW(Rela)* rela = nullptr;
  size_t plt_bytes = 0, rela_bytes = 0;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symbols = reinterpret_cast<const ElfW(Sym)*>(absolute(info, d->d_un.d_ptr)); break;
      case DT_STRTAB: strings = reinterpret_cast<const char*>(absolute(info, d->d_un.d_ptr)); break;
      case DT_JMPREL: plt = reinterpret_cast<const ElfW(Rela)*>(absolute(info, d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: plt_bytes = d->d_un.d_val; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(absolute(info, d->d_un.d_ptr)); break;
      case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
      default: break;
    }
  }
  if (symbols == nullptr || strings == nullptr) return 0;
  rewrite(request, info, plt, plt_bytes, symbols, strings);
  rewrite(request, info, rela, rela_bytes, symbols, strings);
  return 0;
}

// Returns how many slots now point at `replacement` (0: nothing imports `name` through a GOT, e.g. a static runtime).
inline int redirect(const char* name, void* replacement) {
  Dl_info self;
  uintptr_t own = 0;
  if (dladdr(reinterpret_cast<void*>(&redirect), &self) != 0) own = reinterpret_cast<uintptr_t>(self.dli_fbase);
  Request request{name, replacement, own, 0};
  dl_iterate_phdr(&visit, &request);
  return request.patched;
}

}  // namespace got
