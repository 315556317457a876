"""Where a kernel runs: bubblewrap, namespaces, the zygote and warm start, the kernel's start, its home
and its limits.

Processes: `bwrap`, `filesystem` and `site_view` run in the grader and the worker, `probe` in the grader and
each Dask worker; `warm` in the grader (it starts the zygotes and probes a warm kernel); `zygote_client` in the
worker (it talks to the zygote); `zygote` in the zygote (and `kernel_view` in each warm kernel's init, which the
zygote forks), and `zygote_protocol` on both sides of that talk;
`kernel`, `namespaces`, `home`'s mount, `limits`, `rules` and `guards` in the kernel (and `guards` in every
grading process).
Imports: nothing of autograder outside this package.
"""
