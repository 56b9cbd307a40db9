"""The results database (SQLite, stdlib ``sqlite3``): one row per point, keyed by config hash.

Table ``points``: ``hash`` (sha256 of the resolved configuration's canonical JSON, primary key),
``sweep``, ``point`` (index in its spec), ``kind``, ``status`` (``ok``/``error``), ``error``,
``wall_time`` (s, measured around the point in the worker), ``version`` (acesim that computed
it), ``finished_at`` (UTC ISO time), ``config`` (the resolved configuration as JSON), then one
column per swept path (``npu.hbm_bandwidth``) and one per result metric (``time``, ``busbw``),
added with ``ALTER TABLE`` as new ones appear. Table ``columns`` records each added column's
role (``axis`` or ``metric``). A metric whose name is already taken by a swept path or a fixed
column is stored as ``result.<name>``.

Every row is written in its own transaction in the parent process, in WAL mode: a sweep killed
at any moment leaves only whole rows, and a restart skips the hashes already present.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import SweepError

__all__ = ["ResultStore", "read_table", "FIXED_COLUMNS", "SCHEMA"]

SCHEMA = "acesim.sweep/1"
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

_CREATE = """
CREATE TABLE IF NOT EXISTS points (
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
);
CREATE TABLE IF NOT EXISTS columns (name TEXT PRIMARY KEY, role TEXT NOT NULL, position INTEGER);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


def _q(name: str) -> str:
    """A quoted SQLite identifier (paths contain dots and brackets)."""
    return '"' + name.replace('"', '""') + '"'


class ResultStore:
    """An open results database that a sweep writes to."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            raise SweepError(f"--db {self.path}: folder {self.path.parent} does not exist")
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a committed row survives the process being killed (not power loss).
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_CREATE)
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA,))
            elif row[0] != SCHEMA:
                raise SweepError(f"{self.path}: database schema {row[0]!r}, expected {SCHEMA!r}")
        except sqlite3.DatabaseError as exc:
            raise SweepError(f"{self.path}: not a usable SQLite database ({exc})") from None
        self._roles: dict[str, str] = {}
        self._refresh_columns()

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
        return {r[0] for r in self.conn.execute(sql)}

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
            row[column] = value
            roles[column] = "metric"
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
                        "INSERT OR IGNORE INTO columns VALUES (?, ?, "
                        "(SELECT COUNT(*) FROM columns))",
                        (column, role),
                    )
                    self._roles[column] = role
            names = ", ".join(_q(c) for c in row)
            marks = ", ".join("?" for _ in row)
            conn.execute(
                f"INSERT OR REPLACE INTO points ({names}) VALUES ({marks})", list(row.values())
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            self._refresh_columns()
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
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60.0)
        try:
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
