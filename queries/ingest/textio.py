"""Reading text exports: whole files, heads, the first content line, and delimited text split into one row per
*physical* line without a per-row Python loop.

Invariants:
- Line numbers are 1-based physical lines of the (decompressed) file: blank lines and comments count.
- A CRLF line reads like an LF line (its ``\\r`` belongs to the line ending).
- Bytes that are not UTF-8 never reach a parser as text: their line is blanked and reported as
  ``(line number, text with the bad bytes escaped)``, so the caller rejects exactly that line.
- Nothing here guesses a format; it moves bytes and counts lines.
"""
from __future__ import annotations

import json
import mmap
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from .common import align_chunks
from .pipeline import IngestError


def read_bytes(path: str | Path) -> bytes:
    """Whole file (``.gz`` transparently decompressed); ``IngestError`` if it cannot be read, naming the first
    incomplete line of a truncated or corrupt ``.gz``."""
    try:
        with open(path, "rb") as fh:
            return gunzip(path, fh) if str(path).endswith(".gz") else fh.read()
    except OSError as exc:
        raise IngestError(path, f"cannot read file: {exc.strerror or exc}") from exc


def read_json(path: str | Path):
    """The file's JSON document (``.gz`` transparently decompressed); an ``IngestError`` naming the file (and the
    line where JSON says) when it is empty, not UTF-8, not JSON, nested deeper than Python's recursion limit or
    holds an integer longer than ``int()`` reads (4,300 digits: a plain ``ValueError``, not a JSONDecodeError)."""
    data = read_bytes(path)
    if not data.strip():
        raise IngestError(path, "empty file", line=1)
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:  # both are ValueErrors: the narrower ones first
        raise IngestError(path, f"not UTF-8 text at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(path, f"not valid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from exc
    except RecursionError as exc:
        raise IngestError(path, "not valid JSON: nested too deeply", line=1) from exc
    except ValueError as exc:
        raise IngestError(path, f"not valid JSON: {str(exc)[:120]}", line=1) from exc


def gunzip(path: str | Path, fh) -> bytes:
    """Decompress every gzip member of the open file ``fh``, streaming, so that a truncated file still yields
    the text before the cut and the ``IngestError`` names the first incomplete line exactly."""
    out: list[bytes] = []
    d = None  # the decompressor of the member in progress
    try:
        while chunk := fh.read(1 << 20):
            while chunk:
                if d is None:
                    if not chunk.strip(b"\0"):
                        break  # zero padding after the last member, as some tools write
                    d = zlib.decompressobj(wbits=31)
                out.append(d.decompress(chunk))
                chunk = b""
                if d.eof:  # this member ended; any bytes left start the next one
                    chunk, d = d.unused_data, None
        if d is not None:
            out.append(d.flush())
            raise EOFError("compressed data ends before the end-of-stream marker")
    except (EOFError, zlib.error) as exc:
        complete = sum(c.count(b"\n") for c in out)
        raise IngestError(path, f"truncated or corrupt gzip data after {complete} complete lines ({exc})",
                          line=complete + 1) from exc
    return b"".join(out)


def read_head(path: str | Path, limit: int = 1 << 20) -> tuple[bytes, bool]:
    """``(first bytes, they are the whole file)``; a ``.gz`` file is read and decompressed whole.

    Lets a parser find its header without copying a large file into Python: Polars then reads the path."""
    if str(path).endswith(".gz"):
        return read_bytes(path), True
    try:
        with open(path, "rb") as fh:
            head = fh.read(limit)
    except OSError as exc:
        raise IngestError(path, f"cannot read file: {exc.strerror or exc}") from exc
    return head, len(head) < limit


def first_content_line(data: bytes) -> tuple[int, str, bool] | None:
    """First line that is neither blank nor a ``#`` comment: ``(1-based line, text, ends_with_newline)``."""
    pos, line_no = 0, 1
    while pos < len(data):
        end = data.find(b"\n", pos)
        raw = data[pos:] if end < 0 else data[pos:end]
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if text.strip() and not text.startswith("#"):
            return line_no, text, end >= 0
        if end < 0:
            break
        pos, line_no = end + 1, line_no + 1
    return None


def _absent_byte(data, avoid: bytes = b"") -> bytes:
    """A control byte that occurs nowhere in ``data`` (bytes or an mmap: a memchr scan, no copy)."""
    for b in (b"\x1f", b"\x1e", b"\x1d", b"\x1c", b"\x01", b"\x02", b"\x03", b"\x00"):
        if data.find(b) < 0 and b not in avoid:
            return b
    raise ValueError("file uses every control byte; cannot pick a placeholder")


def _blank_invalid_utf8(data: bytes) -> tuple[bytes, list[tuple[int, str]]]:
    """Replace every non-UTF-8 line by an empty one (keeping line numbers); return them as ``(line, raw)``."""
    out, bad = [], []
    for i, line in enumerate(data.split(b"\n"), 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            if not line.startswith(b"#"):
                bad.append((i, line.rstrip(b"\r").decode("utf-8", "backslashreplace")))
            line = b""
        out.append(line)
    return b"\n".join(out), bad


class Lines:
    """Where each physical line of a text lies (found with a NumPy newline scan, no Python loop), and its text
    on demand: rejects need the raw text of a few lines, not of all. The scan runs on first use: a clean file
    needs no line text at all."""

    def __init__(self, buf, placeholder: bytes | None = None, delimiter: str = ""):
        self.buf, self.placeholder, self.delimiter = buf, placeholder, delimiter
        self._starts = self._ends = None

    def _scan(self) -> None:
        buf = self.buf
        arr = np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.zeros(0, np.uint8)
        step = 1 << 24  # chunked so the temporary mask stays small
        nl = np.concatenate([np.flatnonzero(arr[i:i + step] == 10) + i for i in range(0, len(arr), step)]
                            or [np.zeros(0, np.int64)])
        ends = nl if (len(arr) == 0 or arr[-1] == 10) else np.append(nl, len(arr))
        starts = np.r_[0, nl + 1][:len(ends)].astype(np.int64)
        cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13) if len(ends) else np.zeros(0, bool)
        self._starts, self._ends = starts, ends - cr  # a CRLF line ends before its \r, as Polars reads it

    @property
    def starts(self) -> np.ndarray:
        if self._starts is None:
            self._scan()
        return self._starts

    @property
    def ends(self) -> np.ndarray:
        if self._ends is None:
            self._scan()
        return self._ends

    def __len__(self) -> int:
        return len(self.starts)

    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    def text(self, line_numbers: pl.Series) -> pl.Series:
        """Text of the given 1-based lines (the file's own delimiter, undecodable bytes escaped)."""
        out = []
        if len(line_numbers):
            starts, ends = self.starts, self.ends
        for n in line_numbers.to_list():
            t = bytes(self.buf[starts[n - 1]:ends[n - 1]]).decode("utf-8", "backslashreplace")
            out.append(t.replace(self.placeholder.decode(), self.delimiter) if self.placeholder else t)
        return pl.Series("raw", out, dtype=pl.String)


def count_bytes(buf, delimiter: bytes) -> tuple[int, int]:
    """``(newlines, delimiter bytes)`` in ``buf``: one chunked NumPy pass, no copy of the text."""
    arr = np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.zeros(0, np.uint8)
    step, d = 1 << 22, delimiter[0]
    newlines = delims = 0
    for i in range(0, len(arr), step):
        chunk = arr[i:i + step]
        newlines += int(np.count_nonzero(chunk == 10))
        delims += int(np.count_nonzero(chunk == d))
    return newlines, delims


def read_delimited(source: bytes | str | Path, delimiter: str, n_columns: int,
                   dtypes: dict[int, pl.DataType] | None = None) -> tuple[pl.DataFrame, Lines, list[tuple[int, str]]]:
    """Split text into one row per *physical* line without a per-row Python loop.

    Returns ``(frame, lines, bad_utf8)``. ``frame`` has ``f0..f{n_columns-1}`` (empty field -> null; strings,
    or the ``dtypes`` given by column position - a Categorical for a field parsed per distinct value),
    ``_line`` (1-based line number), ``_blank`` (empty or whitespace-only line) and ``_fields_ok`` (the line has
    exactly ``n_columns`` fields); ``lines.text(numbers)`` gives the raw text of lines, for rejects.
    Lines that are not valid UTF-8 come back in ``bad_utf8`` as ``(line, text)`` and as empty lines elsewhere.
    Multi-byte delimiters (``☃``) are swapped for a control byte absent from the file, since Polars' CSV
    reader splits on one byte; raw text shows the original delimiter. ``source`` is the text or a path; Polars
    reads a path itself (no copy through Python) unless the delimiter has to be swapped or a line is not UTF-8.

    The field count is checked without splitting twice. First the cheap proof for a clean file: Polars reads
    in strict mode (a line with too many fields fails the read), a NumPy pass beside the read counts the
    newlines and delimiters of the whole text, and when the data rows hold exactly ``n_columns - 1``
    delimiters each in total, none can have fewer either. Lines that may be blank or hold only empty fields,
    comments and the header are counted from their own text. When the proof fails (or the strict read does),
    every line is checked: it has exactly ``n`` fields iff its length (from the newline scan) equals the sum
    of its field lengths plus ``n - 1`` delimiters (extra fields are cut off, missing ones are null).
    """
    delim_b = delimiter.encode()
    sep = delim_b
    if isinstance(source, (bytes, bytearray)):
        data = buf = source
    else:
        with open(source, "rb") as fh:  # the map outlives the descriptor
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if fh.seek(0, 2) else b""
        data = str(source) if len(buf) else b""
    if len(delim_b) != 1:
        sep = _absent_byte(buf)
        data = buf = bytes(buf).replace(delim_b, sep)
    names = [f"f{i}" for i in range(n_columns)]
    schema = {c: (dtypes or {}).get(i, pl.String) for i, c in enumerate(names)}
    placeholder = sep if sep != delim_b else None
    lines = Lines(buf, placeholder, delimiter)
    # the byte count runs beside Polars' read (which releases the GIL): two passes over the text, one wall
    with ThreadPoolExecutor(max_workers=1) as pool:
        counted = pool.submit(count_bytes, buf, sep)
        try:
            fields = _read_fields(data, sep, schema, strict=True)
        except pl.exceptions.PolarsError:  # too many fields somewhere, or bytes that are not UTF-8
            fields = None
        newlines, delims = counted.result()
    if fields is not None:
        open_end = bool(len(buf)) and buf[len(buf) - 1:] != b"\n"  # a last line without its newline
        frame = _clean_frame(fields, lines, newlines + open_end, delims, n_columns, open_end=open_end)
        if frame is not None:
            return frame, lines, []
    return _read_exact(data, buf, sep, delim_b, delimiter, schema, lines)


def _clean_frame(fields: pl.DataFrame, lines: Lines, n_lines: int, delims: int,
                 n_columns: int, open_end: bool = False) -> pl.DataFrame | None:
    """The frame of a strictly read text if every data line provably has ``n_columns`` fields, else None.

    ``delims`` counts the delimiters of the whole text. Odd lines - comments, and lines whose fields after the
    first are empty (blank, whitespace only, or ``||||``) - are few; their own text says how many delimiters
    they hold and whether they are blank. So does a last line without a newline (``open_end``): the strict read
    lets it hold one empty field too many (``a|b|c|`` for three). Every other line is data, and the delimiter
    total proves its count."""
    if fields.height != n_lines:  # both keep every physical line; otherwise take the exact path
        return None
    f0 = pl.col("f0").cast(pl.String)
    rest_empty = pl.all_horizontal([pl.col(c).is_null() for c in fields.columns[1:]] or [pl.lit(True)])
    marks = fields.lazy().select(
        (rest_empty & (f0.is_null() | f0.str.contains(r"^\s*$"))).alias("maybe_blank"),
        f0.str.starts_with("#").fill_null(False).alias("comment")).collect()
    odd = (marks["maybe_blank"] | marks["comment"]).arg_true()
    if open_end and fields.height and (not len(odd) or odd[-1] != fields.height - 1):
        odd = odd.append(pl.Series([fields.height - 1], dtype=odd.dtype))
    n_data, data_delims = fields.height - len(odd), delims
    blank = pl.repeat(False, fields.height, dtype=pl.Boolean, eager=True)
    ok = pl.repeat(True, fields.height, dtype=pl.Boolean, eager=True)
    if len(odd):
        counts = lines.text(odd + 1).str.count_matches(lines.delimiter, literal=True).cast(pl.Int64)
        odd_blank = (counts == 0) & marks["maybe_blank"].gather(odd)
        # their counts are their own: the total below proves the other lines' alone
        data_delims -= int(counts.sum())
        blank = blank.scatter(odd.filter(odd_blank), True)
        ok = ok.scatter(odd, counts == n_columns - 1)  # what the exact check says of these lines too
    # no other line has more than n - 1 delimiters (the strict read would have failed), so a total of exactly
    # n - 1 per data line means none has fewer
    if data_delims != (n_columns - 1) * n_data:
        return None
    like = fields.get_column("f0")
    return fields.with_columns(
        align_chunks(pl.int_range(1, fields.height + 1, dtype=pl.Int64, eager=True), like).alias("_line"),
        align_chunks(ok, like).alias("_fields_ok"),
        align_chunks(blank, like).alias("_blank"))


def _read_exact(data, buf, sep: bytes, delim_b: bytes, delimiter: str, schema: dict,
                lines: Lines) -> tuple[pl.DataFrame, Lines, list[tuple[int, str]]]:
    """The per-line field count check (any text): line length = field lengths + delimiters."""
    names = list(schema)
    n_columns = len(names)
    bad: list[tuple[int, str]] = []
    try:
        fields = _read_fields(data, sep, schema, strict=False)
    except pl.exceptions.ComputeError:
        data, bad = _blank_invalid_utf8(bytes(buf))
        if not bad:
            raise
        buf = data
        fields = _read_fields(data, sep, schema, strict=False)
        lines = Lines(buf, lines.placeholder, delimiter)
    if fields.height != len(lines):  # both keep every physical line; guard the assumption
        raise ValueError(f"line split mismatch: {len(lines)} lines vs {fields.height} rows")
    if sep != delim_b:
        bad = [(n, text.replace(sep.decode(), delimiter)) for n, text in bad]
    like = fields.get_column("f0")
    line_bytes = align_chunks(pl.Series("_len", lines.lengths()), like)
    field_bytes = pl.sum_horizontal([_len_bytes(c, schema[c]).fill_null(0).cast(pl.Int64) for c in names])
    f0 = pl.col("f0").cast(pl.String)
    # blank: empty, or all of the line is a whitespace-only first field (cheaper than a regex on every line);
    # a line of delimiters only (f0 null) is not blank but a data line of empty fields
    blank = (pl.col("_len") == 0) | ((f0.str.len_bytes() == pl.col("_len")) & f0.str.contains(r"^\s*$")).fill_null(False)
    frame = fields.with_columns(
        align_chunks(pl.int_range(1, fields.height + 1, dtype=pl.Int64, eager=True), like).alias("_line"),
        line_bytes.alias("_len"),
    ).with_columns((pl.col("_len") == field_bytes + (n_columns - 1)).alias("_fields_ok"), blank.alias("_blank"),
                   ).drop("_len")
    return frame, lines, bad


def _len_bytes(name: str, dtype) -> pl.Expr:
    return pl.col(name).cat.len_bytes() if dtype == pl.Categorical else pl.col(name).str.len_bytes()


def _read_fields(source, sep: bytes, schema: dict, strict: bool) -> pl.DataFrame:
    kw = dict(separator=sep.decode(), has_header=False, quote_char=None, schema=schema,
              missing_columns="insert", truncate_ragged_lines=not strict, raise_if_empty=False)
    if not strict:
        kw["extra_columns"] = "ignore"
    if isinstance(source, str):  # the lazy reader is the faster one for a path
        return pl.scan_csv(source, **kw).collect()
    return pl.read_csv(source, **kw)
