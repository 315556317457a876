"""The channel between the trusted harness and the student's kernel (`autograder.channel.wire`, `autograder.channel.tensors`,
`autograder.channel.served`, `autograder.channel.session`): what crosses, what is refused, and what a broken kernel costs.

The session tests talk to a real ``python -m tests.stand_in_kernel`` subprocess (the bank's stand-in kernel);
the refusal tests drive the trusted side with frames written by hand over a socket pair.
"""

from __future__ import annotations

import inspect
import math
import socket
import struct
import threading
import time

import numpy as np
import pytest
import torch

from autograder.channel.codec import Codec
from autograder.channel.wire import ChannelError, ChannelLimits, Frame, Ref, recv_frame, send_frame
from autograder.channel.handles import RemoteObject
from autograder.channel import served
from autograder.channel.classes import RemoteError
from autograder.channel.session import Session, wait_for_connection
from autograder.channel.tensors import SandboxStorages, TrustedStorages, encode_plain
from tests.stand_in import StandIn

STUDENT = '''
import numpy as np, torch, torch.nn as nn

def echo(x):
    return x

def add_one(a):
    a += 1

class Cache:
    def __init__(self):
        self.buffer = torch.zeros(2, 6)
        self.filled = 0
    def update(self, row):
        self.buffer[:, self.filled] = row
        self.filled += 1
        return self.buffer[:, :self.filled]

class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 2)
    def forward(self, x):
        return self.proj(x)

def square_sum(x):
    return (x * x).sum()

def use(model, n):
    return [model(i) for i in range(n)]

def meddle(model):
    shapes = [tuple(p.shape) for p in model.parameters()]
    try:
        model.load_state_dict({"weight": torch.zeros(1, 1), "bias": torch.zeros(1)})
    except AttributeError as error:
        return shapes, model.own_method(), str(error)
    return shapes, None, "changed the grader's model"

class Custom(ValueError):
    pass

def raises(kind):
    raise {"value": ValueError("has a zero"), "custom": Custom("mine"), "exit": SystemExit(3)}[kind]

class LiarFloat(np.float64):
    pass

class LiarTensor(torch.Tensor):
    pass

def liar_float():
    return LiarFloat(1.0)

def liar_tensor():
    return torch.ones(2).as_subclass(LiarTensor)

def hang():
    while True:
        pass
'''


@pytest.fixture()
def names(stand_in):
    session = stand_in.session()
    assert session.request({"op": "exec"}, STUDENT)[0]["error"] is None
    names = session.lookup(["echo", "add_one", "Cache", "Layer", "square_sum", "use", "meddle", "raises", "liar_float",
                            "liar_tensor", "missing"])
    yield names


def _codec() -> Codec:
    def no_refs(value):
        raise TypeError(f"not data: {type(value).__name__}")

    return Codec(no_refs, lambda ref: ref, encode_plain, TrustedStorages().decode)


@pytest.mark.parametrize("value", [
    None, True, 3, -(2**70), 1.5, math.inf, "text", 2 + 3j, [1, (2, 3)], (), {"a": 1, (1, "b"): [None]},
    slice(1, None, 2), Ellipsis, np.arange(6, dtype=np.int8).reshape(2, 3), np.float32(2.5), np.bool_(True),
    torch.float16, torch.device("cpu"), torch.Size([2, 3]),
])
def test_plain_data_crosses_with_its_exact_type(value) -> None:
    codec = _codec()
    buffers: list[bytes] = []
    back = codec.decode(codec.encode(value, buffers), buffers)
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value) and back.flags.writeable
    else:
        assert back == value or back is value


def test_a_tensor_crosses_as_its_dtype_and_values() -> None:
    codec = _codec()
    value = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)[:, 1:]
    buffers: list[bytes] = []
    back = codec.decode(codec.encode(value, buffers), buffers)
    assert type(back) is torch.Tensor and back.dtype == torch.bfloat16 and torch.equal(back, value)


