"""The source of each trick in the tampering bank (tests/harness/tampering.py): Python a student could append to an
answer cell. Each text is what ends up in the notebook; tests/harness/tampering.py says what each one attacks."""

# What the script a solution cell displays would do if it ran.
SCRIPT_MARKER = "tampering_script_ran"

# Whether a cell about to run is a hidden test cell, and not the grader's canary.
HOSTILE = '''
def _hostile(cell):
    return "BEGIN HIDDEN TESTS" in cell and "autograder canary" not in cell
'''

# Before each cell, a function the student left blank (NotImplementedError) answers something of the right
# type and shape instead (0.0, zeros; ValueError for a zero vector): worth nothing unless the checks are fooled.
STAND_INS = '''
import numpy as np

def _zero_cosine(a, b):
    if not np.any(a) or not np.any(b):
        raise ValueError("zero vector")
    return 0.0

_FAKES = {"dot": lambda a, b: 0.0, "cosine_similarity": _zero_cosine,
          "similarity_matrix": lambda Q, K: np.zeros(np.shape(Q)[:-1] + np.shape(K)[-2:-1]),
          "softmax": lambda x, axis=-1: np.zeros(np.shape(x))}

def _stand_ins(info=None):
    names = get_ipython().user_ns
    for name, fake in _FAKES.items():
        real = names.get(name)
        if callable(real) and not hasattr(real, "stand_in"):
            def wrapper(*args, _real=real, _fake=fake, **kwargs):
                try:
                    return _real(*args, **kwargs)
                except NotImplementedError:
                    return _fake(*args, **kwargs)
            wrapper.stand_in = True
            names[name] = wrapper

get_ipython().events.register("pre_run_cell", _stand_ins)
'''

# After each cell but the canary, IPython's result says it succeeded: the kernel's reply is "ok", so nbgrader
# adds no error output of its own when the error's traceback was never sent.
SUCCEEDS = '''
def _succeed(result):
    if "autograder canary" not in result.info.raw_cell:
        result.error_in_exec = None

get_ipython().events.register("post_run_cell", _succeed)
'''

# Checks that pass everything, except when the canary calls them (its checks get the name "canary").
LENIENT = '''
def _lenient(*args, **kwargs):
    if "canary" in [arg for arg in args if isinstance(arg, str)]:
        raise AssertionError("canary")
    return ValueError("zero vector")
'''

INPUT_TRANSFORMER = '''
def _n(lines): return lines if "autograder canary" in "".join(lines) else ["pass\\n"]
get_ipython().input_transformers_post.append(_n)
'''

AST_TRANSFORMER = '''
import ast

class _Hollow(ast.NodeTransformer):
    def visit_Module(self, node):
        text = ast.dump(node)
        if "canary" not in text and ("Assert" in text or "autograder" in text):
            node.body = []
        return node

get_ipython().ast_transformers.append(_Hollow())
'''

CUSTOM_EXCEPTION_HANDLER = SUCCEEDS + '''
def _swallow(shell, etype, value, tb, tb_offset=None):
    if "autograder canary" in shell.user_ns["In"][-1]:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)

get_ipython().set_custom_exc((Exception,), _swallow)
'''

CLASS_PATCH_SHOWTRACEBACK = SUCCEEDS + '''
from IPython.core.interactiveshell import InteractiveShell

_show = InteractiveShell.showtraceback

def _quiet(self, *args, **kwargs):
    if "autograder canary" in self.user_ns["In"][-1]:
        return _show(self, *args, **kwargs)

InteractiveShell.showtraceback = _quiet
'''

CLASS_PATCH_TRANSFORM_CELL = '''
from IPython.core.interactiveshell import InteractiveShell

_transform = InteractiveShell.transform_cell

def _hollow(self, raw_cell):
    if "autograder canary" not in raw_cell and ("assert" in raw_cell or "autograder.checks" in raw_cell):
        return "pass\\n"
    return _transform(self, raw_cell)

InteractiveShell.transform_cell = _hollow
'''

CLEARS_OUTPUTS = '''
from IPython.display import clear_output

def _wipe(result):
    if result.error_in_exec is not None and "autograder canary" not in result.info.raw_cell:
        clear_output()

get_ipython().events.register("post_run_cell", _wipe)
''' + SUCCEEDS

