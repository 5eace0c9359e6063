"""Fixtures for the client's tests: a real server started by
scripts/test-clients.sh, which passes it in the environment:

  DLOCK_TEST_DSN          conninfo of the server (database with dlock)
  DLOCK_TEST_BOUNCER_DSN  the same through pgbouncer in transaction mode
  DLOCK_TEST_PGCTL        a command: `$DLOCK_TEST_PGCTL stop|start` (as root)
  DLOCK_TEST_SERVER_LOG   the server's log (log_statement = 'all')
  DLOCK_TEST_DEAD_PORT    a port nothing listens on
"""
from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from typing import Callable, Dict, Iterator, List

import psycopg
import pytest


def _env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set: run the tests through scripts/test-clients.sh")
    return v


@pytest.fixture(scope="session")
def dsn() -> str:
    return _env("DLOCK_TEST_DSN")


@pytest.fixture(scope="session")
def bouncer_dsn() -> str:
    return _env("DLOCK_TEST_BOUNCER_DSN")


@pytest.fixture(scope="session")
def dead_port() -> str:
    return _env("DLOCK_TEST_DEAD_PORT")


@pytest.fixture
def db(dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection of the test's own, to look at the server."""
    conn = psycopg.connect(dsn, autocommit=True)
    yield conn
    conn.close()


@pytest.fixture
def key() -> str:
    return f"pytest/{uuid.uuid4().hex[:12]}"


class Server:
    """Stops and starts the test server; reads its log."""

    def __init__(self) -> None:
        self.pgctl = _env("DLOCK_TEST_PGCTL")
        self.log = _env("DLOCK_TEST_SERVER_LOG")
        self.dsn = _env("DLOCK_TEST_DSN")
        self.stopped = False

    def stop(self) -> None:
        subprocess.run([self.pgctl, "stop"], check=True, stdout=subprocess.DEVNULL)
        self.stopped = True

    def start(self) -> None:
        subprocess.run([self.pgctl, "start"], check=True, stdout=subprocess.DEVNULL)
        self.stopped = False
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(self.dsn, connect_timeout=5).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def log_mark(self) -> int:
        return os.path.getsize(self.log)

    def log_since(self, mark: int) -> str:
        with open(self.log, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    if s.stopped:  # never leave it down for the next test
        s.start()


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def holder_of(db: psycopg.Connection, key: str):
    row = db.execute("SELECT holder, token FROM dlock_locks WHERE key = %s", (key,)).fetchone()
    return row


# A line of the test server's log (log_line_prefix '%m [%p] %qvxid=%v %a ',
# set by scripts/test-clients.sh): its pid, its virtual transaction id and
# its level; a DETAIL line (the parameters of a statement) belongs to the
# record of its pid before it.
_LINE = re.compile(r"^\S+ \S+ \S+ \[(\d+)\] vxid=(\S*) .*?(LOG|DETAIL|ERROR|STATEMENT|HINT|CONTEXT):  (.*)$")


def log_records(text: str) -> List[Dict[str, str]]:
    """The statements of a piece of the server's log, in order: dicts of
    pid, vxid (the virtual transaction id: one per transaction), text (the
    statement) and detail (its parameters, if any)."""
    out: List[Dict[str, str]] = []
    last: Dict[str, Dict[str, str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, vxid, level, rest = m.groups()
        if level == "LOG" and re.match(r"(statement|execute [^:]*): ", rest):
            rec = {"pid": pid, "vxid": vxid, "text": rest.split(": ", 1)[1], "detail": ""}
            out.append(rec)
            last[pid] = rec
        elif level == "DETAIL" and pid in last:
            last[pid]["detail"] += rest
    return out


def claims_of(db: psycopg.Connection, table: str) -> Dict[str, str]:
    """The rows of dlock_claims on table (only its own: other tests leave
    rows in their backoff), key -> 'live' (a holder's unexpired claim) or
    'backoff' (no holder, claimable again only later: given back as failed)
    or 'other'."""
    rows = db.execute(
        "SELECT key, CASE WHEN holder IS NOT NULL AND expires_at > clock_timestamp() THEN 'live'"
        " WHEN holder IS NULL AND retry_at > clock_timestamp() THEN 'backoff' ELSE 'other' END"
        " FROM dlock_claims WHERE table_name = %s::regclass ORDER BY key", (table,)).fetchall()
    return {r[0]: r[1] for r in rows}
