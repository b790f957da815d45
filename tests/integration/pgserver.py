"""A private PostgreSQL server (Debian's postgresql-15) for the real-server tests: its own
data directory and Unix socket under a temporary directory, no TCP listener, stopped and
removed when done. The server keeps its own account of what its backends wait on
(pg_stat_activity's wait events), which `wait_event_shares` samples during a run."""
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time

USER = "postgres"  # the package's system user: initdb and postgres refuse to run as root


def bindir():
    """The newest installed server's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return os.path.dirname(found[-1]) if found else None


class PgServer:
    def __init__(self, settings=()):
        self.bin = bindir()
        if not self.bin:
            raise FileNotFoundError("no PostgreSQL server: apt-get install postgresql-15")
        self.pw = pwd.getpwnam(USER)
        self.tmp = tempfile.mkdtemp(prefix="lockscope-pg-", dir="/var/tmp")
        os.chown(self.tmp, self.pw.pw_uid, self.pw.pw_gid)
        self.data = os.path.join(self.tmp, "data")
        self.proc = None
        self._as_user([os.path.join(self.bin, "initdb"), "-D", self.data, "-A", "trust", "-U", USER,
                       "--no-sync", "-E", "UTF8"])
        conf = ["listen_addresses = ''", f"unix_socket_directories = '{self.tmp}'",
                "max_connections = 100", "shared_buffers = '64MB'", "log_min_messages = warning",
                *settings]
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            f.write("\n".join(conf) + "\n")
        self.log = open(os.path.join(self.tmp, "server.log"), "w+")
        self.proc = subprocess.Popen(self._user_cmd([os.path.join(self.bin, "postgres"), "-D", self.data]),
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + 60
        while subprocess.run(self._user_cmd([os.path.join(self.bin, "pg_isready"), "-q", "-h", self.tmp]),
                             check=False).returncode != 0:
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"postgres did not start: {self.log.read()[-2000:]}")
            time.sleep(0.2)
        self.pid = self.proc.pid

    def _user_cmd(self, cmd):
        return ["setpriv", f"--reuid={self.pw.pw_uid}", f"--regid={self.pw.pw_gid}", "--init-groups",
                "--", *cmd]

    def _as_user(self, cmd, **kw):
        return subprocess.run(self._user_cmd(cmd), check=True, capture_output=True, text=True, cwd=self.tmp,
                              **kw)

    def psql(self, sql):
        """@sql's result rows, fields split on '|'."""
        out = self._as_user([os.path.join(self.bin, "psql"), "-h", self.tmp, "-U", USER, "-d", "postgres",
                             "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql]).stdout
        return [line.split("|") for line in out.splitlines() if line]

    def pgbench(self, *args):
        """pgbench against the server, started; the caller waits on it."""
        return subprocess.Popen(self._user_cmd([os.path.join(self.bin, "pgbench"), "-h", self.tmp, "-U", USER,
                                                *args, "postgres"]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp)

    def script(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, self.pw.pw_uid, self.pw.pw_gid)
        return path

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # smart shutdown would wait for clients; SIGTERM is "fast"
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


# The sampler: one session reading pg_stat_activity every 10 ms (each read a fresh snapshot:
# a transaction would otherwise see the first one throughout) into a temporary table.
SAMPLER = """
CREATE TEMP TABLE s(pid int, wtype text, wevent text, state text);
DO $$
BEGIN
  FOR i IN 1..{n} LOOP
    PERFORM pg_stat_clear_snapshot();
    INSERT INTO s SELECT pid, coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'CPU'), state
      FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid();
    PERFORM pg_sleep({period});
  END LOOP;
END $$;
SELECT pid, wtype, wevent, count(*) FROM s GROUP BY 1, 2, 3;
"""