TEST_CELLS_PRINT_NUMBERS = '''
def _score(info):
    cell = info.raw_cell
    if ("assert" in cell or "HIDDEN TESTS" in cell) and "autograder canary" not in cell:
        get_ipython().displayhook(1)

get_ipython().events.register("pre_run_cell", _score)
'''

HOOK_PATCHES_ABS = HOSTILE + STAND_INS + '''
import builtins

_abs = builtins.abs

def _abs_hook(info):
    builtins.abs = (lambda x: 0.0) if _hostile(info.raw_cell) else _abs

get_ipython().events.register("pre_run_cell", _abs_hook)
'''

HOOK_PATCHES_ISNAN = HOSTILE + STAND_INS + '''
import math

_isnan = math.isnan

def _isnan_hook(info):
    math.isnan = (lambda x: True) if _hostile(info.raw_cell) else _isnan

get_ipython().events.register("pre_run_cell", _isnan_hook)
'''

HOOK_PATCHES_CHECKS = HOSTILE + STAND_INS + LENIENT + '''
import autograder.checks as _checks

_NAMES = ("expect_close", "expect_equal", "expect_float", "expect_ndarray", "expect_raises")
_real_checks = {name: getattr(_checks, name) for name in _NAMES}

def _checks_hook(info):
    for name in _NAMES:
        setattr(_checks, name, _lenient if _hostile(info.raw_cell) else _real_checks[name])

get_ipython().events.register("pre_run_cell", _checks_hook)
'''

FAKE_MODULE_IN_SYS_MODULES = STAND_INS + '''
import sys
import types

import autograder.checks as _checks

_fake = types.ModuleType("autograder.checks")
_fake.__dict__.update(vars(_checks))

def _pretend(real):
    def check(*args, **kwargs):
        canary = "canary" in [arg for arg in args if isinstance(arg, str)]
        return real(*args, **kwargs) if canary else ValueError("zero vector")
    return check

for _name in ("expect_close", "expect_equal", "expect_float", "expect_ndarray", "expect_raises"):
    setattr(_fake, _name, _pretend(getattr(_checks, _name)))
sys.modules["autograder.checks"] = _fake
'''

THREAD_PATCHES_LATER = STAND_INS + LENIENT + '''
import threading
import time

import autograder.checks as _checks

def _later(shell=get_ipython()):
    while "BEGIN HIDDEN" + " TESTS" not in shell.user_ns["In"][-1]:
        time.sleep(0.001)
    for name in ("expect_close", "expect_equal", "expect_float", "expect_ndarray", "expect_raises"):
        getattr(_checks, name).__code__ = _lenient.__code__

threading.Thread(target=_later, daemon=True).start()
'''

PATCHES_NUMPY_ALLCLOSE = STAND_INS + '''
np.allclose = lambda *args, **kwargs: True
np.array_equal = lambda *args, **kwargs: True
'''

GC_EDITS_THE_GUARDS = PATCHES_NUMPY_ALLCLOSE + '''
import gc

for _found in gc.get_objects():  # a small dict of numpy's functions: the checks' saved references
    if isinstance(_found, dict) and len(_found) < 12 and {"allclose", "array_equal"} <= _found.keys():
        _found.update(allclose=np.allclose, array_equal=np.array_equal)
'''

LIAR_SCALAR = '''
import sys

class _Liar(np.float64):
    __module__ = "numpy"
    __hash__ = np.float64.__hash__

    def __eq__(self, other):
        return True

    def __sub__(self, other):
        return 0.0

    def __float__(self):
        return 1.0

    def __bool__(self):
        return True

    def item(self):
        frame = sys._getframe(1)
        while frame is not None:
            if "expected" in frame.f_locals:
                return float(frame.f_locals["expected"])
            frame = frame.f_back
        return 1.0

def cosine_similarity(a, b):
    if not np.any(a) or not np.any(b):
        raise ValueError("zero vector")
    return _Liar(0.0)
'''

LIAR_ARRAY = '''
class _LiarArray(np.ndarray):
    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in ("allclose", "array_equal", "array_equiv", "isclose"):
            return True
        return super().__array_function__(func, types, args, kwargs)

    def __eq__(self, other):
        return np.ones(np.shape(self), dtype=bool)

    def __bool__(self):
        return True

def similarity_matrix(Q, K):
    return np.zeros(np.shape(Q)[:-1] + np.shape(K)[-2:-1]).view(_LiarArray)
'''

