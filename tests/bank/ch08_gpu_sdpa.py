"""Chapter 8 answers: attention_flops, achieved_tflops, kernel_name, time_sdpa."""

from tests.bank import Answer, mutant

ASSIGNMENT = "08_gpu_sdpa"

WRONG = [
    Answer("attention_flops", "a multiply-add counted as one FLOP", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    pairs = sum(min(seq_k, max(0, seq_k - seq_q + i + 1)) for i in range(seq_q)) if causal else seq_q * seq_k
    return 2 * batch * num_heads * pairs * head_dim
""", message="a multiply-add counted as 1 FLOP"),
    Answer("attention_flops", "ignores the causal mask", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    return 4 * batch * num_heads * seq_q * seq_k * head_dim
""", message="the causal mask ignored"),
    Answer("attention_flops", "half for any shape (the old convention)", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    flops = 4 * batch * num_heads * seq_q * seq_k * head_dim
    return flops // 2 if causal else flops
""", message="half for any shape"),
    Answer("attention_flops", "upper-left alignment, PyTorch's is_causal: query i sees keys j <= i", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    pairs = sum(min(i + 1, seq_k) for i in range(seq_q)) if causal else seq_q * seq_k
    return 4 * batch * num_heads * pairs * head_dim
""", message="upper-left alignment"),
    Answer("attention_flops", "the square formula n_q (n_q + 1) / 2 for every shape", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    pairs = seq_q * (seq_q + 1) // 2 if causal else seq_q * seq_k
    return 4 * batch * num_heads * pairs * head_dim
""", message="upper-left alignment"),
    Answer("attention_flops", "leaves out the diagonal", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    pairs = sum(max(0, seq_k - seq_q + i) for i in range(seq_q)) if causal else seq_q * seq_k
    return 4 * batch * num_heads * pairs * head_dim
""", message="diagonal left out"),
    Answer("attention_flops", "squares the query length", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    return 4 * batch * num_heads * seq_q * seq_q * head_dim
""", message="seq_q used twice"),
    Answer("attention_flops", "forgets the batch", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    pairs = sum(min(seq_k, max(0, seq_k - seq_q + i + 1)) for i in range(seq_q)) if causal else seq_q * seq_k
    return 4 * num_heads * pairs * head_dim
"""),
    Answer("attention_flops", "counts the mask right but returns a float", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    pairs = sum(min(seq_k, max(0, seq_k - seq_q + i + 1)) for i in range(seq_q)) if causal else seq_q * seq_k
    return 4.0 * batch * num_heads * pairs * head_dim
"""),
    Answer("achieved_tflops", "divides by 1e9: GFLOP/s", """
def achieved_tflops(flops, seconds):
    return float(flops / seconds / 1e9)
""", message="GFLOP/s"),
    Answer("achieved_tflops", "binary tera, 2**40", """
def achieved_tflops(flops, seconds):
    return float(flops / seconds / 2**40)
""", message="binary tera"),
    Answer("achieved_tflops", "seconds over FLOPs", """
def achieved_tflops(flops, seconds):
    return float(seconds / flops / 1e12)
""", message="upside down"),
    Answer("achieved_tflops", "multiplies by the time", """
def achieved_tflops(flops, seconds):
    return float(flops * seconds / 1e12)
""", message="FLOPs times seconds"),
    Answer("kernel_name", "returns the dispatcher, aten::scaled_dot_product_attention", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), sdpa_kernel(backend), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return next(e.name for e in prof.events() if "scaled_dot_product" in e.name)
""", message="is the dispatcher that calls the kernel"),
    Answer("kernel_name", "returns the op that took the most time", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), sdpa_kernel(backend), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return max(prof.key_averages(), key=lambda e: e.self_cpu_time_total).key
"""),
    Answer("kernel_name", "never forces the backend", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return next(e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product"))
""", message="Did you force the backend"),
    Answer("kernel_name", "catches the error and falls back to the default backend", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        except RuntimeError:
            F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return next(e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product"))
""", message="should raise RuntimeError"),
    Answer("kernel_name", "profiles outside quiet_stderr(): SDPA's warnings and the profiler's lines reach stderr", """
def kernel_name(q, k, v, backend, is_causal=False):
    with sdpa_kernel(backend), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    events = sorted(prof.events(), key=lambda event: event.time_range.start)
    return next(e.name for e in events if e.name.startswith("aten::_scaled_dot_product"))
""", message="profiler_start"),
    Answer("time_sdpa", "never forces the backend", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=0.2).median)
""", message="must raise RuntimeError"),
    Answer("time_sdpa", "forces the backend only while building the Timer", """
def time_sdpa(q, k, v, backend, is_causal=False):
    with sdpa_kernel(backend):
        timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                                globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                                num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=0.2).median)
""", message="it timed some other backend"),
    Answer("time_sdpa", "returns milliseconds", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return float(timer.blocked_autorange(min_run_time=0.2).median * 1e3)
""", message="not ms or us"),
]

RIGHT = [
    Answer("attention_flops", "builds the lower-right mask with torch and counts its True entries", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    keep = torch.ones(seq_q, seq_k, dtype=torch.bool)
    if causal:
        keep = keep.tril(diagonal=seq_k - seq_q)
    return int(keep.sum()) * 2 * (2 * head_dim) * batch * num_heads
"""),
    Answer("attention_flops", "a loop over the queries, multiply-adds doubled", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    multiply_adds = 0
    for i in range(seq_q):
        last_key = seq_k - seq_q + i if causal else seq_k - 1
        visible = max(0, min(seq_k, last_key + 1))
        multiply_adds += 2 * visible * head_dim  # QK^T and PV
    return 2 * multiply_adds * batch * num_heads
"""),
    Answer("achieved_tflops", "scales first with 1e-12", """
def achieved_tflops(flops, seconds):
    per_second = flops * 1e-12
    return per_second / seconds
"""),
    Answer("kernel_name", "the dispatcher's first child with the aten prefix, from key_averages", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr():
        with sdpa_kernel(backend if isinstance(backend, list) else [backend]):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=is_causal)
    keys = [event.key for event in prof.key_averages()]
    inner = [key for key in keys if key.startswith("aten::_scaled_dot_product")]
    return str(inner[0])
"""),
    Answer("time_sdpa", "one warm-up call of its own before the Timer", """
def time_sdpa(q, k, v, backend, is_causal=False):
    with sdpa_kernel(backend):
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)  # warm-up, fails early if unsupported
        timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                                globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                                num_threads=torch.get_num_threads())
        return float(timer.blocked_autorange(min_run_time=0.2).median)
"""),
    Answer("kernel_name", "profiles CPU and CUDA activity (a warning on a machine without a GPU)", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), sdpa_kernel(backend):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    names = [event.name for event in prof.events()]
    return next(name for name in names if name.startswith("aten::_scaled_dot_product"))
"""),
]

WRONG += [
    # A table by backend: caught by the list of backends, where the op depends on the inputs.
    Answer("kernel_name", "looks the name up from the backend instead of profiling", """
def kernel_name(q, k, v, backend, is_causal=False):
    names = {SDPBackend.MATH: "aten::_scaled_dot_product_attention_math",
             SDPBackend.FLASH_ATTENTION: "aten::_scaled_dot_product_flash_attention_for_cpu"}
    with sdpa_kernel(backend):
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return names[backend]
""", message="outside torch.profiler"),
    Answer("kernel_name", "profiles the call but answers from a table by backend", """
def kernel_name(q, k, v, backend, is_causal=False):
    names = {SDPBackend.MATH: "aten::_scaled_dot_product_attention_math",
             SDPBackend.FLASH_ATTENTION: "aten::_scaled_dot_product_flash_attention_for_cpu"}
    with quiet_stderr(), sdpa_kernel(backend), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return names[backend]
""", message="a table from backend to name cannot know"),
    mutant(ASSIGNMENT, "achieved_tflops", "floor division: flops // seconds", ("flops / seconds", "flops // seconds"),
           message="floor division"),
]

RIGHT += [
    Answer("time_sdpa", "a multi-line statement that forces the backend inside the timed code", """
def time_sdpa(q, k, v, backend, is_causal=False):
    stmt = "with sdpa_kernel(backend):\\n    F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)"
    env = {"sdpa_kernel": sdpa_kernel, "backend": backend, "F": F, "q": q, "k": k, "v": v, "is_causal": is_causal}
    measurement = benchmark.Timer(stmt, globals=env, num_threads=torch.get_num_threads()).blocked_autorange(min_run_time=0.2)
    return measurement.median
"""),
]

# Issue 34 audit: achieved_tflops rounded, scaled to the wrong prefix, truncated; more right answers.
WRONG += [
    Answer("achieved_tflops", "rounds to two decimals, as for display", """
def achieved_tflops(flops, seconds):
    return round(flops / seconds / 1e12, 2)
""", message="rounded"),
    Answer("achieved_tflops", "divides by 1e15: PFLOP/s", """
def achieved_tflops(flops, seconds):
    return float(flops / seconds / 1e15)
""", message="PFLOP/s"),
    Answer("achieved_tflops", "truncates to an int", """
def achieved_tflops(flops, seconds):
    return int(flops / seconds / 1e12)
""", message="should be a float"),
    Answer("time_sdpa", "returns the Measurement itself, not its median", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return timer.blocked_autorange(min_run_time=0.2)
""", message="should be a float"),
    Answer("time_sdpa", "returns microseconds", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return float(timer.blocked_autorange(min_run_time=0.2).median * 1e6)
""", message="not ms or us"),
]

RIGHT += [
    Answer("achieved_tflops", "one division by seconds times 1e12", """
def achieved_tflops(flops, seconds):
    return flops / (seconds * 1e12)
"""),
    Answer("achieved_tflops", "exact fractions, converted at the end", """
from fractions import Fraction


def achieved_tflops(flops, seconds):
    return float(Fraction(flops) / Fraction(seconds) / 10**12)
"""),
    Answer("time_sdpa", "the Timer built and run inside the backend's context, its median read at the end", """
def time_sdpa(q, k, v, backend, is_causal=False):
    with sdpa_kernel(backend):
        measurement = benchmark.Timer(
            stmt="F.scaled_dot_product_attention(q, k, v, is_causal=causal)",
            globals={"F": F, "q": q, "k": k, "v": v, "causal": is_causal},
            num_threads=torch.get_num_threads(),
            label="sdpa",
        ).blocked_autorange(min_run_time=0.2)
    return float(measurement.median)
"""),
]

# Wrong answers that trusted scoring cannot tell from right ones: the test cells run outside the student's
# process, and the only inputs these functions take are tensors and a backend, so what the function did
# inside (passed is_causal on, timed on how many threads, with which Timer method,
# returning which statistic) leaves no trace the grader can observe on CPU tensors. The requirement table
# (docs/requirements/08_gpu_sdpa.md) says so; test_bank does not run these.
NOT_OBSERVABLE = [
    Answer("kernel_name", "drops is_causal", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), sdpa_kernel(backend), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v)
    return next(e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product"))
""", message="pass is_causal on"),
    Answer("time_sdpa", "Timer's default of one thread", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal})
    with sdpa_kernel(backend):
        return float(timer.blocked_autorange(min_run_time=0.2).median)
