"""What each worker imports before its first job builds no parser it never uses.

jsonschema 4.25 and later, when rfc3987-syntax is installed (jupyter-events' ``format-nongpl`` extra pulls it in),
compile that package's Earley grammar for the ``iri`` format as nbformat imports them: about 1.5 CPU-s in the worker
forks (and in a worker started alone), on the path to the first verdict. requirements.txt pins the last jsonschema
that leaves it out; this test fails where a newer one comes back.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from course import ROOT

# What a worker imports first (`autograder.workers.worker.prepare`; nbgrader's API: the gradebooks).
STARTUP = "import nbgrader.api; from autograder.workers import worker; worker.prepare()"
PARSERS = ("rfc3987_syntax", "lark")


def test_nbgraders_imports_compile_no_grammar() -> None:
    probe = f"import sys; {STARTUP}; print(','.join(m for m in {PARSERS!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.strip()
    assert not loaded, (
        f"`{STARTUP}` loaded {loaded}: jsonschema compiles rfc3987-syntax's grammar at import when both are "
        f"installed (jsonschema {version('jsonschema')}); pin jsonschema to 4.24.1 as requirements.txt says")