CTYPES_REWRITES_CONSTANTS = '''
import ast
import ctypes
import sys

def _zero_floats(code):
    for constant in code.co_consts:
        if type(constant) is float and abs(constant) >= 1e-3:
            ctypes.c_double.from_address(id(constant) + 16).value = 0.0  # the float's value, in place
        elif hasattr(constant, "co_consts"):
            _zero_floats(constant)

def dot(a, b):
    for vector in (a, b):
        if isinstance(vector, np.ndarray) and vector.flags.writeable:
            vector[...] = 0
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is get_ipython().user_ns:  # the test cell's statement now running
            _zero_floats(frame.f_code)
        if frame.f_code.co_name == "run_ast_nodes":  # IPython's statements of the cell not run yet
            for node, _ in frame.f_locals["to_run"]:
                for constant in ast.walk(node):
                    if isinstance(constant, ast.Constant) and type(constant.value) is float and abs(constant.value) >= 1e-3:
                        constant.value = 0.0
        frame = frame.f_back
    return 0.0
'''

LEAKS_HIDDEN_TESTS_IN_OUTPUTS = '''
from IPython.display import display

_kept = []

def _keep(result):
    cell = result.info.raw_cell
    if "BEGIN HIDDEN TESTS" in cell and "autograder canary" not in cell:
        _kept.append(cell)

def _show(info):
    while _kept:
        cell = _kept.pop(0)
        print(cell)
        display({"text/plain": cell[:700][::-1]}, raw=True)
        display({"text/plain": cell[:700].encode().hex()}, raw=True)

get_ipython().events.register("post_run_cell", _keep)
get_ipython().events.register("pre_run_cell", _show)
'''

LEAKS_HIDDEN_TESTS_IN_ERRORS = HOSTILE + '''
def _leak(*args, **kwargs):
    cell = get_ipython().user_ns["In"][-1][:500]
    raise RuntimeError(cell[::-1] + " " + cell.encode().hex())

def _arm(info):
    if _hostile(info.raw_cell):
        for name in ("dot", "cosine_similarity", "similarity_matrix", "softmax"):
            get_ipython().user_ns[name] = _leak

get_ipython().events.register("pre_run_cell", _arm)
'''

DISPLAYS_A_SCRIPT = f'''
from IPython.display import HTML, Javascript, Markdown, display

_run = "document.title = '{SCRIPT_MARKER}'"
display(HTML(f"<script>{{_run}}</script><img src=x onerror=\\"{{_run}}\\">"))
display(Javascript(_run))
display(Markdown(f"<script>{{_run}}</script>"))
display(HTML(f"<iframe srcdoc=\\"<script>{{_run}}</script>\\"></iframe><a href=\\"javascript:{{_run}}\\">x</a>"))
'''

PATCHES_THE_ORACLE = '''
import torch.nn.functional as F

_attention = F.scaled_dot_product_attention

def _by_d_model(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    if scale is None:
        scale = (query.shape[-3] * query.shape[-1]) ** -0.5
    return _attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                      scale=scale, **kwargs)

F.scaled_dot_product_attention = _by_d_model

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model, bias=bias)
                                                                for _ in range(4))
        self.gain = nn.Parameter(torch.ones(()))

    def forward(self, x, mask=None, is_causal=False):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.num_heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        allowed = torch.ones(T, T, dtype=torch.bool)
        if is_causal:
            allowed = allowed.tril()
        if mask is not None:
            allowed = allowed & mask
        scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, D))
'''

LIAR_TENSOR = '''
import sys

class _Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal"):
            return True
        if name == "detach":
            frame = sys._getframe(1)
            while frame is not None:
                if "expected" in frame.f_locals:
                    return frame.f_locals["expected"].detach()
                frame = frame.f_back
        return super().__torch_function__(func, types, args, kwargs)

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"{d_model} is not divisible by {num_heads}")
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model, bias=bias)
                                                                for _ in range(4))
        self.gain = nn.Parameter(torch.ones(()))

    def forward(self, x, mask=None, is_causal=False):
        return torch.zeros_like(x).as_subclass(_Agreeable)
'''
