#!/usr/bin/python3
"""Real Patroni (Debian's /usr/bin/patroni, etcd3 DCS over etcd's HTTP/JSON gateway) runs two
local PostgreSQL 15 instances through the Epoch cluster given, elects a primary, streams to the
replica, and fails over when the primary's "host" is killed: its Patroni and every postgres
process of that member get SIGKILL at once, so no orphaned primary survives.

A checker thread polls both instances every SAMPLE_INTERVAL for the whole run (both queries in
flight at once, `select pg_is_in_recovery()` on a connection kept open to each) and fails the
run if one sample sees two primaries.
The leader key in Epoch (/service/<scope>/leader, read through the gateway) must name the
primary once the cluster is stable, before and after the failover. A row written on the first
primary (and seen on the replica) must be readable on the new primary, which must accept writes.

Bounds: the first primary and its streaming replica within BOOTSTRAP_BOUND; the new primary
within FAILOVER_BOUND = TTL + LOOP_WAIT + FAILOVER_MARGIN of the kill (the dead leader's lease
expires within TTL, the replica's next HA loop follows within LOOP_WAIT, promotion takes the
margin). The replica must not be promoted before TTL / 2 (it waits for the lease to expire).

Run as root, Patroni and PostgreSQL run as the `postgres` user (PostgreSQL refuses root); as
another user, as that user. Every process the script starts is killed by PID before it exits,
and by a guard process if the script itself is killed.

Usage: patroni_pg.py HOST:PORT,HOST:PORT,HOST:PORT API0,PG0,API1,PG1
  (the Epoch client addresses; the REST API and PostgreSQL ports of the two members)
Exits 0 and prints `ok` when every check held."""
import base64
import ctypes
import json
import os
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PATRONI = '/usr/bin/patroni'
PG_BIN = '/usr/lib/postgresql/15/bin'
PSQL = '/usr/bin/psql'
SCOPE = f'epoch-pg-{os.getpid()}'  # one Patroni cluster per run, on any Epoch cluster
TTL = 10  # Patroni's leader-key lease TTL, seconds
LOOP_WAIT = 2  # seconds between Patroni's HA loops
RETRY_TIMEOUT = 3  # loop_wait + 2 * retry_timeout <= ttl, as Patroni's documentation asks
SAMPLE_INTERVAL = 0.15  # seconds between the checker's samples
BOOTSTRAP_BOUND = 45  # seconds until a primary and a streaming replica
FAILOVER_MARGIN = 8  # seconds for the replica to notice, check its peer and promote
FAILOVER_BOUND = TTL + LOOP_WAIT + FAILOVER_MARGIN
SUPERUSER = ('postgres', 'epoch-super')
REPLICATION = ('replicator', 'epoch-repl')
PR_SET_PDEATHSIG = 1
IPC_RMID = 0

libc = ctypes.CDLL(None, use_errno=True)


def log(message):
    print(f'[{time.monotonic() - START:6.2f}s] {message}', flush=True)


START = time.monotonic()


class Failure(Exception):
    pass


def require(condition, message):
    if not condition:
        raise Failure(message)


def check_binaries():
    needed = [(PATRONI, 'patroni'), (f'{PG_BIN}/postgres', 'postgresql-15'),
              (f'{PG_BIN}/initdb', 'postgresql-15'), (f'{PG_BIN}/pg_basebackup', 'postgresql-15'),
              (PSQL, 'postgresql-client-15')]
    for path, package in needed:
        require(os.access(path, os.X_OK),
                f'{path} not found: install the Debian package {package} '
                '(scripts/deps.sh, which the test command runs, installs patroni and postgresql)')


