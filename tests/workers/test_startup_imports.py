"""What each worker imports before its first job builds no parser it never uses, the gradebook's ORM is configured
once where the workers are forked from, and the processes that fork workers and kernels import without collecting.

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



# The process the workers are forked from (`autograder.workers.forks.main`), run in a probe with its control socket
# closed at once: it returns after it has imported nbgrader.
FORKS = ("import socket\n"
         "from autograder.workers import forks\n"
         "ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
         "ours.close()\n")
RUN_FORKS = "forks.main([str(theirs.fileno()), ''])\n"


def test_the_worker_forks_configure_the_gradebooks_mappers_and_import_its_dialect_for_every_fork() -> None:
    # SQLAlchemy configures nbgrader's mappers on a process's first query (19 ms of a core) and imports its SQLite
    # dialect with its first engine: the forks do both as they import nbgrader (`autograder.workers.worker.prepare`),
    # so that no forked worker does them again on its first job.
    probe = ("import sys\n"
             "from sqlalchemy import event, inspect\n"
             "from sqlalchemy.orm import Mapper\n" + FORKS + RUN_FORKS +
             "configured = []\n"
             "event.listen(Mapper, 'before_configured', lambda: configured.append(1))\n"
             "from nbgrader.api import SubmittedNotebook\n"
             "inspect(SubmittedNotebook).attrs.keys()\n"
             "print(len(configured), 'sqlalchemy.dialects.sqlite' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    configured, dialect = done.stdout.split()
    assert configured == "0", (
        "a worker forked after the forks imported nbgrader configured the gradebook's mappers again on its first "
        "query: worker.prepare should configure them (sqlalchemy.orm.configure_mappers) before any fork")
    assert dialect == "True", "the forks did not import SQLAlchemy's SQLite dialect: each worker's first engine does"


# Counts the collections of the process it runs in (``starts``, cleared before what is measured).
COUNTED = ("import gc, os\n"
           "starts = []\n"
           "gc.callbacks.append(lambda phase, info: starts.append(phase) if phase == 'start' else None)\n")


def test_the_worker_forks_import_nbgrader_without_a_collection() -> None:
    # The process the workers are forked from imports nbgrader first (`autograder.workers.forks.main`), then torch and
    # transformers: none of it is ever freed, and the collections its allocations set off walked it (0.3-0.4 s of a
    # core over a run's imports).
    probe = (COUNTED + "import sys\n" + FORKS + "starts.clear()\n" + RUN_FORKS +
             "print(len(starts), 'nbgrader.converters' in sys.modules, gc.isenabled(),\n"
             "      gc.get_freeze_count() > 10**5)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True", "True", "True"], (
        f"collections while the forks imported nbgrader, nbgrader imported, collector back on, imports frozen: "
        f"{done.stdout.split()}")


def test_a_preload_imports_without_a_collection_and_leaves_the_collector_on() -> None:
    # A zygote's and a cold kernel's preload (`autograder.sandbox.kernel.preload`): torch imports with no collection;
    # the kernels forked after, and student code, run with the collector on.
    probe = (COUNTED + "from autograder.sandbox.kernel import preload\n"
             "starts.clear()\n"
             "preload(('torch', 'xml.dom.minidom'), '')\n"
             "print(len(starts), gc.isenabled(), gc.get_freeze_count() > 10**5)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True", "True"], (
        f"collections during the preload, collector back on, imports frozen: {done.stdout.split()}")