@pytest.mark.parametrize("header, buffers, why", [
    ({"$": "nd", "dtype": "object", "shape": [1], "b": 0}, [b"x" * 8], "dtype"),
    ({"$": "nd", "dtype": "float64", "shape": [3], "b": 0}, [b"x" * 8], "do not match"),
    ({"$": "nd", "dtype": "float64", "shape": [1], "b": 5}, [], "out of range"),
    ({"$": "pickle", "v": "gASV"}, [], "unknown tag"),
    ({"$": "pt", "dtype": "float64", "shape": [2], "b": 0, "view": [0, 3, [1]]}, [b"x" * 16], "outside"),
    ({"$": "dict", "k": [[1]], "v": [1]}, [], "key"),
    ({"$": "ref", "side": "elsewhere", "id": 1, "type": "x", "callable": True}, [], "reference"),
    ({"$": "int", "v": "9" * 5000}, [], "too large"),
    ({"not": "tagged"}, [], "JSON type"),
])
def test_what_the_protocol_does_not_allow_is_refused(header, buffers, why) -> None:
    with pytest.raises(ChannelError, match=why):
        _codec().decode(header, buffers)


def test_nesting_and_size_limits() -> None:
    deep: object = 1
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ChannelError, match="nested"):
        _codec().decode(deep, [])
    left, right = socket.socketpair()
    with left, right:
        left.sendall(struct.pack("<I", 2**31))
        with pytest.raises(ChannelError, match="header of"):
            recv_frame(right, ChannelLimits())


def test_calls_return_genuine_values_and_never_change_the_tests_arguments(names) -> None:
    assert names["echo"](2.5) == 2.5 and type(names["echo"](2.5)) is float
    a = np.zeros(3)
    assert names["add_one"](a) is None
    assert a.tolist() == [0.0, 0.0, 0.0]
    t = torch.zeros(2)
    names["add_one"](t)
    assert t.tolist() == [0.0, 0.0]
    assert names["echo"].__name__ == "echo"


def test_liars_arrive_as_handles_not_as_numbers(names) -> None:
    assert type(names["liar_float"]()) is RemoteObject
    assert type(names["liar_tensor"]()) is RemoteObject


def test_objects_are_handles_that_behave(names) -> None:
    layer = names["Layer"]()
    assert isinstance(layer, torch.nn.Module) and isinstance(layer.proj, torch.nn.Linear)
    assert layer.proj.__class__ is torch.nn.Linear and layer.__class__.__name__ == "Layer"
    assert not isinstance(layer.proj.weight, RemoteObject) and type(layer.proj.weight) is torch.nn.Parameter
    assert list(layer.state_dict()) == ["proj.weight", "proj.bias"]
    layer.load_state_dict({"proj.weight": torch.ones(2, 3), "proj.bias": torch.zeros(2)})
    assert layer(torch.ones(1, 3)).tolist() == [[3.0, 3.0]]
    assert [p.shape for p in layer.parameters()] == [(2, 3), (2,)]


RELEASED = """
import weakref
freed = []

class Box:
    def __init__(self):
        weakref.finalize(self, freed.append, 1)

def count_freed():
    return len(freed)
"""


def test_handles_that_die_here_are_released_there_with_the_next_request(stand_in, monkeypatch) -> None:
    # Each object the kernel sends as a handle stays in its table until the handle dies here; the numbers of the
    # dead ones ride on the next request instead of a request of their own (a fifth of a class's requests).
    import gc

    from autograder.channel import session as session_module

    session = stand_in.session()
    assert session.request({"op": "exec"}, RELEASED)[0]["error"] is None
    names = session.lookup(["Box", "count_freed"])
    boxes = [names["Box"]() for _ in range(5)]
    assert names["count_freed"]() == 0
    del boxes
    gc.collect()
    sent = []
    monkeypatch.setattr(session_module, "send_frame", lambda sock, frame: (sent.append(frame.header.get("op")),
                                                                             send_frame(sock, frame)))
    assert names["count_freed"]() == 5, "the kernel should drop the objects whose handles died before it answers"
    assert sent == ["call"], f"the release should ride on the call, not be a request of its own: sent {sent}"


