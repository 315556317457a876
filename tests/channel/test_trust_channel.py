"""Nothing the kernel sends changes the grader (issue 32, items 2, 3, 4, 9 and 10), at the channel itself.

Each test talks to a real ``python -m tests.stand_in_kernel`` stand-in kernel (or drives the trusted side with frames
written by hand) and plays one attack of a student who has read the grader: the kernel's random state, values
written back into the test's arrays, a handle posing as a tensor, a few bytes that become gigabytes, a student's
OSError taken for the channel's failure. `tests/harness/test_trusted_oracles.py` grades submissions doing the same.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import torch

from autograder import checks
from autograder.channel.wire import ChannelError, Frame, Ref, RemoteException, recv_frame, send_frame
from autograder.channel.classes import RemoteError, StudentClasses
from autograder.channel.handles import RemoteObject
from autograder.channel.session import Session
from autograder.channel.tensors import TrustedStorages

STUDENT = '''
import numpy as np, torch, torch.nn as nn

def zero_the_generator():  # the Mersenne Twister's words zeroed: every later draw is 0
    state = torch.get_rng_state()
    state[24:24 + 624 * 8] = 0
    torch.set_rng_state(state)
    return float(torch.randn(8).abs().sum())

def seeded_layer():
    return nn.Linear(3, 2)

def zero_inputs(q, k):
    q[...] = 0
    k.zero_()
    return 1.0

def reshape_in_place(x):
    x.resize_(1)
    return 1.0

class Parameter:  # claims torch.nn.Parameter's qualified name
    data = None
Parameter.__module__ = "torch.nn.parameter"

class Cached(nn.Module):
    pass
Cached.__module__, Cached.__qualname__ = "torch.nn.parameter", "Parameter"

def poser():
    return Parameter()

def module_poser():
    return Cached()

def missing_file():
    open("/no/such/file/anywhere")

def times_out():
    raise TimeoutError("my own deadline passed")

def tiny():
    return torch.zeros(1).expand(1 << 24)
'''
NAMES = ["zero_the_generator", "seeded_layer", "zero_inputs", "reshape_in_place", "poser", "module_poser",
         "missing_file", "times_out", "tiny"]


@pytest.fixture()
def student(stand_in):
    session = stand_in.session()
    assert session.request({"op": "exec"}, STUDENT)[0]["error"] is None
    return session, session.lookup(NAMES)


# -- item 2: no random state travels ---------------------------------------------------------------------------
def test_the_kernel_cannot_set_the_graders_generator(student) -> None:
    _, names = student
    torch.manual_seed(7)
    before = torch.get_rng_state().clone()
    assert names["zero_the_generator"]() == 0.0  # the kernel's own generator now draws zeros
    assert torch.equal(torch.get_rng_state(), before), "the kernel's generator state was installed in the grader"
    assert torch.randn(1000).abs().sum() > 100, "the grader's torch.randn returns zeros after the student's call"


def test_a_seed_in_the_test_does_not_seed_the_students_layer(student) -> None:
    _, names = student
    torch.manual_seed(0)
    theirs = names["seeded_layer"]()
    torch.manual_seed(0)
    mine = torch.nn.Linear(3, 2)
    assert not torch.equal(theirs.weight, mine.weight), "the grader's generator state travelled into the kernel"
    theirs.load_state_dict(mine.state_dict())  # the way a test initialises the student's layer like its own
    assert torch.equal(theirs.weight, mine.weight)


# -- item 3: arguments cross as copies, nothing is written back --------------------------------------------------
def test_a_call_never_writes_into_the_tests_arrays(student) -> None:
    _, names = student
    q, k = np.ones((2, 3)), torch.ones(4)
    assert names["zero_inputs"](q, k) == 1.0
    assert q.tolist() == [[1.0] * 3] * 2 and k.tolist() == [1.0] * 4, "the student's call changed the grader's inputs"


def test_a_test_asks_for_the_arguments_as_the_call_left_them(student) -> None:
    _, names = student
    q, k = np.ones((2, 3)), torch.ones(4)
    result, args, kwargs = checks.call_with_inputs(names["zero_inputs"], q, k=k)
    assert result == 1.0 and args[0].tolist() == [[0.0] * 3] * 2 and kwargs["k"].tolist() == [0.0] * 4
    assert args[0] is not q and kwargs["k"] is not k and q.sum() == 6 and k.sum() == 4
    untouched = torch.ones(2)
    _, args, _ = checks.call_with_inputs(names["zero_the_generator"])
    assert args == ()
    result, args, _ = checks.call_with_inputs(lambda x: x.sum(), untouched)  # in one process: the objects themselves
    assert args[0] is untouched


def test_a_changed_argument_comes_back_as_the_kernel_left_it(student) -> None:
    _, names = student
    x = torch.ones(3)
    _, (after,), _ = checks.call_with_inputs(names["reshape_in_place"], x)
    assert tuple(after.shape) == (1,) and tuple(x.shape) == (3,)
    with pytest.raises(checks.CheckFailed, match=r"its shape is \(1,\) instead of \(3,\)"):
        checks.expect_close(after, x, "x after the call")


# -- item 4: a handle is never a tensor --------------------------------------------------------------------------
def test_a_handle_cannot_claim_to_be_a_parameter(student) -> None:
    _, names = student
    for poser in (names["poser"](), names["module_poser"]()):
        assert type(poser) is RemoteObject
        assert not isinstance(poser, torch.Tensor) and not isinstance(poser, np.ndarray)
        with pytest.raises(checks.CheckFailed, match="should be a torch.Tensor"):
            checks.expect_tensor(poser, "the cache's keys")
    classes = StudentClasses()
    for name in ("torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer", "torch.Tensor", "numpy.ndarray",
                 "torch.nn.modules.linear.Linear"):
        claimed = classes.of(Ref("sandbox", 1, name, (name,), False))
        assert not issubclass(claimed, (torch.Tensor, np.ndarray)), name
    assert classes.of(Ref("sandbox", 1, "torch.nn.modules.linear.Linear", (), True)) is torch.nn.Linear


def test_the_classes_one_kernel_names_end_with_its_session() -> None:
    """A class the grader makes for a student's exception or module is its session's: made once there (so that
    ``except`` and ``isinstance`` see one class), never kept by the worker for the next student's notebook."""
    error = RemoteException("Overflowing", "too much", ("builtins.ValueError",))
    module = Ref("sandbox", 1, "notebook.Attention", ("torch.nn.modules.module.Module",), True)
    first, second = Session(5), Session(5)
    raised = first.classes.exception(error)
    assert isinstance(raised, ValueError) and isinstance(raised, RemoteError) and str(raised) == "too much"
    assert type(first.classes.exception(error)) is type(raised)
    assert type(second.classes.exception(error)) is not type(raised)
    assert first.classes.of(module) is first.classes.of(module)
    assert second.classes.of(module) is not first.classes.of(module)
    assert issubclass(second.classes.of(module), torch.nn.Module)