""", message="benchmark.Timer defaults to one thread"),
    Answer("time_sdpa", "a median of perf_counter timings instead of torch.utils.benchmark", """
import statistics
import time

def time_sdpa(q, k, v, backend, is_causal=False):
    times = []
    with sdpa_kernel(backend):
        for _ in range(20):
            start = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
            times.append(time.perf_counter() - start)
    return float(statistics.median(times))
""", message="never ran SDPA inside torch.utils.benchmark"),
    Answer("time_sdpa", "returns the mean", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        measurement = timer.blocked_autorange(min_run_time=0.2)
    return float(measurement.mean)
""", message="the mean of the runs"),
    Answer("time_sdpa", "returns the fastest run", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        measurement = timer.blocked_autorange(min_run_time=0.2)
    return float(min(measurement.times))
""", message="the fastest run"),
    Answer("time_sdpa", "returns the first sample", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        measurement = timer.blocked_autorange(min_run_time=0.2)
    return float(measurement.times[0])
""", message="the first sample"),
    Answer("time_sdpa", "one timed run after a warm-up", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return float(timer.timeit(1).median)
""", message="one run is a sample"),
    Answer("time_sdpa", "drops is_causal", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v)", globals={"F": F, "q": q, "k": k, "v": v},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return float(timer.blocked_autorange(min_run_time=0.2).median)
""", message="did not pass is_causal"),
    Answer("time_sdpa", "timeit(50) instead of blocked_autorange (no warm-up, a fixed count)", """
def time_sdpa(q, k, v, backend, is_causal=False):
    stmt = "with sdpa_kernel(backend):\\n    F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)"
    env = {"sdpa_kernel": sdpa_kernel, "backend": backend, "F": F, "q": q, "k": k, "v": v, "is_causal": is_causal}
    measurement = benchmark.Timer(stmt, globals=env, num_threads=torch.get_num_threads()).timeit(50)
    return measurement.median
""", message="blocked_autorange"),
]

