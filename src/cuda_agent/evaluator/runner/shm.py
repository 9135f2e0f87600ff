"""Memory shared between the judge and the candidate process, exported as a file descriptor.

On a GPU: device memory made with the CUDA driver's virtual memory API (``cuMemCreate`` with a POSIX file descriptor
handle), so that it can cross namespaces as an ordinary descriptor (SCM_RIGHTS) and is mapped by the importer with
``cuMemImportFromShareableHandle``. Each region is its own allocation: nothing else of the judge's (goldens, the
reference's weights, its caching allocator's blocks) lies in memory the candidate can map. On a CPU: a memfd.

Standard library and torch only: the sandboxed candidate imports this module too.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from typing import Any

import torch

ALIGN = 512  # byte alignment of every view inside a region (float4 loads and cache lines)

_CU_MEM_ALLOCATION_TYPE_PINNED = 1
_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
_CU_MEM_LOCATION_TYPE_DEVICE = 1
_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0


class SharedMemoryError(RuntimeError):
    """A region could not be made, exported or mapped."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_driver: Any = None


def _cu() -> Any:
    global _driver
    if _driver is None:
        try:
            _driver = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise SharedMemoryError(f"the CUDA driver library is not loadable: {exc}") from exc
    return _driver


def _check(status: int, what: str) -> None:
    if status != 0:
        name = ctypes.c_char_p()
        _cu().cuGetErrorName(status, ctypes.byref(name))
        raise SharedMemoryError(f"{what} failed: {name.value.decode() if name.value else status}")