def test_tensors_that_share_memory_there_share_it_here(names) -> None:
    cache = names["Cache"]()
    first = cache.update(torch.ones(2))
    second = cache.update(torch.full((2,), 2.0))
    assert first.data_ptr() == second.data_ptr()
    assert second.tolist() == [[1.0, 2.0], [1.0, 2.0]]


def test_gradients_flow_back_through_the_students_code(names) -> None:
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    names["square_sum"](x).backward()
    assert torch.allclose(x.grad, 2 * x.detach())
    assert torch.autograd.gradcheck(lambda t: names["square_sum"](t), (x.detach().clone().requires_grad_(),))


def test_the_students_code_calls_the_tests_objects_back(names) -> None:
    calls: list[int] = []
    assert names["use"](lambda i: calls.append(i) or 10 * i, 3) == [0, 10, 20]
    assert calls == [0, 1, 2]


class LentModel(torch.nn.Linear):
    def own_method(self) -> str:
        return "called"


def test_a_lent_module_can_be_read_and_called_but_not_changed(names) -> None:
    model = LentModel(1, 1)
    before = model.weight.detach().clone()
    shapes, own, message = names["meddle"](model)
    assert shapes == [(1, 1), (1,)] and own == "called"
    assert "would change the grader's object" in message
    assert torch.equal(model.weight, before)


def test_exceptions_keep_their_builtin_type_and_message(names) -> None:
    with pytest.raises(ValueError, match="has a zero"):
        names["raises"]("value")
    with pytest.raises(ValueError) as caught:
        names["raises"]("custom")
    assert type(caught.value).__name__ == "Custom" and isinstance(caught.value, RemoteError)
    with pytest.raises(RemoteError) as caught:  # never a SystemExit in the harness
        names["raises"]("exit")
    assert type(caught.value).__name__ == "SystemExit" and isinstance(caught.value, Exception)
    assert names["missing"].type_name == "NameError"


@pytest.mark.slow  # a stand-in kernel of its own, and a call left to time out
def test_a_kernel_that_hangs_breaks_the_session_not_the_harness() -> None:
    kernel = StandIn()
    try:
        session = kernel.session()
        session.request({"op": "exec"}, STUDENT)
        session.timeout = 1.0
        hang = session.lookup(["hang"])["hang"]
        with pytest.raises(ChannelError, match="took too long"):
            hang()
        with pytest.raises(ChannelError):
            session.lookup(["echo"])
    finally:
        kernel.close()


def test_garbage_from_the_kernel_breaks_the_session() -> None:
    trusted, kernel = socket.socketpair()
    session = Session(5)
    session.attach(trusted)

    def answer_with_garbage() -> None:
        recv_frame(kernel)
        kernel.sendall(struct.pack("<I", 5) + b"{nope")

    thread = threading.Thread(target=answer_with_garbage)
    thread.start()
    with pytest.raises(ChannelError, match="not JSON"):
        session.lookup(["x"])
    thread.join()
    with pytest.raises(ChannelError):
        session.lookup(["x"])
    kernel.close()


def test_a_reference_to_an_object_never_lent_is_refused() -> None:
    trusted, kernel = socket.socketpair()
    session = Session(5)
    session.attach(trusted)

    def claim_a_trusted_object() -> None:
        recv_frame(kernel)
        send_frame(kernel, Frame({"ok": {"$": "ref", "side": "trusted", "id": 99, "type": "x", "bases": [],
                                         "callable": True}}))

    thread = threading.Thread(target=claim_a_trusted_object)
    thread.start()
    with pytest.raises(ChannelError, match="never given"):
        session.lookup(["x"])
    thread.join()
    kernel.close()
    assert Ref("trusted", 1).side == "trusted"


def test_a_strided_argument_keeps_its_strides_in_the_kernel(stand_in) -> None:
    session = stand_in.session()
    session.request({"op": "exec"}, "def strides(x):\n    return x.is_contiguous(), x.stride(), x.sum().item()")
    transposed = torch.arange(24.0).reshape(2, 3, 4).transpose(1, 2)
    assert session.lookup(["strides"])["strides"](transposed) == (False, (12, 1, 4), 276.0)