# -- item 9: work amplification ----------------------------------------------------------------------------------
def test_a_view_far_larger_than_its_storage_is_refused() -> None:
    header = {"$": "pt", "dtype": "float32", "shape": [4096, 4096], "b": 0, "view": [0, 0, [0, 0]]}
    with pytest.raises(ChannelError, match="times its storage"):
        TrustedStorages().decode(header, [b"\0" * 4])
    small = {"$": "pt", "dtype": "float32", "shape": [4, 8], "b": 0, "view": [0, 0, [0, 1]]}  # a broadcast row
    assert TrustedStorages().decode(small, [b"\0" * 32]).shape == (4, 8)


def test_the_checks_compare_shapes_and_dtypes_before_reading_values() -> None:
    huge = torch.zeros(1).expand(1 << 24)
    start = time.process_time()
    with pytest.raises(checks.CheckFailed, match=r"shape is \(16777216,\) instead of \(3,\)"):
        checks.expect_close(huge, torch.zeros(3), "out")
    with pytest.raises(checks.CheckFailed, match="dtype is bool instead of float32"):
        checks.expect_close(torch.zeros(3, dtype=torch.bool), torch.zeros(3), "out")
    assert time.process_time() - start < 0.5, "the check read the values of a value of the wrong shape"
    with pytest.raises(checks.CheckFailed, match="more than"):  # a check's cost is bounded even for equal shapes
        checks.expect_close(huge, torch.zeros(1 << 24), "out")


def test_a_few_bytes_from_the_kernel_stay_a_few_bytes(student) -> None:
    session, names = student
    with pytest.raises(ChannelError, match="times its storage"):
        names["tiny"]()
    assert session.broken


# -- item 10: the student's OSError stays the student's -----------------------------------------------------------
def test_a_students_oserror_is_the_students_not_the_channels(student) -> None:
    session, names = student
    with pytest.raises(FileNotFoundError, match="/no/such/file/anywhere"):
        names["missing_file"]()
    with pytest.raises(TimeoutError, match="my own deadline passed"):
        names["times_out"]()
    assert session.broken is None
    with pytest.raises(checks.CheckFailed, match=r"missing_file\(\) raised FileNotFoundError"):
        checks.call(names["missing_file"])
    assert names["zero_inputs"](np.ones(1), torch.ones(1)) == 1.0


def test_a_channel_that_times_out_is_still_the_channels() -> None:
    trusted, kernel = socket.socketpair()
    session = Session(0.5)
    session.attach(trusted)
    thread = threading.Thread(target=lambda: recv_frame(kernel))
    thread.start()
    with pytest.raises(ChannelError, match="took too long"):
        session.lookup(["x"])
    thread.join()
    send_frame(kernel, Frame({"ok": None}))
    kernel.close()
