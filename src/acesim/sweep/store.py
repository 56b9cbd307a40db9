"""The results database (SQLite, stdlib ``sqlite3``): one row per point, keyed by config hash.

Table ``points``: ``hash`` (sha256 of the resolved configuration's canonical JSON, primary key),
``sweep``, ``point`` (index in its spec), ``kind``, ``status`` (``ok``; ``refused``: an invalid
value or a configuration that does not divide or fit, its reason in ``error``; ``error``: the
point failed), ``error``,
``wall_time`` (s, measured around the point in the worker), ``version`` (acesim that computed
it), ``finished_at`` (UTC ISO time), ``config`` (the resolved configuration as JSON), then one
column per swept path (``npu.hbm_bandwidth``) and one per result metric (``time``, ``busbw``),
added with ``ALTER TABLE`` as new ones appear. Table ``columns`` records each added column's
role (``axis`` or ``metric``). A metric whose name is already taken by a swept path or a fixed
column is stored as ``result.<name>``.

Table ``meta`` (``key``, ``value``) holds the schema marker: ``schema`` = :data:`SCHEMA`, and
``version``, the acesim that created the file. A metric that is not a finite number (NaN, inf)
is stored as NULL.

Every row is written in its own transaction in the parent process, in WAL mode: a sweep killed
at any moment leaves only whole rows, and a restart skips the hashes already present.

Opening an existing file checks it before anything trusts (or adds to) it, so a damaged or
foreign file is a one-line :class:`~acesim.errors.SweepError` naming it, never a traceback or
"N already in the database, ran 0": it must be an SQLite database (its header), pass
``PRAGMA quick_check``, carry the acesim schema marker (a database of another application is
never written to) and have the ``points`` and ``columns`` tables with their fixed columns.
"""

from __future__ import annotations

import datetime as _dt
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..config.files import FileProblem, regular_file
from ..errors import SweepError, shorten
from ..version import __version__
from .units import column_unit

__all__ = ["ResultStore", "read_table", "read_units", "check_database", "FIXED_COLUMNS", "SCHEMA"]

SCHEMA = "acesim.sweep/2"
#: Earlier schemas this version reads, and upgrades when it writes (a ``unit`` per column).
OLDER_SCHEMAS = ("acesim.sweep/1",)
FIXED_COLUMNS = (
    "hash",
    "sweep",
    "point",
    "kind",
    "status",
    "error",
    "wall_time",
    "version",
    "finished_at",
    "config",
)

_CREATE = (
    """CREATE TABLE points (
    hash TEXT PRIMARY KEY,
    sweep TEXT,
    point INTEGER,
    kind TEXT,
    status TEXT NOT NULL,
    error TEXT,
    wall_time REAL,
    version TEXT,
    finished_at TEXT,
    config TEXT
)""",
    "CREATE TABLE columns (name TEXT PRIMARY KEY, role TEXT NOT NULL, position INTEGER, unit TEXT)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
)
_TABLE_COLUMNS = {
    "points": FIXED_COLUMNS,
    "columns": ("name", "role", "position"),
    "meta": ("key", "value"),
}
_SQLITE_HEADER = b"SQLite format 3\x00"


_LOCK_WAIT_S = 60.0
"""How long (s) a writer waits for another process's lock on the results database."""


def _file_is_empty(path: Path) -> bool:
    """True when ``path`` does not exist or is an empty file (SQLite makes a new database);
    SweepError when it is a directory, not a regular file, or not an SQLite database."""
    try:
        info = regular_file(path, "SQLite results database")
    except FileProblem as problem:
        raise SweepError(f"{path}: {problem}") from None
    if info is None or info.st_size == 0:
        return True
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise SweepError(f"{path}: cannot read the results database ({exc.strerror})") from None
    if header != _SQLITE_HEADER:
        raise SweepError(
            f"{path}: not an SQLite database (it does not start with the SQLite header), so not "
            "an acesim results database"
        )
    return False


def _quick_check(conn: sqlite3.Connection, path: Path) -> None:
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        raise SweepError(
            f"{path}: corrupt SQLite database: PRAGMA quick_check fails ({exc}); restore it "
            "from a copy or use another file"
        ) from None
    if rows != [("ok",)]:
        first = shorten(" ".join(str(rows[0][0]).split()), 200) if rows else "no answer"
        raise SweepError(
            f"{path}: corrupt SQLite database: PRAGMA quick_check reports {first!s} "
            f"({len(rows)} problem{'s' if len(rows) != 1 else ''}); restore it from a copy or "
            "use another file"
        )