# Issue 34 audit (class 2): a closed form with /, exact for the small shapes but not above 2**53.
WRONG += [
    Answer("attention_flops", "the closed form with / 2: a float, rounded once the count passes 2**53", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    if not causal:
        pairs = seq_q * seq_k
    elif seq_q <= seq_k:
        pairs = seq_q * seq_k - seq_q * (seq_q - 1) / 2
    else:
        pairs = seq_k * (seq_k + 1) / 2
    return int(4 * batch * num_heads * pairs * head_dim)
""", message="above 2**53"),
]

# Issue 34 audit: kernel_name without the aten:: prefix; another right way to read the profile.
WRONG += [
    Answer("kernel_name", "strips the aten:: prefix from the op's name", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr(), sdpa_kernel(backend), profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    name = next(e.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product"))
    return name.split("::")[-1]
""", message="Return the kernel inside the dispatcher"),
]

RIGHT += [
    Answer("kernel_name", "nested with blocks, the first matching op in the profile's own event order", """
def kernel_name(q, k, v, backend, is_causal=False):
    with quiet_stderr():
        with sdpa_kernel(backend):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    names = [event.name for event in prof.events()]
    inner = [name for name in names if name.startswith("aten::_scaled_dot_product")]
    return inner[0]
"""),
]