def _prop(device_index: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    prop.location = _Location(_CU_MEM_LOCATION_TYPE_DEVICE, device_index)
    return prop


def _granularity(device_index: int) -> int:
    size = ctypes.c_size_t()
    prop = _prop(device_index)
    _check(_cu().cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(prop),
                                               _CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity")
    return int(size.value)


class _CudaArray:
    """The smallest object torch.as_tensor accepts for device memory it does not own."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 2, "strides": None}


def _ensure_context(device: torch.device) -> None:
    """Make the device's primary context current on this thread (the driver calls below run in it)."""
    torch.cuda.set_device(device)
    torch.empty(1, device=device)
    torch.cuda.synchronize(device)


class SharedRegion:
    """One shared allocation of ``nbytes`` on ``device``, as a flat uint8 tensor (``flat``) and a file descriptor
    (``fd``) the other side attaches with `SharedRegion.attach`. Close it when done; the memory stays valid for
    whoever still maps it."""

    def __init__(self, device: torch.device, nbytes: int, fd: int, flat: torch.Tensor, cleanup: Any) -> None:
        self.device = device
        self.nbytes = nbytes
        self.fd = fd
        self.flat = flat
        self._cleanup = cleanup

    @classmethod
    def create(cls, nbytes: int, device: torch.device | str) -> "SharedRegion":
        """A new region of at least ``nbytes`` bytes. Raises SharedMemoryError."""
        device = torch.device(device)
        nbytes = max(int(nbytes), ALIGN)
        if device.type == "cpu":
            # Rationale: the candidate holds the descriptor; sealed, it can write the memory but never shrink it
            # under the judge's mapping (which would end the judge with SIGBUS).
            fd = os.memfd_create("cuda-agent-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            return cls._map_cpu(fd, nbytes, device)
        if device.type != "cuda":
            raise SharedMemoryError(f"shared memory on {device} is not supported")
        _ensure_context(device)
        index = device.index if device.index is not None else torch.cuda.current_device()
        gran = _granularity(index)
        size = (nbytes + gran - 1) // gran * gran
        handle = ctypes.c_ulonglong()
        prop = _prop(index)
        _check(_cu().cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
                                 ctypes.c_ulonglong(0)), "cuMemCreate")
        fd = ctypes.c_int(-1)
        status = _cu().cuMemExportToShareableHandle(ctypes.byref(fd), handle,
                                                    _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, ctypes.c_ulonglong(0))
        if status != 0:
            _cu().cuMemRelease(handle)
            _check(status, "cuMemExportToShareableHandle")
        os.set_inheritable(fd.value, False)
        return cls._map_cuda(handle, fd.value, size, device, index)

    @classmethod
    def attach(cls, fd: int, nbytes: int, device: torch.device | str) -> "SharedRegion":
        """Map a region exported by the other side (``fd`` is taken over). Raises SharedMemoryError."""
        device = torch.device(device)
        if device.type == "cpu":
            return cls._map_cpu(fd, nbytes, device)
        _ensure_context(device)
        index = device.index if device.index is not None else torch.cuda.current_device()
        handle = ctypes.c_ulonglong()
        _check(_cu().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                                    _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle")
        return cls._map_cuda(handle, fd, nbytes, device, index)

    @classmethod
    def _map_cpu(cls, fd: int, nbytes: int, device: torch.device) -> "SharedRegion":
        mapping = mmap.mmap(fd, nbytes)
        flat = torch.frombuffer(mapping, dtype=torch.uint8)

        def cleanup() -> None:
            try:
                mapping.close()
            except BufferError:  # a tensor still views it; the mapping goes with the process
                pass

        return cls(device, nbytes, fd, flat, cleanup)

    @classmethod
    def _map_cuda(cls, handle: ctypes.c_ulonglong, fd: int, size: int, device: torch.device,
                  index: int) -> "SharedRegion":
        cu = _cu()
        pointer = ctypes.c_ulonglong()
        try:
            _check(cu.cuMemAddressReserve(ctypes.byref(pointer), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                          ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
            _check(cu.cuMemMap(pointer, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0)),
                   "cuMemMap")
            access = _AccessDesc(_Location(_CU_MEM_LOCATION_TYPE_DEVICE, index), _CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            _check(cu.cuMemSetAccess(pointer, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
                   "cuMemSetAccess")
        except SharedMemoryError:
            cu.cuMemRelease(handle)
            raise
        flat = torch.as_tensor(_CudaArray(pointer.value, size), device=device)

        def cleanup() -> None:
            torch.cuda.synchronize(device)
            cu.cuMemUnmap(pointer, ctypes.c_size_t(size))
            cu.cuMemAddressFree(pointer, ctypes.c_size_t(size))
            cu.cuMemRelease(handle)

        return cls(device, size, fd, flat, cleanup)

    def view(self, offset: int, shape: list[int] | tuple[int, ...], strides: list[int] | tuple[int, ...],
             dtype: torch.dtype) -> torch.Tensor:
        """A tensor over this region: ``shape``/``strides`` in elements of ``dtype``, starting at byte ``offset``.
        Raises SharedMemoryError when it would not fit."""
        item = torch.empty((), dtype=dtype).element_size()
        if offset % ALIGN or offset < 0:
            raise SharedMemoryError(f"view offset {offset} is not a multiple of {ALIGN}")
        span = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(s > 0 for s in shape) else 0
        if any(st < 0 for st in strides) or offset + span * item > self.nbytes:
            raise SharedMemoryError(f"view of {list(shape)} {dtype} at {offset} does not fit in {self.nbytes} bytes")
        count = max(span, 1)
        base = self.flat[offset: offset + count * item].view(dtype)
        return base.as_strided(tuple(shape), tuple(strides))

    def close(self) -> None:
        """Unmap (after the device is idle) and close the descriptor. Idempotent."""
        cleanup, self._cleanup = self._cleanup, None
        self.flat = None  # type: ignore[assignment]
        if cleanup is not None:
            cleanup()
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def dtype_from_name(name: str) -> torch.dtype:
    """``"float32"`` -> torch.float32; raises SharedMemoryError for anything that is not a torch dtype."""
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise SharedMemoryError(f"unknown dtype {name!r}")
    return value


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