def check_database(conn: sqlite3.Connection, path: Path, *, quick_check: bool = True) -> bool:
    """Check an open database; True when it has no tables yet (a new file).

    Raises :class:`SweepError` naming ``path`` for a file that fails ``PRAGMA quick_check``
    (skipped with ``quick_check=False``), has tables but no acesim schema marker (another
    application's database), a different schema, or lacks a table or a fixed column.
    """
    if quick_check:
        _quick_check(conn, path)
    objects = dict(
        conn.execute(
            "SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
            "AND type IN ('table', 'view')"
        ).fetchall()
    )
    if not objects:
        return True
    marker = None
    if objects.get("meta") == "table":
        present = {r[1] for r in conn.execute("PRAGMA table_info(meta)")}
        if {"key", "value"} <= present:
            marker = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if marker is None:
        names = ", ".join(sorted(objects)[:6]) + (", ..." if len(objects) > 6 else "")
        raise SweepError(
            f"{path}: not an acesim results database: it has tables ({names}) but no acesim "
            f"schema marker (meta.schema = {SCHEMA!r}); acesim does not write to another "
            "application's database"
        )
    if marker[0] != SCHEMA and marker[0] not in OLDER_SCHEMAS:
        raise SweepError(
            f"{path}: database schema {shorten(str(marker[0]), 80)!r}, expected {SCHEMA!r}"
        )
    for table, needed in _TABLE_COLUMNS.items():
        kind = objects.get(table)
        if kind is None:
            raise SweepError(f"{path}: damaged acesim results database: no table {table!r}")
        if kind != "table":
            raise SweepError(
                f"{path}: damaged acesim results database: {table!r} is a {kind}, not a table"
            )
        present = {r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")}
        missing = [c for c in needed if c not in present]
        if missing:
            raise SweepError(
                f"{path}: damaged acesim results database: table {table!r} lacks the "
                f"column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            )
    return False


def _storable(value: Any) -> Any:
    """NaN and infinities become NULL (SQLite has no NaN; inf would need a text marker)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _q(name: str) -> str:
    """A quoted SQLite identifier (paths contain dots and brackets)."""
    return '"' + name.replace('"', '""') + '"'


class ResultStore:
    """An open results database that a sweep writes to."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            raise SweepError(f"--db {self.path}: folder {self.path.parent} does not exist")
        new_file = _file_is_empty(self.path)
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=_LOCK_WAIT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise SweepError(f"{self.path}: cannot open the results database ({exc})") from None
        try:
            if new_file:
                self._set_journal()
            else:
                _quick_check(self.conn, self.path)
            self.conn.execute("BEGIN IMMEDIATE")  # two sweeps creating one file: one creates
            try:
                if check_database(self.conn, self.path, quick_check=False):
                    for statement in _CREATE:
                        self.conn.execute(statement)
                    self.conn.executemany(
                        "INSERT INTO meta VALUES (?, ?)",
                        [("schema", SCHEMA), ("version", __version__)],
                    )
                else:
                    self._upgrade()
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            if not new_file:
                self._set_journal()
            self._roles: dict[str, str] = {}
            self._refresh_columns()
        except SweepError:
            self.conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise SweepError(f"{self.path}: not a usable SQLite database ({exc})") from None

    def _upgrade(self) -> None:
        """An acesim.sweep/1 database gains the ``unit`` column (filled for known columns)."""
        present = {r[1] for r in self.conn.execute("PRAGMA table_info(columns)")}
        if "unit" in present:
            return
        self.conn.execute("ALTER TABLE columns ADD COLUMN unit TEXT")
        for name, role in self.conn.execute("SELECT name, role FROM columns").fetchall():
            self.conn.execute(
                "UPDATE columns SET unit = ? WHERE name = ?", (column_unit(name, role), name)
            )
        self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA,))

    def _set_journal(self) -> None:
        # Switching to WAL takes the file's exclusive lock and SQLite answers SQLITE_BUSY at
        # once (without the busy timeout) while another connection reads or creates the file:
        # retry for as long as the connection's own timeout would wait.
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        # WAL + NORMAL: a committed row survives the process being killed (not power loss).
        self.conn.execute("PRAGMA synchronous=NORMAL")

    def _refresh_columns(self) -> None:
        self._roles = dict(self.conn.execute("SELECT name, role FROM columns").fetchall())
        self._present = {r[1] for r in self.conn.execute("PRAGMA table_info(points)")}

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finished(self, *, include_errors: bool = True) -> set[str]:
        """Hashes already recorded (only successful ones when ``include_errors`` is False)."""
        sql = "SELECT hash FROM points"
        if not include_errors:
            sql += " WHERE status = 'ok'"
        try:
            return {r[0] for r in self.conn.execute(sql)}
        except sqlite3.DatabaseError as exc:
            raise SweepError(f"{self.path}: cannot read the points recorded ({exc})") from None

    def metric_column(self, name: str, axes: dict[str, Any]) -> str:
        """The column a metric is stored in (``result.<name>`` when the name is taken)."""
        taken = name in FIXED_COLUMNS or name in axes or self._roles.get(name, "metric") != "metric"
        return f"result.{name}" if taken else name

    def write(
        self,
        *,
        hash: str,
        sweep: str,
        point: int,
        kind: str,
        axes: dict[str, Any],
        outcome: dict[str, Any],
        config: str,
    ) -> None:
        """Insert (or replace) one point's row in a single transaction."""
        row: dict[str, Any] = {
            "hash": hash,
            "sweep": sweep,
            "point": point,
            "kind": kind,
            "status": outcome["status"],
            "error": outcome.get("error"),
            "wall_time": outcome.get("wall_time"),
            "version": outcome.get("version"),
            "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "config": config,
        }
        roles: dict[str, str] = {}
        for name, value in axes.items():
            row[name] = value
            roles[name] = "axis"
        for name, value in outcome.get("metrics", {}).items():
            column = self.metric_column(name, axes)
            row[column] = _storable(value)
            roles[column] = "metric"
        try:
            self._write_row(row, roles)
        except sqlite3.DatabaseError as exc:
            raise SweepError(f"{self.path}: cannot write point {point} ({exc})") from None

    def _write_row(self, row: dict[str, Any], roles: dict[str, str]) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            missing = [c for c in row if c not in self._present]
            if missing:
                self._refresh_columns()  # another writer may have added them
                for column in (c for c in row if c not in self._present):
                    conn.execute(f"ALTER TABLE points ADD COLUMN {_q(column)}")
                    self._present.add(column)
            for column, role in roles.items():
                if column not in self._roles:
                    conn.execute(
                        "INSERT OR IGNORE INTO columns (name, role, position, unit) VALUES "
                        "(?, ?, (SELECT COUNT(*) FROM columns), ?)",
                        (column, role, column_unit(column, role)),
                    )
                    self._roles[column] = role
            names = ", ".join(_q(c) for c in row)
            marks = ", ".join("?" for _ in row)
            conn.execute(
                f"INSERT OR REPLACE INTO points ({names}) VALUES ({marks})", list(row.values())
            )
            conn.execute("COMMIT")
        except BaseException:
            try:
                conn.execute("ROLLBACK")
                self._refresh_columns()
            except sqlite3.Error:
                pass  # the error being raised says more
            raise


