"""CSV export that a spreadsheet cannot turn into a formula (CSV/formula injection).

Invariant: in every text cell and every header that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return (after optional leading whitespace, Unicode spaces included), the value is prefixed with a
single quote ``'`` so Excel, LibreOffice and Google Sheets show it as text instead of evaluating it (OWASP's
advice). The look-alikes of those four signs count too: their full-width forms (``＝ ＋ － ＠``, which
East Asian spreadsheet locales and IMEs turn into the ASCII sign), their small forms (``﹦ ﹢ ﹣ ﹫``) and the
minus sign ``−`` (U+2212).
Numeric, boolean and temporal columns are written as they are: a negative *number* is not a formula,
and quoting it would break every numeric analysis of the export. Nothing else about the data changes.

Used by the dashboard's download buttons and by the report export.
"""
from __future__ import annotations

import io
import os
import re
from pathlib import Path

import polars as pl

TRIGGERS = ("=", "+", "-", "@", "\t", "\r",
            "\uff1d", "\uff0b", "\uff0d", "\uff20",  # full-width = + - @
            "\ufe66", "\ufe62", "\ufe63", "\ufe6b",  # small = + - @
            "\u2212")                                # minus sign
# \x1c-\x1f: Python's \s counts them as space, the Rust regex Polars uses does not; both engines must agree
_TRIGGER_RE = r"^[\s\x1c-\x1f]*[=+\-@\t\r\x{ff1d}\x{ff0b}\x{ff0d}\x{ff20}\x{fe66}\x{fe62}\x{fe63}\x{fe6b}\x{2212}]"
_PY_TRIGGER = re.compile(r"^[\s]*[" + re.escape("".join(TRIGGERS)) + "]")  # Python spells \x{...} differently


def neutralise(value):
    """One cell: ``'=1+1`` for ``=1+1``; non-strings and harmless strings unchanged."""
    if isinstance(value, str) and _PY_TRIGGER.match(value):
        return "'" + value
    return value


def _is_text(dtype: pl.DataType) -> bool:
    return dtype in (pl.String, pl.Categorical) or isinstance(dtype, (pl.Enum, pl.Categorical))


def safe_frame(df: pl.DataFrame) -> pl.DataFrame:
    """A copy of ``df`` with text cells and column names neutralised; nested columns become JSON-ish text."""
    exprs = []
    for name, dtype in df.schema.items():
        col = pl.col(name)
        if isinstance(dtype, (pl.List, pl.Struct, pl.Array, pl.Object)):
            col = col.map_elements(lambda v: None if v is None else str(v), return_dtype=pl.String)
            dtype = pl.String
        if _is_text(dtype) or dtype == pl.String:
            col = col.cast(pl.String)
            col = pl.when(col.str.contains(_TRIGGER_RE)).then(pl.lit("'") + col).otherwise(col)
        exprs.append(col.alias(str(neutralise(name))))
    return df.select(exprs)


def to_csv_bytes(df: pl.DataFrame) -> bytes:
    """The frame as UTF-8 CSV bytes (header included), safe to open in a spreadsheet."""
    buf = io.BytesIO()
    safe_frame(df).write_csv(buf)
    return buf.getvalue()


def write_csv(df: pl.DataFrame, path: str | os.PathLike) -> Path:
    """Write the neutralised CSV to ``path`` (not atomically; wrap in the caller's staging if needed)."""
    path = Path(path)
    path.write_bytes(to_csv_bytes(df))
    return path