RIGHT += [
    Answer("attention_flops", "the closed form in integers (//)", """
def attention_flops(batch, num_heads, seq_q, seq_k, head_dim, causal=False):
    if not causal:
        pairs = seq_q * seq_k
    elif seq_q <= seq_k:
        pairs = seq_q * seq_k - seq_q * (seq_q - 1) // 2
    else:
        pairs = seq_k * (seq_k + 1) // 2
    return 4 * batch * num_heads * pairs * head_dim
"""),
]

# Issue 34 (task "holes"): time_sdpa's mistakes that what crosses the channel does show. A call of microseconds
# is timed thousands of times, so the total of the runs lies near the whole call's wall time and one run's median
# far below half of it; a statement that times nothing runs faster than 1 PFLOP/s; a rounded median of microseconds
# is 0.0; a tensor is not a float.
WRONG += [
    Answer("time_sdpa", "returns the total of every timed run, sum(measurement.times)", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        measurement = timer.blocked_autorange(min_run_time=0.2)
    return float(sum(measurement.times))
""", message="the total of the timed runs"),
    Answer("time_sdpa", "puts the SDPA call in setup= and times only reading its result", """
def time_sdpa(q, k, v, backend, is_causal=False):
    with sdpa_kernel(backend):
        timer = benchmark.Timer(stmt="out",
                                setup="out = F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                                globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                                num_threads=torch.get_num_threads())
        return float(timer.blocked_autorange(min_run_time=0.2).median)
""", message="it did not time the SDPA call"),
    Answer("time_sdpa", "takes the median itself with torch and returns the 0-d tensor", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        measurement = timer.blocked_autorange(min_run_time=0.2)
    return torch.tensor(measurement.times).median()
""", message="should be a float"),
    Answer("time_sdpa", "rounds the median to a thousandth of a second, as for display", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return round(float(timer.blocked_autorange(min_run_time=0.2).median), 3)
""", message="rounded"),
    Answer("time_sdpa", "returns runs per second, 1 / median", """
def time_sdpa(q, k, v, backend, is_causal=False):
    timer = benchmark.Timer("F.scaled_dot_product_attention(q, k, v, is_causal=c)",
                            globals={"F": F, "q": q, "k": k, "v": v, "c": is_causal},
                            num_threads=torch.get_num_threads())
    with sdpa_kernel(backend):
        return 1.0 / timer.blocked_autorange(min_run_time=0.2).median
""", message="runs per second"),
]

RIGHT += [
    Answer("time_sdpa", "the median of the per-run times taken with statistics.median", """
import statistics


def time_sdpa(q, k, v, backend, is_causal=False):
    with sdpa_kernel(backend):
        measurement = benchmark.Timer(
            "F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)",
            globals={"F": F, "q": q, "k": k, "v": v, "is_causal": is_causal},
            num_threads=torch.get_num_threads(),
        ).blocked_autorange(min_run_time=0.3)
    return float(statistics.median(measurement.times))
"""),
]
