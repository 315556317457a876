"""The same class graded twice: by two local Dask workers (`--scheduler`) and by `--jobs 2` local workers.

    python -m benchmarks.cluster [--students 8] [--assignments 01_similarity]

The cluster is real: a `dask scheduler` and two `dask worker` processes (one process, one thread each)
on 127.0.0.1, started before the timed run (`tests.cluster_local.LocalCluster`). Both runs start
with the assignment templates already generated, as a second run would. Printed: both wall times
and the cluster's overhead per submission (connecting and checking the workers, moving the notebook
and template bytes and the results through the scheduler), which is what distributing costs before
more machines pay it back.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.reports.output_folder import OutputFolder
from tests.cluster_local import LocalCluster
from benchmarks.grading_runs import make_class
from course import ROOT
from course.machine import describe_machine


def timed_grade(submissions: Path, out: Path, *options: str) -> float:
    """Seconds for one `python -m autograder grade` run (which must succeed)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out), "--quiet",
                    *options], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--assignments", nargs="+", default=["01_similarity"])
    args = parser.parse_args()
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="cluster-benchmark-") as scratch:
        root = Path(scratch)
        make_class(root / "submissions", args.students, args.assignments)
        count = args.students * len(args.assignments)
        print(f"class: {args.students} students x {len(args.assignments)} assignments = {count} submissions, "
              "half reference, half blank")
        empty = root / "empty"
        empty.mkdir()
        # Set-up, not timed: a run on an empty class generates the templates, which both runs then reuse.
        subprocess.run([sys.executable, "-m", "autograder", "grade", str(empty), "--out", str(root / "local"),
                        "--quiet"], cwd=ROOT, capture_output=True)
        shutil.copytree(OutputFolder(root / "local").cache, OutputFolder(root / "cluster").cache)
        local = timed_grade(root / "submissions", root / "local", "--jobs", "2")
        print(f"--jobs 2 (local worker processes):        {local:7.1f} s ({local / count:.2f} s per submission)")
        started = time.perf_counter()
        with LocalCluster(root / "dask", workers=2) as cluster:
            print(f"(two dask workers and a scheduler started in {time.perf_counter() - started:.1f} s, not timed)")
            remote = timed_grade(root / "submissions", root / "cluster", "--scheduler", cluster.address)
        print(f"--scheduler with two local dask workers:  {remote:7.1f} s ({remote / count:.2f} s per submission)")
        print(f"cluster overhead per submission: {(remote - local) / count:+.2f} s "
              f"(ratio cluster / local: {remote / local:.2f})")
        local_rows = OutputFolder(root / "local").grades.read_text().splitlines()
        cluster_rows = OutputFolder(root / "cluster").grades.read_text().splitlines()
        print(f"grades.csv identical: {local_rows == cluster_rows}")
        for row in sorted(set(local_rows) ^ set(cluster_rows)):
            print(f"  {'local' if row in local_rows else 'cluster'} only: {row}")


if __name__ == "__main__":
    main()