def read_table(
    db: str | Path, *, config: bool = False
) -> tuple[list[str], list[tuple[Any, ...]], dict[str, str]]:
    """(column names, rows, {column: role}) of a results database, rows in sweep/point order.

    Column order: status, swept columns, metrics, error, wall_time, version, sweep, point, hash,
    finished_at (and config when asked).
    """
    path = Path(db)
    if not path.exists():
        raise SweepError(f"{path}: results database does not exist")
    if _file_is_empty(path):
        raise SweepError(f"{path}: empty file, not an acesim results database")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60.0)
        try:
            if check_database(conn, path):
                raise SweepError(f"{path}: SQLite database without tables, no sweep results")
            roles = dict(
                conn.execute("SELECT name, role FROM columns ORDER BY position").fetchall()
            )
            present = [r[1] for r in conn.execute("PRAGMA table_info(points)")]
            ordered = ["status"]
            ordered += [c for c, r in roles.items() if r == "axis" and c in present]
            ordered += [c for c, r in roles.items() if r == "metric" and c in present]
            ordered += ["error", "wall_time", "version", "sweep", "point", "hash", "finished_at"]
            if config:
                ordered.append("config")
            sql = f"SELECT {', '.join(_q(c) for c in ordered)} FROM points ORDER BY sweep, point"
            rows = conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise SweepError(f"{path}: not an acesim results database ({exc})") from None
    return ordered, rows, roles


def read_units(db: str | Path) -> dict[str, str]:
    """Column -> unit of a results database (``""`` for text and counts; the fixed columns
    included: ``wall_time`` is in s). Databases written before units were recorded get them
    from the same rules now."""
    _names, _rows, roles = read_table(db)
    path = Path(db)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60.0)
        try:
            present = {r[1] for r in conn.execute("PRAGMA table_info(columns)")}
            stored: dict[str, str] = {}
            if "unit" in present:
                stored = dict(conn.execute("SELECT name, unit FROM columns").fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise SweepError(f"{path}: not an acesim results database ({exc})") from None
    units = {"wall_time": "s"}
    for name, role in roles.items():
        unit = stored.get(name)
        units[name] = unit if unit is not None else column_unit(name, role)
    return units