def test_a_warning_in_the_students_code_is_warned_again_in_the_test(stand_in) -> None:
    import warnings

    session = stand_in.session()
    session.request({"op": "exec"}, "import numpy as np\ndef logs(x):\n    return float(np.log(x))\n"
                                      "def truth(c=None):\n    return 1 if c else 0")
    names = session.lookup(["logs", "truth"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert names["logs"](0.0) == -math.inf
    assert [(w.category, str(w.message)) for w in caught] == [(RuntimeWarning, "divide by zero encountered in log")]

    class Plain:
        pass

    assert names["truth"](Plain()) == 1 and names["truth"]([]) == 0


@pytest.mark.parametrize("op", ["exec", "reset", "output"])
def test_a_graded_kernels_server_has_no_test_only_requests(op: str) -> None:
    """The served module ships into every student's kernel: running cells, starting over and keeping what was
    printed are the test suite's stand-in's alone (`tests.stand_in_kernel`)."""
    namespace = {"__name__": "__main__", "kept": threading.Lock()}
    before = dict(namespace)
    server = served.Server(namespace)
    kept = server.answer(Frame({"op": "lookup", "payload": ["kept"]}))  # the lock becomes object number 1
    answer = server.answer(Frame({"op": op, "target": 1, "payload": "kept = 2"}))
    assert server.codec.decode(kept.header["ok"], kept.buffers) == [before["kept"]]
    error = server.codec.decode(answer.header["error"], answer.buffers)
    assert (error.type_name, error.message) == ("ValueError", f"unknown request {op!r}")
    assert namespace == before
    assert list(inspect.signature(served.Server).parameters) == ["namespace"]


def test_a_kernel_keeps_one_server_in_the_namespace_it_serves(tmp_path) -> None:
    """`served.serve` runs once per test cell: the kernel's objects keep their numbers from one cell to the next,
    held by the notebook's namespace, not by a module global of the served module."""
    namespace: dict = {"__name__": "__main__", "echo": lambda x: x}
    session = Session(30)
    numbers = []
    for cell in range(2):
        path = str(tmp_path / f"s{cell}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(1)
            thread = threading.Thread(target=served.serve, args=(path, namespace))
            thread.start()
            session.attach(wait_for_connection(listener, time.monotonic() + 30))
            echo = session.lookup(["echo"])["echo"]
            numbers.append(object.__getattribute__(echo, "_ref").id)
            assert echo(3) == 3
            session.end()
            thread.join(30)
    assert numbers[0] == numbers[1]
    assert type(namespace[served.SERVER_NAME]) is served.Server
    assert not [name for name, value in vars(served).items() if isinstance(value, served.Server | type(None))
                and not name.startswith("__")]


@pytest.mark.parametrize("tensors", [True, False])
def test_a_tensor_crosses_only_a_channel_whose_kernel_can_import_torch(tensors: bool) -> None:
    # A numpy chapter's sandboxed kernel cannot import torch (`autograder.records.tensors_cross`): a tensor its
    # channel sends is a forgery, refused whether or not the grader's process has torch imported (it has, here).
    trusted, kernel = socket.socketpair()
    session = Session(5, tensors=tensors)
    session.attach(trusted)

    def answer_with_a_tensor() -> None:
        recv_frame(kernel)
        buffers: list[bytes] = []
        header = Codec(None, None, SandboxStorages().encode).encode([torch.ones(3)], buffers)  # the value of x
        send_frame(kernel, Frame({"ok": header}, buffers))

    thread = threading.Thread(target=answer_with_a_tensor)
    thread.start()
    try:
        if tensors:
            assert torch.equal(session.lookup(["x"])["x"], torch.ones(3))
        else:
            with pytest.raises(ChannelError, match="the kernel sent"):
                session.lookup(["x"])
    finally:
        thread.join()
        kernel.close()