class Member:
    """One Patroni member: its config, data directory and the processes it runs."""

    def __init__(self, root, name, api_port, pg_port, hosts):
        self.name = name
        self.api_port = api_port
        self.pg_port = pg_port
        self.dir = os.path.join(root, name)
        self.data_dir = os.path.join(self.dir, 'data')
        self.config_path = os.path.join(self.dir, 'patroni.yml')
        self.log_path = os.path.join(self.dir, 'patroni.log')
        self.process = None
        self.killed = False
        self.config = {  # JSON is YAML, which Patroni reads
            'scope': SCOPE,
            'namespace': '/service/',
            'name': name,
            'restapi': {'listen': f'127.0.0.1:{api_port}',
                        'connect_address': f'127.0.0.1:{api_port}'},
            'etcd3': {'hosts': hosts},
            'bootstrap': {
                'dcs': {'ttl': TTL, 'loop_wait': LOOP_WAIT, 'retry_timeout': RETRY_TIMEOUT,
                        'maximum_lag_on_failover': 1048576,
                        'postgresql': {'use_pg_rewind': False, 'use_slots': True}},
                'initdb': [{'encoding': 'UTF8'}, {'locale': 'C.UTF-8'}],
            },
            'postgresql': {
                'listen': f'127.0.0.1:{pg_port}',
                'connect_address': f'127.0.0.1:{pg_port}',
                'data_dir': self.data_dir,
                'bin_dir': PG_BIN,
                'pgpass': os.path.join(self.dir, 'pgpass'),
                'authentication': {
                    'superuser': {'username': SUPERUSER[0], 'password': SUPERUSER[1]},
                    'replication': {'username': REPLICATION[0], 'password': REPLICATION[1]},
                },
                # Written over pg_hba.conf once bootstrap has set the passwords: password
                # authentication over TCP, the replica's pg_basebackup and streaming included.
                'pg_hba': ['local all all trust',
                           f'host replication {REPLICATION[0]} 127.0.0.1/32 md5',
                           'host all all 127.0.0.1/32 md5'],
                'parameters': {
                    'unix_socket_directories': self.dir,
                    'dynamic_shared_memory_type': 'mmap',  # in data_dir, not /dev/shm
                    'shared_buffers': '16MB',
                    'fsync': 'off',  # the kill is of processes, the page cache survives it
                    'wal_keep_size': '64MB',
                },
            },
            'watchdog': {'mode': 'off'},
        }

    def prepare(self, owner):
        os.makedirs(self.dir, mode=0o700)
        with open(self.config_path, 'w') as f:
            json.dump(self.config, f, indent=1)
        if owner:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            os.chown(self.config_path, owner.pw_uid, owner.pw_gid)

    def start(self, owner):
        env = {'PATH': '/usr/bin:/bin', 'LC_ALL': 'C.UTF-8', 'HOME': self.dir,
               'PYTHONUNBUFFERED': '1'}
        kwargs = {}
        if owner:
            kwargs = {'user': owner.pw_uid, 'group': owner.pw_gid, 'extra_groups': []}
        with open(self.log_path, 'ab') as out:
            # Its own session, and SIGKILL if this script dies first. The postmaster Patroni
            # starts is a session leader of its own (Patroni's design: it outlives a Patroni
            # restart), so kill_host finds it through postmaster.pid.
            self.process = subprocess.Popen(
                [PATRONI, self.config_path], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.dir, env=env, start_new_session=True,
                preexec_fn=lambda: libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0),
                **kwargs)

    def postmaster(self):
        """(pid, shmid) from the postmaster.pid file, or (None, None)."""
        try:
            with open(os.path.join(self.data_dir, 'postmaster.pid')) as f:
                lines = f.read().splitlines()
        except OSError:
            return None, None
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        shmid = None
        if len(lines) >= 7 and len(lines[6].split()) == 2:
            shmid = int(lines[6].split()[1])
        return pid, shmid

    def kill_host(self):
        """SIGKILL Patroni, the postmaster and every descendant of either. All are stopped
        first, so none forks or takes over while the others die. Returns the PIDs killed."""
        if self.killed:
            return set()
        self.killed = True
        roots = set()
        if self.process and self.process.poll() is None:
            roots.add(self.process.pid)
        postmaster, shmid = self.postmaster()
        if postmaster and is_postgres(postmaster, self.data_dir):
            roots.add(postmaster)
        stopped = set()
        while True:
            new = descendants(roots) - stopped
            if not new:
                break
            for pid in new:
                signal_pid(pid, signal.SIGSTOP)
            stopped |= new
        for pid in stopped:
            signal_pid(pid, signal.SIGKILL)
            signal_pid(pid, signal.SIGCONT)
        if self.process:
            self.process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in stopped) and time.monotonic() < deadline:
            time.sleep(0.05)
        require(not any(alive(pid) for pid in stopped), f'{self.name}: a killed process lives')
        if shmid is not None:  # the postmaster's System V segment outlives it
            libc.shmctl(shmid, IPC_RMID, None)
        return stopped


