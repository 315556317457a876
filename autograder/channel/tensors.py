"""Torch values on the channel (`autograder.channel.codec`): dtypes, devices, sizes and tensors.

A tensor crosses as its dtype, shape and bytes. From the sandbox it also says which storage it lives
in (a number the sandbox gives each storage it has sent), its offset and strides, with the whole
storage's bytes: the trusted side keeps one storage per number and rebuilds the tensor as a view
of it, so two tensors that share memory in the student's kernel share it on the trusted side too
(a cache's buffers keep their data pointer from one call to the next), and a later answer that
sends the same storage updates the views made before. Both sides start afresh with each test cell,
so the kernel holds the storages it sent for one cell only. A storage much larger than the tensor
crosses as the tensor's own bytes instead. Tensors sent to the sandbox cross as copies, each in a
storage of its own, with their strides kept (a transposed argument stays non-contiguous there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.attention

from autograder.channel.codec import TORCH_DTYPES
from autograder.channel.wire import ChannelError

WHOLE_STORAGE_BYTES = 64 << 20
# A view may show more elements than its storage holds (an expanded tensor, stride 0), but its size may exceed the
# storage's by at most this factor, or this many bytes: a few bytes on the wire never become gigabytes here.
VIEW_FACTOR = 16
VIEW_FREE_BYTES = 1 << 20
DEVICE = re.compile(r"(cpu|cuda|meta|mps)(:\d{1,3})?")


def bytes_of(tensor: torch.Tensor) -> bytes:
    """The tensor's values, C order, as bytes."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def _storage_bytes(storage: torch.UntypedStorage) -> bytes:
    raw = torch.empty(0, dtype=torch.uint8).set_(storage.cpu() if storage.device.type != "cpu" else storage)
    return raw.numpy().tobytes()


def _dtype(name: Any) -> torch.dtype:
    if name not in TORCH_DTYPES:
        raise ChannelError(f"the kernel sent a tensor of dtype {str(name)[:40]!r}")
    return getattr(torch, name)


def _small_value(value: Any, buffers: list[bytes]) -> dict | None:
    """dtype, device and Size, the same on both sides."""
    kind = type(value)
    if kind is torch.dtype:
        name = str(value).removeprefix("torch.")
        return {"$": "dtype", "v": name} if name in TORCH_DTYPES else None
    if kind is torch.device:
        return {"$": "device", "v": str(value)}
    if kind is torch.Size:
        return {"$": "size", "v": list(value)}
    if kind is torch.nn.attention.SDPBackend:
        return {"$": "sdpa", "v": value.name}
    return None


def _decode_small(header: dict) -> Any:
    tag, value = header["$"], header.get("v")
    if tag == "dtype":
        return _dtype(value)
    if tag == "sdpa":
        member = getattr(torch.nn.attention.SDPBackend, value, None) if type(value) is str else None
        if type(member) is not torch.nn.attention.SDPBackend:
            raise ChannelError(f"the kernel sent an SDPA backend {str(value)[:40]!r}")
        return member
    if tag == "device":
        if type(value) is not str or not DEVICE.fullmatch(value):
            raise ChannelError(f"the kernel sent a device {str(value)[:40]!r}")
        return torch.device(value)
    if type(value) is not list or len(value) > 64 or any(type(n) is not int or n < 0 for n in value):
        raise ChannelError("the kernel sent a malformed torch.Size")
    return torch.Size(value)


def _shape(header: dict) -> tuple[int, ...]:
    shape = header.get("shape")
    if type(shape) is not list or len(shape) > 64 or any(type(n) is not int or n < 0 for n in shape):
        raise ChannelError("the kernel sent a malformed tensor shape")
    return tuple(shape)


def _compact(raw: bytes, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    itemsize = torch.empty(0, dtype=dtype).element_size()
    count = 1
    for n in shape:
        count *= n
    if count * itemsize != len(raw):
        raise ChannelError(f"the kernel sent a tensor whose bytes do not match its shape {shape} and dtype {dtype}")
    if not count:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)


def _finish(tensor: torch.Tensor, header: dict) -> torch.Tensor:
    grad, param = header.get("grad", False), header.get("param", False)
    if type(grad) is not bool or type(param) is not bool:
        raise ChannelError("the kernel sent malformed tensor flags")
    if grad and not (tensor.is_floating_point() or tensor.is_complex()):
        raise ChannelError("the kernel sent an integer tensor that requires grad")
    if param:
        return torch.nn.Parameter(tensor, requires_grad=grad)
    return tensor.requires_grad_(grad) if grad else tensor


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors of ``value`` in the one order both sides walk it: the value itself, or the items of its lists and
    tuples and the values of its dicts, depth first (so gradients and outputs pair up across the channel)."""
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return [value]
    if type(value) in (list, tuple):
        return [t for item in value for t in tensors_in(item)]
    if type(value) is dict:
        return [t for item in value.values() for t in tensors_in(item)]
    return []


def _tensor_header(value: Any) -> dict | None:
    """The header of a tensor that can cross (a strided tensor of an allowed dtype), without its bytes."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.layout != torch.strided:
        return None
    name = str(value.dtype).removeprefix("torch.")
    if name not in TORCH_DTYPES:
        return None
    return {"$": "pt", "dtype": name, "shape": list(value.shape), "grad": bool(value.requires_grad),
            "param": type(value) is torch.nn.Parameter}


