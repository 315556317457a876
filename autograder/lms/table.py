"""An LMS gradebook export as a table, read and written back with its own bytes conventions.

An instructor's export is read once (`read_table`) into a `Table` that remembers what a rewrite must
keep: a UTF-8 byte order mark, the delimiter, the line ending and which fields are quoted: only those
that need it (Canvas, Ruby's CSV), also those with a space or tab (Moodle, PHP's ``fputcsv``), or all.
`table_bytes` writes some of its columns back with those conventions, so a file that went through
unchanged comes out byte for byte as the LMS wrote it (minus the columns left out), and the same
input always gives the same bytes.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

BOM = b"\xef\xbb\xbf"
QUOTING = ("minimal", "spaces", "all")
NUMBER = re.compile(r"-?(?:\d+(?:[.,]\d*)?|[.,]\d+)")
DECIMAL_COMMA = re.compile(r"-?\d*,\d+")


class ExportError(Exception):
    """A refusal: one line saying what is wrong with the command's input. Nothing has been written."""


@dataclass(frozen=True)
class Table:
    """A CSV file: its header and rows (every row padded to the header's length) and how it was written."""

    path: Path
    header: list[str]
    rows: list[list[str]]
    delimiter: str
    bom: bool
    lineterminator: str
    quoting: str  # one of QUOTING: which fields are written between quotes


def read_table(path: Path, delimiters: str, required: str) -> Table:
    """Read ``path``; its delimiter is the one of ``delimiters`` that splits the first records into the most
    fields, as many in each; ``required`` names a cell the header must hold.

    Raises `ExportError` for a missing file, a file that is not UTF-8, a header without ``required``,
    or a row with more fields than the header.
    """
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ExportError(f"cannot read the gradebook export {path}: {error.strerror}") from None
    bom = raw.startswith(BOM)
    try:
        text = raw[len(BOM) if bom else 0:].decode("utf-8")
    except UnicodeDecodeError:
        raise ExportError(f"{path} is not UTF-8 text: export the gradebook again as CSV (UTF-8)") from None
    first_line = text.splitlines(keepends=True)[0] if text else ""
    best = max(delimiters, key=lambda d: _fields(text, d))
    try:
        records = _parse(text, best)
    except csv.Error as error:
        raise ExportError(f"{path} is not a well-formed CSV file: {error}") from None
    lineterminator = "\r\n" if first_line.endswith("\r\n") else "\n"
    quoting = next((q for q in QUOTING if "".join(_line(r, best, q) + lineterminator for r in records).rstrip("\r\n")
                    == text.rstrip("\r\n")), "minimal")
    records = [r for r in records if any(cell.strip() for cell in r)]
    if not records or not any(cell.strip() == required for cell in records[0]):
        raise ExportError(f"{path} is not the gradebook export expected: its first line has no '{required}' column")
    header = records[0]
    for number, row in enumerate(records[1:], start=2):
        if len(row) > len(header):
            raise ExportError(f"{path}: record {number} has {len(row)} fields, more than the header's {len(header)}")
    return Table(path=path, header=header, rows=[r + [""] * (len(header) - len(r)) for r in records[1:]],
                 delimiter=best, bom=bom, lineterminator=lineterminator, quoting=quoting)


def table_bytes(table: Table, rows: list[list[str]], columns: list[int]) -> bytes:
    """The header and ``rows`` restricted to ``columns`` (indices, in order), written as ``table`` was."""
    text = "".join(_line([row[i] for i in columns], table.delimiter, table.quoting) + table.lineterminator
                   for row in [table.header, *rows])
    return (BOM if table.bom else b"") + text.encode("utf-8")


def parse_number(text: str) -> float | None:
    """``8``, ``8.5``, ``8,50`` (a decimal comma) -> float; anything else (``EX``, ``-``, ``(read only)``) -> None."""
    text = text.strip()
    return float(text.replace(",", ".")) if NUMBER.fullmatch(text) else None


def uses_decimal_comma(cells: list[str]) -> bool:
    """Whether these cells write numbers with a decimal comma (exports from some locales do)."""
    return any(DECIMAL_COMMA.fullmatch(cell.strip()) for cell in cells)


def format_number(value: float, decimal_comma: bool) -> str:
    """Two decimals, as the LMS compares and shows grades: 7.5 -> ``7.50`` (``7,50`` with a decimal comma)."""
    text = f"{value:.2f}"
    return text.replace(".", ",") if decimal_comma else text


def _parse(text: str, delimiter: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True))


def _fields(text: str, delimiter: str) -> int:
    """How many fields ``delimiter`` splits the first records into, when it splits each into as many (else 0):
    Canvas's importer guesses the delimiter the same way, so a title with a comma does not mislead it."""
    try:
        counts = {len(r) for r in itertools.islice(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), 3)}
    except csv.Error:
        return 0
    return counts.pop() if len(counts) == 1 else 0


def _line(row: list[str], delimiter: str, quoting: str) -> str:
    """One CSV line, each field quoted as ``quoting`` says (a quote inside a field is doubled)."""
    special = delimiter + '"\r\n' + (" \t" if quoting == "spaces" else "")
    return delimiter.join(f'"{cell.replace(chr(34), 2 * chr(34))}"'
                          if quoting == "all" or any(c in special for c in cell) else cell for cell in row)
