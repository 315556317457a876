"""`--db` with a real PostgreSQL server: a throw-away cluster in a temporary folder, on a loopback port.

PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user (or
`nobody`). Without the server binaries (Debian: apt-get install postgresql) the test is skipped.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from tests.grading_helpers import (FIXTURE_SOURCE, SCORES_BY_STUDENT, grade_cli, read_grades,
                                   solution_sources, student_notebook, write_submission)

pytestmark = pytest.mark.slow


def _binaries() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    binaries = _binaries()
    if binaries is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed; .ci/run installs them")
    user = None
    if os.geteuid() == 0:
        names = [entry.pw_name for entry in pwd.getpwall()]
        user = "postgres" if "postgres" in names else "nobody"
    # Not under pytest's temporary folder: the server's user must be able to reach it.
    folder = Path(tempfile.mkdtemp(prefix="autograder-postgres-"))
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir()
    if user:
        os.chmod(folder, 0o755)
        for path in (folder, sockets):
            shutil.chown(path, user)
    port = _free_port()

    def run(*command: str) -> None:
        done = subprocess.run(command, capture_output=True, text=True, user=user, cwd=folder, timeout=120)
        assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}"

    run(str(binaries / "initdb"), "-D", str(data), "-U", "grader", "--auth=trust", "--no-sync")
    run(str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "-o",
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        import psycopg2

        admin = psycopg2.connect(host="127.0.0.1", port=port, user="grader", dbname="postgres")
        admin.autocommit = True
        admin.cursor().execute("CREATE DATABASE gradebook")
        admin.close()
        yield f"postgresql+psycopg2://grader@127.0.0.1:{port}/gradebook"
    finally:
        run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def test_grading_into_postgresql(postgres_url, tmp_path, toy_class) -> None:
    import psycopg2

    released = toy_class.released["toy"]
    reference = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb")
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    shutil.copytree(toy_class.cache, OutputFolder(out).cache)
    write_submission(submissions, "ada", "toy", student_notebook(released, reference))
    write_submission(submissions, "bo", "toy", student_notebook(released, {}))
    options = ("--out", out, "--db", postgres_url, "--jobs", "2", "--source", FIXTURE_SOURCE, "--quiet")
    for _ in range(2):  # the second run must change nothing
        done = grade_cli(submissions, *options)
        assert done.returncode == 0, done.stderr
    assert {key: row["score"] for key, row in read_grades(out).items()} == {("ada", "toy"): "5", ("bo", "toy"): "0"}
    assert not OutputFolder(out).gradebook.exists(), "with --db the SQLite default is not used"
    url = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    with psycopg2.connect(url) as db, db.cursor() as cursor:
        cursor.execute(SCORES_BY_STUDENT)
        assert dict(cursor.fetchall()) == {"ada": 5.0, "bo": 0.0}
        cursor.execute("select count(*) from submitted_assignment")
        assert cursor.fetchone() == (2,)
