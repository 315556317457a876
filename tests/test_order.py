"""The order `make test` hands the files to its workers (tests/conftest.py) names files that exist."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST, TESTS


def test_the_longest_files_named_first_exist() -> None:
    missing = [name for name in LONGEST_FIRST if not (TESTS / name).is_file()]
    assert not missing, f"tests/conftest.py's LONGEST_FIRST names files that are gone (moved?): {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST), "LONGEST_FIRST names a file twice"
