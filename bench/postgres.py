"""A PostgreSQL for the benchmarks (README "PostgreSQL"): initdb into a temporary folder and pg_ctl
on a free loopback port, as the tests' PostgresTestSupport does; as root the tools run as the
`postgres` user, since PostgreSQL refuses root. Never the system service."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bridgetest import free_port  # noqa: E402  (Tests/support, on the path through bench/run.py)

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"


def _run(*args: str) -> str:
    command = [str(a) for a in args]
    if os.getuid() == 0:
        command = ["runuser", "-u", USER, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/tmp")
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return done.stdout


class Server:
    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="smarthome-bench-pg-"))
        if os.getuid() == 0:
            shutil.chown(self.directory, USER, USER)
        self.data = self.directory / "data"
        _run(BIN / "initdb", "-D", self.data, "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8")
        self.port = free_port()
        # Durable as a real server is (fsync on): the write rate measured is a real one.
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c max_connections=100"
        _run(BIN / "pg_ctl", "-D", self.data, "-l", self.directory / "log", "-w", "-o", options, "start")

    def create(self, name: str) -> str:
        _run(BIN / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name)
        return f"postgres://{USER}@127.0.0.1:{self.port}/{name}"

    def query(self, database: str, sql: str) -> str:
        return _run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", database, "-tAc", sql).strip()

    def stats(self, database: str) -> dict:
        """The bridge's writes to `database` so far, for rates over a window: history rows (counted in
        the table), rows written (inserted or updated, from pg_stat_user_tables) to `sensor_state` and
        to the lease tables, transactions committed (pg_stat_database), the server's WAL position, and
        the sum of the leases' epochs (each change of hands adds one).
        The statistics lag a backend's writes by up to a second (PostgreSQL flushes them at most once
        a second per backend)."""
        written = "coalesce((SELECT sum(n_tup_ins + n_tup_upd) FROM pg_stat_user_tables WHERE relname IN ({})), 0)"
        row = self.query(database, "SELECT (SELECT count(*) FROM readings), "
                         + written.format("'sensor_state'") + ", "
                         + written.format("'user_leases', 'cluster_instances'") + ", "
                         "(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), "
                         "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'), "
                         "(SELECT coalesce(sum(epoch), 0) FROM user_leases)")
        history, state, leases, commits, wal, epochs = (float(v) for v in row.split("|"))
        return {"history_rows": history, "state_rows": state, "lease_rows": leases, "commits": commits,
                "wal_bytes": wal, "lease_changes": epochs, "at": time.monotonic()}

    def stop(self) -> None:
        try:
            _run(BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