def encode_plain(value: Any, buffers: list[bytes]) -> dict | None:
    """Trusted side: a tensor as a plain copy (with its requires_grad flag); None for what is not torch data."""
    small = _small_value(value, buffers)
    if small is not None:
        return small
    header = _tensor_header(value)
    if header is None:
        return None
    storage = value.untyped_storage()
    if not value.is_contiguous() and value.device.type == "cpu" and _small(storage, value):
        buffers.append(_storage_bytes(storage))  # a transposed or expanded tensor stays one there too
        header["view"] = [-1, value.storage_offset(), list(value.stride())]
    else:
        buffers.append(bytes_of(value))
    header["b"] = len(buffers) - 1
    return header


def decode_plain(header: dict, buffers: list[bytes]) -> Any:
    """Sandbox side: rebuild what `encode_plain` sent (with its strides, in a storage of its own)."""
    if header["$"] != "pt":
        return _decode_small(header)
    dtype, shape, raw = _dtype(header.get("dtype")), _shape(header), _buffer(header, buffers)
    if header.get("view") is None:
        return _finish(_compact(raw, dtype, shape), header)
    _, offset, stride = _checked_view(header.get("view"), dtype, shape, len(raw))
    return _finish(_view(_filled(torch.UntypedStorage(len(raw)), raw), dtype, shape, offset, stride), header)


def _small(storage: torch.UntypedStorage, value: torch.Tensor) -> bool:
    """Whether the whole storage is worth sending for the view's sake."""
    own = value.numel() * value.element_size()
    return storage.nbytes() <= min(WHOLE_STORAGE_BYTES, max(4 * own, 1 << 20))


def _checked_view(view: Any, dtype: torch.dtype, shape: tuple[int, ...], nbytes: int) -> tuple[int, int, list[int]]:
    """[storage number, offset, strides], checked against the shape and the storage's size."""
    if (type(view) is not list or len(view) != 3 or type(view[0]) is not int or type(view[1]) is not int
            or view[1] < 0 or type(view[2]) is not list or len(view[2]) != len(shape)
            or any(type(s) is not int or s < 0 for s in view[2])):
        raise ChannelError("the kernel sent a malformed tensor view")
    number, offset, stride = view
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if all(shape) and (offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1) * itemsize > nbytes:
        raise ChannelError("the kernel sent a tensor view outside its storage")
    count = 1
    for n in shape:
        count *= n
    if count * itemsize > max(VIEW_FACTOR * nbytes, VIEW_FREE_BYTES):
        raise ChannelError(f"the kernel sent a tensor view of shape {shape} ({count * itemsize} bytes) over a storage "
                           f"of {nbytes} bytes: more than {VIEW_FACTOR} times its storage")
    return number, offset, stride


def _filled(storage: torch.UntypedStorage, raw: bytes) -> torch.UntypedStorage:
    if raw:
        torch.empty(0, dtype=torch.uint8).set_(storage).copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
    return storage


def _view(storage: torch.UntypedStorage, dtype: torch.dtype, shape: tuple[int, ...], offset: int,
          stride: list[int]) -> torch.Tensor:
    try:
        return torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
    except RuntimeError as error:
        raise ChannelError(f"the kernel sent a tensor view outside its storage: {error}") from None


def _buffer(header: dict, buffers: list[bytes]) -> bytes:
    index = header.get("b")
    if type(index) is not int or not 0 <= index < len(buffers):
        raise ChannelError("the kernel sent a buffer index out of range")
    return buffers[index]


@dataclass
class SandboxStorages:
    """Sandbox side: the number of each storage sent so far in this test cell (held until the cell ends, so that
    no number is reused for another storage at the same address)."""

    numbers: dict[int, int] = field(default_factory=dict)
    held: list[torch.UntypedStorage] = field(default_factory=list)

    def reset(self) -> None:
        """A new test cell: forget (and let go of) the storages sent so far."""
        self.numbers.clear()
        self.held.clear()

    def encode(self, value: Any, buffers: list[bytes]) -> dict | None:
        """A tensor with its storage's number, offset and strides (and the storage's bytes)."""
        small = _small_value(value, buffers)
        if small is not None:
            return small
        header = _tensor_header(value)
        if header is None:
            return None
        storage = value.untyped_storage()
        if _small(storage, value) and value.device.type == "cpu":
            key = storage.data_ptr()
            if key not in self.numbers:
                self.numbers[key] = len(self.numbers)
                self.held.append(storage)
            buffers.append(_storage_bytes(storage))
            header["view"] = [self.numbers[key], value.storage_offset(), list(value.stride())]
        else:
            buffers.append(bytes_of(value))
        header["b"] = len(buffers) - 1
        return header


@dataclass
class TrustedStorages:
    """Trusted side: one storage per number the sandbox gave, updated by each later answer."""

    storages: dict[int, torch.UntypedStorage] = field(default_factory=dict)

    def reset(self) -> None:
        """A new test cell: the sandbox numbers its storages afresh."""
        self.storages.clear()

    def decode(self, header: dict, buffers: list[bytes]) -> Any:
        """Rebuild a tensor (a view of its storage when the sandbox said which)."""
        if header["$"] != "pt":
            return _decode_small(header)
        dtype, shape, raw = _dtype(header.get("dtype")), _shape(header), _buffer(header, buffers)
        view = header.get("view")
        if view is None:
            return _finish(_compact(raw, dtype, shape), header)
        number, offset, stride = _checked_view(view, dtype, shape, len(raw))
        storage = self.storages.get(number)
        if storage is None or storage.nbytes() != len(raw):
            storage = torch.UntypedStorage(len(raw))
            self.storages[number] = storage
        return _finish(_view(_filled(storage, raw), dtype, shape, offset, stride), header)