def start_guard(members):
    """Forks a process that kills every member's host if this script dies before it has (a
    SIGKILL from the test's timeout): Patroni dies with the script (PR_SET_PDEATHSIG), the
    postmasters it started would not. Returns the guard's PID and the pipe to write b'x' to
    once the members are killed, which lets the guard exit doing nothing."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()  # out of the script's process group, which its killer may signal
        os.close(write_end)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # holds none of the script's pipes open
            os.dup2(devnull, fd)
        if os.read(read_end, 1) != b'x':
            for m in members:
                try:
                    m.kill_host()
                except Failure:
                    pass
        os._exit(0)
    os.close(read_end)
    return pid, write_end


def parent_of(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat.rpartition(')')[2].split()[1])


def descendants(roots):
    """`roots` and every live process below them."""
    children = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            parent = parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid for pid in roots if alive(pid)]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rpartition(')')[2].split()[0] != 'Z'
    except OSError:
        return False


def is_postgres(pid, data_dir):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            return data_dir.encode() in f.read()
    except OSError:
        return False


def signal_pid(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def psql_env():
    return {'PATH': '/usr/bin:/bin', 'PGPASSWORD': SUPERUSER[1], 'PGCONNECT_TIMEOUT': '2',
            'PGDATABASE': 'postgres', 'PGUSER': SUPERUSER[0], 'LC_ALL': 'C.UTF-8'}


def psql(port, sql):
    """psql over TCP as the superuser (password authentication): (exit code, stdout stripped,
    stderr stripped); -1 when it ran past 5 s."""
    try:
        r = subprocess.run([PSQL, '-h', '127.0.0.1', '-p', str(port), '-XAtqc', sql],
                           stdin=subprocess.DEVNULL, capture_output=True, env=psql_env(),
                           text=True, timeout=5)
    except subprocess.TimeoutExpired:
        return -1, '', 'timed out'
    return r.returncode, r.stdout.strip(), r.stderr.strip()


class RecoveryProbe:
    """`select pg_is_in_recovery()` on one instance over a connection it keeps open (PostgreSQL's
    frontend/backend protocol 3.0 on the member's Unix socket, where pg_hba trusts local
    connections): 'primary', 'replica' or 'down' (no connection, an error, no answer in 1 s).
    A lost connection is opened again at the next sample."""

    def __init__(self, member):
        self.path = os.path.join(member.dir, f'.s.PGSQL.{member.pg_port}')
        self.sock = None

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None

    def send(self):
        try:
            if self.sock is None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(1.0)
                self.sock.connect(self.path)
                params = b'user\0postgres\0database\0postgres\0\0'
                self.sock.sendall(struct.pack('!ii', 8 + len(params), 196608) + params)
                self.read_until_ready()
            sql = b'select pg_is_in_recovery()\0'
            self.sock.sendall(b'Q' + struct.pack('!i', 4 + len(sql)) + sql)
        except (OSError, ValueError):
            self.close()

    def receive(self):
        if self.sock is None:
            return 'down'
        try:
            rows = self.read_until_ready()
        except (OSError, ValueError):
            self.close()
            return 'down'
        return {b't': 'replica', b'f': 'primary'}.get(rows[0] if rows else None, 'down')

    def read_until_ready(self):
        """Reads messages up to ReadyForQuery; returns the first column of each DataRow. An
        ErrorResponse or an authentication request other than OK raises ValueError."""
        rows = []
        while True:
            kind, body = self.read_message()
            if kind == b'Z':
                return rows
            if kind == b'E' or (kind == b'R' and struct.unpack('!i', body[:4])[0] != 0):
                raise ValueError(body)
            if kind == b'D' and struct.unpack('!h', body[:2])[0] >= 1:
                length = struct.unpack('!i', body[2:6])[0]
                rows.append(body[6:6 + length] if length >= 0 else None)

    def read_message(self):
        head = self.read_exactly(5)
        return head[:1], self.read_exactly(struct.unpack('!i', head[1:])[0] - 4)

    def read_exactly(self, n):
        data = b''
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise OSError('connection closed')
            data += chunk
        return data


class Checker(threading.Thread):
    """Samples both instances at once every SAMPLE_INTERVAL: 'primary', 'replica' or 'down'
    each. Records the first sample with two primaries (the violation)."""

    def __init__(self, members):
        super().__init__(daemon=True)
        self.members = members
        self.samples = []  # (time, [state per member])
        self.violation = None
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self):
        probes = [RecoveryProbe(m) for m in self.members]
        try:
            while not self.done.is_set():
                began = time.monotonic()
                for probe in probes:  # both queries are in flight before either answer is read
                    probe.send()
                states = [probe.receive() for probe in probes]
                with self.lock:
                    self.samples.append((began, states))
                    if states.count('primary') > 1 and self.violation is None:
                        self.violation = (began - START, states)
                self.done.wait(max(0.0, SAMPLE_INTERVAL - (time.monotonic() - began)))
        finally:
            for probe in probes:
                probe.close()

    def latest(self):
        with self.lock:
            return self.samples[-1][1] if self.samples else None

    def require_safe(self):
        with self.lock:
            require(self.violation is None,
                    'two primaries at once: sample at %.2fs saw %s' % (self.violation or (0, [])))

    def wait_for(self, predicate, bound, what):
        """Waits (at most `bound` seconds) for a sample after now whose states satisfy
        `predicate`; returns (its time, its states)."""
        since = time.monotonic()
        deadline = since + bound
        while time.monotonic() < deadline:
            self.require_safe()
            with self.lock:
                for began, states in self.samples:
                    if began >= since and predicate(states):
                        return began, states
            time.sleep(SAMPLE_INTERVAL / 3)
        raise Failure(f'{what}: not within {bound} s (last sample {self.latest()})')


def leader_key(hosts):
    """The value of /service/<scope>/leader in Epoch (a member name), '' when absent."""
    key = base64.b64encode(f'/service/{SCOPE}/leader'.encode()).decode()
    body = json.dumps({'key': key}).encode()
    errors = []
    for host in hosts:
        request = urllib.request.Request(f'http://{host}/v3/kv/range', data=body,
                                         headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, timeout=3) as response:
                kvs = json.load(response).get('kvs', [])
        except OSError as e:
            errors.append(f'{host}: {e}')
            continue
        return base64.b64decode(kvs[0]['value']).decode() if kvs else ''
    raise Failure(f'no Epoch member answered the leader-key range: {errors}')


def wait_leader_key(hosts, name, bound):
    deadline = time.monotonic() + bound
    value = None
    while time.monotonic() < deadline:
        value = leader_key(hosts)
        if value == name:
            return
        time.sleep(0.2)
    raise Failure(f'the leader key names {value!r}, not the primary {name!r}, after {bound} s')


def wait_query(port, sql, expected, bound, what):
    deadline = time.monotonic() + bound
    result = None
    while time.monotonic() < deadline:
        result = psql(port, sql)
        if result[0] == 0 and result[1] == expected:
            return
        time.sleep(0.2)
    raise Failure(f'{what}: {sql!r} on :{port} gave {result}, not {expected!r}, in {bound} s')


def run(hosts, members, checker):
    for m in members:
        m.start(OWNER)
    checker.start()
    log(f'started Patroni {members[0].name} (pid {members[0].process.pid}) and '
        f'{members[1].name} (pid {members[1].process.pid}); etcd3 hosts {",".join(hosts)}')

    # 1. A primary and a replica, the leader key naming the primary.
    began, states = checker.wait_for(lambda s: sorted(s) == ['primary', 'replica'],
                                     BOOTSTRAP_BOUND, 'a primary and a replica')
    primary = members[states.index('primary')]
    replica = members[states.index('replica')]
    log(f'primary {primary.name} (:{primary.pg_port}), replica {replica.name} '
        f'(:{replica.pg_port})')
    wait_leader_key(hosts, primary.name, 10)

    # 2. A row on the primary, streamed to the replica.
    token = f'before-failover-{os.getpid()}-{time.time_ns()}'
    code, out, err = psql(primary.pg_port,
                          'create table epoch_failover(v text); '
                          f"insert into epoch_failover values ('{token}')")
    require(code == 0, f'write on the primary failed: {out} {err}')
    wait_query(replica.pg_port, 'select v from epoch_failover', token, 15,
               'the row reaches the replica')
    log('row written on the primary and streamed to the replica')
    checker.wait_for(lambda s: s == [('primary' if m is primary else 'replica') for m in members],
                     5, 'still one primary and one replica')
    require(leader_key(hosts) == primary.name, 'the leader key still names the primary')

    # 3. The primary's host dies: Patroni and every postgres process of it, at once.
    killed_at = time.monotonic()
    killed = primary.kill_host()
    dead_at = time.monotonic()
    log(f'killed {primary.name}: {len(killed)} processes (Patroni and its postgres)')

    # 4. The replica is promoted once the dead leader's lease expires.
    index = members.index(replica)
    promoted_at, states = checker.wait_for(lambda s: s[index] == 'primary', FAILOVER_BOUND,
                                           f'{replica.name} promoted')
    failover = promoted_at - killed_at
    log(f'{replica.name} primary {failover:.2f} s after the kill (bound {FAILOVER_BOUND} s)')
    require(failover > TTL / 2,
            f'promoted {failover:.2f} s after the kill: before a {TTL} s lease could expire')
    wait_leader_key(hosts, replica.name, 5)
    wait_query(replica.pg_port, 'select v from epoch_failover', token, 5,
               'the row on the new primary')
    code, out, err = psql(replica.pg_port, "insert into epoch_failover values ('after') "
                          'returning v')
    require(code == 0 and out == 'after', f'write on the new primary failed: {out} {err}')
    log('the new primary has the row and takes writes; the leader key names it')

    # 5. It stays so: the checker keeps sampling for a few more HA loops of the new primary.
    time.sleep(LOOP_WAIT + 1)
    checker.done.set()
    checker.join(timeout=10)
    checker.require_safe()
    with checker.lock:
        samples = list(checker.samples)
    dead = members.index(primary)
    require(all(states[dead] == 'down' for began, states in samples if began >= dead_at),
            f'{primary.name} answered after its host was killed')
    expected = ['primary' if m is replica else 'down' for m in members]
    after = [states for began, states in samples if began >= promoted_at]
    require(after and all(states == expected for states in after),
            f'after the failover every sample is {expected}: {after}')
    require(leader_key(hosts) == replica.name, 'the leader key names the new primary at the end')
    with_primary = sum(1 for _, states in samples if 'primary' in states)
    in_failover = sum(1 for began, _ in samples if killed_at <= began < promoted_at)
    print(f'samples={len(samples)} samples_with_one_primary={with_primary} '
          f'samples_between_kill_and_promotion={in_failover} two_primary_samples=0 '
          f'failover_seconds={failover:.2f} failover_bound_seconds={FAILOVER_BOUND} '
          f'ttl={TTL} loop_wait={LOOP_WAIT}', flush=True)


def main(hosts, ports):
    check_binaries()
    root = tempfile.mkdtemp(prefix='epoch-patroni-pg-')
    if OWNER:
        os.chown(root, OWNER.pw_uid, OWNER.pw_gid)
    members = [Member(root, 'pg0', ports[0], ports[1], hosts),
               Member(root, 'pg1', ports[2], ports[3], hosts)]
    for m in members:
        m.prepare(OWNER)
    guard, guard_pipe = start_guard(members)  # before any thread starts
    checker = Checker(members)
    passed = False
    try:
        run(hosts, members, checker)
        passed = True
    except Failure as e:
        log(f'FAILED: {e}')
    finally:
        checker.done.set()
        for m in members:
            try:
                m.kill_host()
            except Failure as e:
                log(f'FAILED: {e}')
                passed = False
        if checker.is_alive():
            checker.join(timeout=10)
        os.write(guard_pipe, b'x')
        os.close(guard_pipe)
        os.waitpid(guard, 0)
        if passed:
            shutil.rmtree(root, ignore_errors=True)
        else:
            for m in members:
                log(f'--- tail of {m.log_path}')
                try:
                    with open(m.log_path, errors='replace') as f:
                        print(''.join(f.readlines()[-40:]), flush=True)
                except OSError:
                    pass
            log(f'kept {root}')
    if passed:
        print('ok', flush=True)
    return 0 if passed else 1


def postgres_owner():
    """The `postgres` user's entry when running as root (PostgreSQL refuses root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam('postgres')
    except KeyError:
        sys.exit('running as root and there is no `postgres` user to run PostgreSQL as: install '
                 'the Debian package postgresql, which creates it')


OWNER = postgres_owner()

if __name__ == '__main__':
    if len(sys.argv) != 3 or len(sys.argv[2].split(',')) != 4:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1].split(','), [int(p) for p in sys.argv[2].split(',')]))
