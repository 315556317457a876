"""What a frame's header may carry, and the checks on receipt (frames themselves: `autograder.channel.wire`).

What a header may carry, exactly (`Codec.decode` accepts nothing else):

- ``None``, ``bool``, ``int`` (up to 4096 bits), ``float`` (nan and inf included), ``str``, ``complex``;
- ``list``, ``tuple``, ``dict`` (keys: str, int, float, bool, None or tuples of these), ``slice``,
  ``Ellipsis``;
- numpy arrays and scalars of a numeric or boolean dtype (never object), rebuilt as fresh arrays;
- torch tensors (numeric or boolean dtypes, ``nn.Parameter`` marked), ``torch.dtype``,
  ``torch.device``, ``torch.Size``;
- an exception as its type name and message (`RemoteException`);
- a reference (`Ref`) to an object that stays on the other side.

`Codec` turns values into ``(header, buffers)`` and back with exact type checks (``type(x) is``,
never ``isinstance``: a subclass is not data) and size limits (`autograder.channel.wire.ChannelLimits`). Each side gives it
the hooks that make and resolve references and, on the trusted side, that rebuild tensors.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from autograder.channel.wire import ChannelError, ChannelLimits, Ref, RemoteException

NUMERIC_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                            "float16", "float32", "float64", "complex64", "complex128"})
TORCH_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
                          "float64", "complex64", "complex128"})
NUMPY_SCALARS = frozenset(np.dtype(name).type for name in NUMERIC_DTYPES)
KEY_TYPES = (str, int, float, bool, type(None))


class Codec:
    """Values to frames and back, for one side of one channel.

    ``make_ref(obj)`` returns the `Ref` for an object that is not data (or raises TypeError where the
    side sends only data); ``resolve_ref(ref)`` returns what a received `Ref` stands for.
    ``encode_tensor(tensor, buffers)`` and ``decode_tensor(header, buffers)`` handle torch tensors
    (only sides that have torch imported set them).
    """

    def __init__(self, make_ref: Callable[[Any], Ref], resolve_ref: Callable[[Ref], Any],
                 encode_tensor: Callable[[Any, list[bytes]], dict] | None = None,
                 decode_tensor: Callable[[dict, list[bytes]], Any] | None = None,
                 limits: ChannelLimits = ChannelLimits()) -> None:
        self.make_ref, self.resolve_ref = make_ref, resolve_ref
        self.encode_tensor, self.decode_tensor = encode_tensor, decode_tensor
        self.limits = limits

    # -- encoding ----------------------------------------------------------------------------------
    def encode(self, value: Any, buffers: list[bytes]) -> Any:
        """The header for ``value``; its arrays' bytes are appended to ``buffers``."""
        kind = type(value)
        if value is None or kind in (bool, str):
            return value
        if kind is int:
            return value if abs(value) < 2**53 else {"$": "int", "v": str(value)}
        if kind is float:
            return value
        if kind is list:
            return [self.encode(item, buffers) for item in value]
        if kind is tuple:
            return {"$": "tuple", "v": [self.encode(item, buffers) for item in value]}
        if kind is dict or (kind.__name__ == "OrderedDict" and kind.__module__ == "collections"):
            return {"$": "dict", "k": [self.encode(key, buffers) for key in value],
                    "v": [self.encode(item, buffers) for item in value.values()]}
        if kind is complex:
            return {"$": "complex", "v": [value.real, value.imag]}
        if kind is slice:
            return {"$": "slice", "v": [self.encode(part, buffers) for part in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"$": "ellipsis"}
        if kind is np.ndarray and value.dtype.name in NUMERIC_DTYPES:
            buffers.append(np.ascontiguousarray(value).tobytes())
            return {"$": "nd", "dtype": value.dtype.name, "shape": list(value.shape), "b": len(buffers) - 1}
        if kind in NUMPY_SCALARS:
            buffers.append(value.tobytes())
            return {"$": "np", "dtype": np.dtype(kind).name, "b": len(buffers) - 1}
        if kind is RemoteException:
            return {"$": "exc", "type": value.type_name, "msg": value.message, "bases": list(value.bases)}
        if self.encode_tensor is not None and kind.__module__.startswith("torch"):
            encoded = self.encode_tensor(value, buffers)
            if encoded is not None:
                return encoded
        ref = self.make_ref(value)
        return {"$": "ref", "side": ref.side, "id": ref.id, "type": ref.type_name, "bases": list(ref.bases),
                "callable": ref.callable}

    # -- decoding ----------------------------------------------------------------------------------
    def decode(self, header: Any, buffers: list[bytes]) -> Any:
        """The value ``header`` stands for; ChannelError for anything the protocol does not allow."""
        return _Decoder(self, buffers).value(header, 0)


class _Decoder:
    """One pass over a received header, counting items against the limits."""

    def __init__(self, codec: Codec, buffers: list[bytes]) -> None:
        self.codec, self.buffers, self.items = codec, buffers, 0

    def fail(self, what: str) -> ChannelError:
        return ChannelError(f"the kernel sent {what}")

    def buffer(self, index: Any) -> bytes:
        if type(index) is not int or not 0 <= index < len(self.buffers):
            raise self.fail(f"a buffer index {index!r} out of range")
        return self.buffers[index]

    def shape(self, shape: Any) -> tuple[int, ...]:
        if type(shape) is not list or len(shape) > 64 or any(type(n) is not int or n < 0 for n in shape):
            raise self.fail(f"a shape {str(shape)[:80]}")
        return tuple(shape)

    def string(self, value: Any) -> str:
        if type(value) is not str or len(value) > self.codec.limits.string_chars:
            raise self.fail("a string that is too long or not a string")
        return value

    def value(self, header: Any, depth: int) -> Any:
        self.items += 1
        limits = self.codec.limits
        if depth > limits.depth or self.items > limits.items:
            raise self.fail("a value nested too deep or too large")
        kind = type(header)
        if header is None or kind in (bool, float):
            return header
        if kind is int:
            return header
        if kind is str:
            return self.string(header)
        if kind is list:
            return [self.value(item, depth + 1) for item in header]
        if kind is not dict or type(header.get("$")) is not str:
            raise self.fail(f"a value of JSON type {kind.__name__}")
        return self.tagged(header, depth)

    def tagged(self, header: dict, depth: int) -> Any:
        tag = header["$"]
        if tag == "int":
            text = self.string(header.get("v"))
            if len(text) > self.codec.limits.int_bits // 3 + 2 or not text.lstrip("-").isdigit():
                raise self.fail("an integer that is too large or malformed")
            return int(text)
        if tag == "tuple":
            items = header.get("v")
            if type(items) is not list:
                raise self.fail("a malformed tuple")
            return tuple(self.value(item, depth + 1) for item in items)
        if tag == "dict":
            keys, values = header.get("k"), header.get("v")
            if type(keys) is not list or type(values) is not list or len(keys) != len(values):
                raise self.fail("a malformed dict")
            out = {}
            for key, item in zip(keys, values):
                decoded = self.value(key, depth + 1)
                if not _hashable_plain(decoded):
                    raise self.fail(f"a dict key of type {type(decoded).__name__}")
                out[decoded] = self.value(item, depth + 1)
            return out
        if tag == "complex":
            parts = header.get("v")
            if type(parts) is not list or len(parts) != 2 or any(type(p) not in (float, int) for p in parts):
                raise self.fail("a malformed complex number")
            return complex(parts[0], parts[1])
        if tag == "slice":
            parts = header.get("v")
            if type(parts) is not list or len(parts) != 3:
                raise self.fail("a malformed slice")
            return slice(*(self.value(part, depth + 1) for part in parts))
        if tag == "ellipsis":
            return Ellipsis
        if tag in ("nd", "np"):
            return self.array(header, tag)
        if tag == "exc":
            bases = header.get("bases", [])
            if type(bases) is not list:
                raise self.fail("a malformed exception")
            return RemoteException(self.string(header.get("type"))[:200], self.string(header.get("msg"))[:20_000],
                                   tuple(self.string(b)[:200] for b in bases[:20]))
        if tag == "ref":
            return self.ref(header)
        if self.codec.decode_tensor is not None and tag in ("pt", "dtype", "device", "size", "sdpa"):
            return self.codec.decode_tensor(header, self.buffers)
        raise self.fail(f"an unknown tag {tag[:40]!r}")

    def array(self, header: dict, tag: str) -> Any:
        dtype = header.get("dtype")
        if dtype not in NUMERIC_DTYPES:
            raise self.fail(f"an array of dtype {str(dtype)[:40]!r}")
        raw = self.buffer(header.get("b"))
        if tag == "np":
            if len(raw) != np.dtype(dtype).itemsize:
                raise self.fail("a numpy scalar of the wrong size")
            return np.frombuffer(raw, dtype=dtype)[0].copy()
        shape = self.shape(header.get("shape"))
        if math.prod(shape) * np.dtype(dtype).itemsize != len(raw):
            raise self.fail(f"an array whose bytes do not match its shape {shape} and dtype {dtype}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()

    def ref(self, header: dict) -> Any:
        side, number, bases = header.get("side"), header.get("id"), header.get("bases", [])
        if side not in ("sandbox", "trusted") or type(number) is not int or type(bases) is not list \
                or type(header.get("callable")) is not bool:
            raise self.fail("a malformed reference")
        ref = Ref(side, number, self.string(header.get("type"))[:200], tuple(self.string(b)[:200] for b in bases[:40]),
                  header["callable"])
        return self.codec.resolve_ref(ref)


def _hashable_plain(key: Any) -> bool:
    if type(key) in KEY_TYPES:
        return True
    return type(key) is tuple and all(_hashable_plain(part) for part in key)
