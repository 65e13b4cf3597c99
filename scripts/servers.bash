# shellcheck shell=bash disable=SC2317  # cleanup and the stop helpers only run from the EXIT trap
# The throwaway database servers of the test suite, for the scripts that
# source this file (scripts/test, scripts/campaign): one way to install,
# start and stop each server. start_servers starts PostgreSQL 15, PgBouncer
# in front of it, MariaDB and MySQL, and TiDB and Vitess when asked for.
#
# The servers live in one temporary directory of the run's own, start side
# by side, listen only on 127.0.0.1 on free ports, and are stopped and
# deleted when the script ends, whatever the outcome. Every file a server
# makes (data, sockets, pid files, logs, temporary and secure-file-priv
# directories, also while it creates its data directory) is in there: each
# command names every such path that would otherwise default to /tmp, /run
# or the like, and the servers' TMPDIR points in there too, so that two runs
# at once on one machine never meet. (PostgreSQL's dynamic shared memory, in
# /dev/shm, is the exception: it takes a random name that no other server
# can hold, see start_postgres.) scripts/check-isolation traces a run to
# show it. What runs after start_servers sees:
#   IDEM_POSTGRES_DSN  postgres://postgres@127.0.0.1:PORT/idem_test?sslmode=disable
#   IDEM_PGBOUNCER_DSN postgres://postgres@127.0.0.1:PORT/idem_test?sslmode=disable
#                      (PgBouncer in transaction pooling mode, in front of
#                      that PostgreSQL; it also serves idem_test_single, the
#                      same database through a pool of one server connection)
#   IDEM_MARIADB_DSN   idem:idem@tcp(127.0.0.1:PORT)/idem_test   (MariaDB)
#   IDEM_MYSQL_DSN     idem:idem@tcp(127.0.0.1:PORT)/idem_test   (Oracle MySQL)
#   IDEM_TIDB_DSN      idem:idem@tcp(127.0.0.1:PORT)/idem_test   (TiDB; only
#                      with IDEM_TIDB=1)
#   IDEM_VITESS_DSN    idem:idem@tcp(127.0.0.1:PORT)/idem_test   (Vitess's
#                      vtgate, in front of a keyspace idem_test of 2 shards;
#                      only with IDEM_VITESS=1)
#
# IDEM_TIDB=1 asks for TiDB; unset, empty or 0, nothing about TiDB happens.
# TiDB has no package: scripts/tidb-build builds its server from source with
# the Go toolchain, once per machine, into a cache outside the checkout (the
# first time about 10 minutes and 2 GB of Go module downloads; later runs
# find the binary at once). tidb-server then runs as one process, SQL layer
# and key-value store together, with its data in the temporary directory.
#
# IDEM_VITESS=1 asks for Vitess in the same way: scripts/vitess-build builds
# vttestserver, vtcombo and mysqlctl once per machine (about 3 minutes and
# 175 MB of Go module downloads the first time), and vttestserver runs a
# keyspace of two shards, sharded, on a mysqld of its own from the MySQL 9.7
# of scripts/mysql-unpack, with every file in the temporary directory (see
# start_vitess).
#
# Works for developers and on a fresh Debian 12 CI machine as root (CI runs
# `bash .ci/run`, which asks for TiDB and Vitess), where PostgreSQL 15, PgBouncer,
# MariaDB and, for the race detector, gcc are installed with apt-get on
# first use, from the machine's own apt sources. MySQL has no package that
# Debian 12 can install: scripts/mysql-unpack unpacks MySQL 9.7 from Debian's
# unstable suite into a cache outside the checkout (about 50 MB downloaded
# once, 240 MB unpacked) and mysqld runs from there. The caches are safe for
# runs side by side: each appears only complete, renamed into place, and one
# run at a time fills it while the others wait. IDEM_MYSQL_CACHE_DIR,
# IDEM_TIDB_CACHE_DIR and IDEM_VITESS_CACHE_DIR (absolute paths) put them
# elsewhere, to try a first download without touching the shared ones, say;
# see the three scripts.
#
# IDEM_DURABLE=1 (scripts/campaign sets it) starts PostgreSQL, MariaDB and
# MySQL with durable settings instead of fast ones, each commit on disk
# before it is acknowledged, and a binary log, synced at each commit, on
# the two MySQL servers, as replication would have them. It also gives each
# of the three a way to be crashed and started again, for the fault
# campaign's server kills:
#   IDEM_SERVER_CONTROL  a directory with one directory per server
#                        (postgres, mariadb, mysql), holding `pid`, a link to
#                        the server's pid file (the postmaster's, for
#                        PostgreSQL), and `restart`, a script that starts the
#                        server again as it was started, on the data that a
#                        kill left, and returns once it answers.
# Only the caller that asked for them kills these servers: the test suite's
# servers are never durable and have no controls.

readonly PG_BIN_DIR=/usr/lib/postgresql/15/bin
# Servers refuse to run as root, so as root we run them as this system user.
readonly DB_OS_USER=idemtest

TMP_DIR=""
PG_DATA=""
APT_UPDATED="" # 1 once apt-get update has run
PGBOUNCER_DIR=""
PGBOUNCER_LAUNCHER_PID=""
PG_STARTING=""
MARIADB_DIR=""
MARIADB_LAUNCHER_PID=""
MARIADB_PLACES=()
MYSQL_ROOT=""  # the directory of scripts/mysql-unpack
MYSQL_DIR=""
MYSQL_INIT_PID=""
MYSQL_LAUNCHER_PID=""
MYSQLD=()
WANT_DURABLE="" # 1 when IDEM_DURABLE=1 asks for durable servers and their controls
CONTROL_DIR=""  # IDEM_SERVER_CONTROL's directory
MY_SETTINGS=()  # the settings of MariaDB and MySQL (set_my_settings)
WANT_TIDB=""   # 1 when IDEM_TIDB=1 asks for TiDB
TIDB_SERVER="" # the binary, from scripts/tidb-build
TIDB_DIR=""
TIDB_LAUNCHER_PID=""
TIDB_STARTED=0 # $SECONDS when tidb-server was launched
WANT_VITESS="" # 1 when IDEM_VITESS=1 asks for Vitess
VITESS_BIN=""  # the directory of scripts/vitess-build
VITESS_DIR=""
VITESS_LAUNCHER_PID=""
VITESS_STARTED=0 # $SECONDS when vttestserver was launched

log() { printf 'scripts/%s: %s\n' "${0##*/}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

is_root() { [[ $(id -u) -eq 0 ]]; }

# Run a command as the unprivileged database user. cd into the temp dir first:
# the caller's working directory (say a checkout under /root) may not be
# readable by that user, and initdb/pg_ctl complain about it. TMPDIR points
# into the temp dir as well: MariaDB and MySQL take their default --tmpdir
# from it, and whatever else a server puts in "the" temporary directory then
# stays in this run's, away from other runs' files in /tmp.
as_db_user() {
    db_user_prefix
    (cd "$TMP_DIR" && exec "${DB_USER_PREFIX[@]}" "$@")
}

# Set DB_USER_PREFIX to the words that run a command as as_db_user does,
# for as_db_user and for the restart scripts of write_control.
db_user_prefix() {
    DB_USER_PREFIX=(env TMPDIR="$TMP_DIR/tmp")
    if is_root; then
        DB_USER_PREFIX=(runuser -u "$DB_OS_USER" -- "${DB_USER_PREFIX[@]}")
    fi
}

# as_db_user with all output going to a log file. The redirection happens in
# a subshell: were it on a function call, it would be in force in this shell
# too, and a Ctrl-C meanwhile would send cleanup's messages into the log.
as_db_user_logged() {
    local log_file=$1
    shift
    (as_db_user "$@" >"$log_file" 2>&1)
}

# Run a command as root: directly, through sudo, or not at all.
as_root() {
    if is_root; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root to run '$*' (not root and no sudo); install the packages by hand"
    fi
}

# Install Debian packages with apt-get, from the machine's own sources,
# updating the package lists once per run. The lock timeout covers a fresh
# machine still running apt in background.
apt_install() {
    if [[ -z $APT_UPDATED ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update >&2
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300 install "$@" >&2
}

# ---------------------------------------------------------------- setup ---

ensure_postgres() {
    if ! have_postgres; then
        # The package creates (and, where services run, starts) a cluster
        # of its own on port 5432. As with MariaDB's, we never talk to it:
        # our server has its own data directory, port and socket.
        log "PostgreSQL 15 not found, installing postgresql-15 with apt-get"
        apt_install postgresql-15
        have_postgres || die "PostgreSQL 15 programs still missing after installing postgresql-15"
    fi
    # Prefer the version-specific directory so that initdb, pg_ctl, postgres
    # and psql all come from the same PostgreSQL 15 installation.
    if [[ -x $PG_BIN_DIR/pg_ctl ]]; then
        PATH="$PG_BIN_DIR:$PATH"
    fi
}

# PostgreSQL's programs: in Debian's directory of version 15, or on PATH
# (a PostgreSQL installed some other way).
have_postgres() {
    local tool
    for tool in initdb pg_ctl postgres psql; do
        [[ -x $PG_BIN_DIR/$tool ]] || command -v "$tool" >/dev/null 2>&1 || return 1
    done
}

# go test -race needs cgo, and Go turns cgo off where it finds no C
# compiler: a machine with Go alone gets Debian's gcc, with libc6-dev.
ensure_c_compiler() {
    command -v go >/dev/null 2>&1 || die "go not found on PATH"
    local cc
    cc=$(go env CC)
    command -v "${cc%% *}" >/dev/null 2>&1 && return
    log "no C compiler ($cc), which go test -race needs: installing gcc with apt-get"
    apt_install gcc libc6-dev
    command -v "${cc%% *}" >/dev/null 2>&1 || die "still no C compiler ($cc) after installing gcc"
}

# PgBouncer, in front of the test PostgreSQL, for the tests that show idem
# behind a pooler in transaction mode.
ensure_pgbouncer() {
    PATH="$PATH:/usr/sbin"
    command -v pgbouncer >/dev/null 2>&1 && return
    # As with the servers, the package's own service (port 6432) is left
    # alone: ours has its own configuration, port and files.
    log "PgBouncer not found, installing pgbouncer with apt-get"
    apt_install pgbouncer
    command -v pgbouncer >/dev/null 2>&1 || die "pgbouncer still missing after installing the pgbouncer package"
}

ensure_mariadb() {
    # mariadbd and mariadb-install-db live in /usr/sbin and /usr/bin, and
    # /usr/sbin is often missing from a normal user's PATH.
    PATH="$PATH:/usr/sbin"
    if have_mariadb; then
        return
    fi
    log "MariaDB not found, installing mariadb-server with apt-get"
    # The package may start (and enable) a system MariaDB service on port
    # 3306. We never talk to it: our server uses its own port, socket and data
    # directory, and every mariadb command below runs with --no-defaults so
    # that /etc/mysql configuration is ignored. So it is simply left alone.
    apt_install mariadb-server
    have_mariadb || die "MariaDB programs still missing after installing mariadb-server"
}

have_mariadb() {
    local tool
    for tool in mariadbd mariadb-install-db mariadb mariadb-admin; do
        command -v "$tool" >/dev/null 2>&1 || return 1
    done
}

# The browser tests of examples/browser drive a headless Chromium, and skip
# without one; Debian's chromium package is installed as mariadb-server is.
ensure_chromium() {
    local name
    for name in chromium chromium-browser google-chrome google-chrome-stable headless-shell; do
        command -v "$name" >/dev/null 2>&1 && return
    done
    log "Chromium not found, installing chromium with apt-get (for examples/browser)"
    apt_install chromium
    command -v chromium >/dev/null 2>&1 || die "chromium still missing after installing the chromium package"
}

# MySQL's mysqld, unpacked (or found in the cache) by scripts/mysql-unpack.
# There is no MySQL client: MariaDB's mariadb and mariadb-admin serve both.
ensure_mysql() {
    MYSQL_ROOT=$(bash scripts/mysql-unpack) || die "could not unpack MySQL (scripts/mysql-unpack failed)"
    [[ -n $MYSQL_ROOT ]] || die "scripts/mysql-unpack printed no directory"
}

# tidb-server, built (or found in the cache) by scripts/tidb-build, whose
# progress goes to our stderr. As for MySQL, MariaDB's clients talk to it.
ensure_tidb() {
    log "TiDB asked for (IDEM_TIDB=1): finding or building tidb-server with scripts/tidb-build"
    TIDB_SERVER=$(bash scripts/tidb-build) || die "could not build TiDB (scripts/tidb-build failed)"
    [[ -n $TIDB_SERVER && -x $TIDB_SERVER ]] || die "scripts/tidb-build printed no runnable binary ('$TIDB_SERVER')"
}

# vttestserver, vtcombo and mysqlctl, built (or found in the cache) by
# scripts/vitess-build, whose progress goes to our stderr.
ensure_vitess() {
    log "Vitess asked for (IDEM_VITESS=1): finding or building it with scripts/vitess-build"
    VITESS_BIN=$(bash scripts/vitess-build) || die "could not build Vitess (scripts/vitess-build failed)"
    [[ -n $VITESS_BIN && -x $VITESS_BIN/bin/vttestserver && -d $VITESS_BIN/config ]] ||
        die "scripts/vitess-build printed no directory with bin/vttestserver and config/ ('$VITESS_BIN')"
}

ensure_db_os_user() {
    is_root || return 0
    if ! id -u "$DB_OS_USER" >/dev/null 2>&1; then
        log "creating system user $DB_OS_USER to run the database servers"
        # Another run may create it concurrently, so re-check on failure.
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$DB_OS_USER" 2>/dev/null ||
            id -u "$DB_OS_USER" >/dev/null 2>&1 || die "could not create user $DB_OS_USER"
    fi
}

make_tmp_dir() {
    # As root, use /tmp rather than $TMPDIR: the unprivileged server user must
    # be able to reach the directory. Keep the path short as well: Unix socket
    # paths are limited to about 100 bytes.
    local base=${TMPDIR:-/tmp}
    if is_root || [[ ${#base} -gt 60 ]]; then
        base=/tmp
    fi
    TMP_DIR=$(mktemp -d "$base/idem-test.XXXXXX")
    PG_DATA=$TMP_DIR/pg/data
    MARIADB_DIR=$TMP_DIR/mariadb
    MYSQL_DIR=$TMP_DIR/mysql
    PGBOUNCER_DIR=$TMP_DIR/pgbouncer
    mkdir -p "$TMP_DIR/tmp" "$TMP_DIR/pg" "$PGBOUNCER_DIR" "$MARIADB_DIR/tmp" "$MARIADB_DIR/files" \
        "$MYSQL_DIR/tmp" "$MYSQL_DIR/files"
    if [[ -n $WANT_DURABLE ]]; then
        CONTROL_DIR=$TMP_DIR/control
        mkdir -p "$CONTROL_DIR/postgres" "$CONTROL_DIR/mariadb" "$CONTROL_DIR/mysql"
    fi
    if [[ -n $WANT_TIDB ]]; then
        TIDB_DIR=$TMP_DIR/tidb
        mkdir -p "$TIDB_DIR/tmp"
    fi
    if [[ -n $WANT_VITESS ]]; then
        VITESS_DIR=$TMP_DIR/vitess
        mkdir -p "$VITESS_DIR/tmp" "$VITESS_DIR/files"
    fi
    if is_root; then
        chown -R "$DB_OS_USER:" "$TMP_DIR"
    fi
}

# Print N free TCP ports on 127.0.0.1. Binding port 0 lets the kernel pick
# ports nobody uses (never 5432 or 3306: they are below the ephemeral range).
# Without python3, fall back to probing random ports nothing listens on.
pick_free_ports() {
    local n=$1
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$n" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
        return
    fi
    local ports=() port
    while [[ ${#ports[@]} -lt $n ]]; do
        port=$((20000 + RANDOM % 10000))
        [[ " ${ports[*]-} " == *" $port "* ]] && continue
        # A refused connection means nothing listens there.
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            ports+=("$port")
        fi
    done
    echo "${ports[@]}"
}

start_postgres() {
    local port=$1
    log "starting PostgreSQL 15 on 127.0.0.1:$port"
    # --no-sync: the cluster is thrown away, no need to flush it to disk,
    # unless it is to be crashed.
    local no_sync=(--no-sync) durability
    durability=$'fsync = off\nsynchronous_commit = off\nfull_page_writes = off'
    if [[ -n $WANT_DURABLE ]]; then
        no_sync=()
        durability=$'fsync = on\nsynchronous_commit = on\nfull_page_writes = on'
    fi
    as_db_user_logged "$TMP_DIR/pg/initdb.log" initdb --pgdata="$PG_DATA" \
        --username=postgres --auth=trust --encoding=UTF8 --locale=C "${no_sync[@]}" ||
        { cat "$TMP_DIR/pg/initdb.log" >&2; die "initdb failed"; }

    # Settings go into postgresql.conf rather than `pg_ctl -o` to avoid
    # quoting trouble. The socket (and its lock file) goes into our
    # directory instead of /var/run/postgresql; the pid file is in the data
    # directory, and the log is pg_ctl's --log. Dynamic shared memory stays
    # in /dev/shm (posix): each segment is created there under a random name
    # with O_EXCL, the server picking another name if one is taken, so two
    # servers cannot share one, and mmap, the kind that lives in the data
    # directory, would have the kernel write the segments to disk. (initdb
    # probes /dev/shm the same way.) Durability is traded for speed, as
    # nothing here must survive a crash, unless IDEM_DURABLE=1. The buffers hold the 5-million-key table of
    # proving/cmd/idembench's big table scenario (under 1 GB with its indexes); the
    # memory is only taken as pages are used.
    cat >>"$PG_DATA/postgresql.conf" <<EOF

# Added by scripts/servers.bash
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$TMP_DIR/pg'
max_connections = 200
$durability
shared_buffers = 1GB
EOF

    PG_STARTING=1
    # pg_ctl returns once the server answers, after a crash's recovery too.
    local server=(pg_ctl --pgdata="$PG_DATA" --log="$TMP_DIR/pg/postgres.log" --wait --timeout=60 --silent start)
    as_db_user "${server[@]}" ||
        { cat "$TMP_DIR/pg/postgres.log" >&2; die "PostgreSQL did not start"; }
    write_control postgres "$PG_DATA/postmaster.pid" "" "${server[@]}"

    psql --no-psqlrc --quiet -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -v ON_ERROR_STOP=1 -c 'CREATE DATABASE idem_test' >/dev/null
    log "PostgreSQL $(psql --no-psqlrc -h 127.0.0.1 -p "$port" -U postgres -d idem_test -Atc 'SHOW server_version')"
}

stop_postgres() {
    [[ -n $PG_STARTING ]] || return 0
    # pg_ctl may have been interrupted just after launching the postmaster,
    # before the postmaster wrote its pid file: give it a moment to appear.
    local _
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        [[ -f $PG_DATA/postmaster.pid ]] && break
        sleep 0.1
    done
    [[ -f $PG_DATA/postmaster.pid ]] || return 0
    log "stopping PostgreSQL"
    # "fast" rolls back open transactions and closes connections at once.
    if ! as_db_user pg_ctl --pgdata="$PG_DATA" --mode=fast --wait --timeout=30 --silent stop; then
        local pid
        pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
        if [[ -n $pid ]]; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
}

# PgBouncer in transaction pooling mode, in front of the PostgreSQL on
# PG_PORT: a client holds a server connection for one transaction at a
# time, so the statements of two clients meet on one server session.
# idem_test is the test database through a pool big enough for every test at
# once; idem_test_single is the same database through a pool of one server
# connection, where that meeting is certain. Its files (configuration, pid
# file, log) are in PGBOUNCER_DIR, and it listens on no Unix socket. PgBouncer
# wants every user in its auth_file, even with trust, as PostgreSQL trusts
# loopback here. lib/pq sends extra_float_digits at startup, which PgBouncer
# refuses unless told to ignore it.
start_pgbouncer() {
    local port=$1 pg_port=$2
    log "starting PgBouncer on 127.0.0.1:$port (transaction pooling, in front of PostgreSQL)"
    echo '"postgres" ""' >"$PGBOUNCER_DIR/userlist.txt"
    cat >"$PGBOUNCER_DIR/pgbouncer.ini" <<EOF
[databases]
idem_test = host=127.0.0.1 port=$pg_port dbname=idem_test pool_size=60
idem_test_single = host=127.0.0.1 port=$pg_port dbname=idem_test pool_size=1

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
pidfile = $PGBOUNCER_DIR/pgbouncer.pid
logfile = $PGBOUNCER_DIR/pgbouncer.log
auth_type = trust
auth_file = $PGBOUNCER_DIR/userlist.txt
pool_mode = transaction
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
EOF
    if is_root; then
        chown -R "$DB_OS_USER:" "$PGBOUNCER_DIR"
    fi
    # In the foreground of a background job, as MariaDB: the launcher is
    # only watched for an early death, and stopping uses the pid file.
    as_db_user pgbouncer "$PGBOUNCER_DIR/pgbouncer.ini" </dev/null >"$PGBOUNCER_DIR/stderr.log" 2>&1 &
    PGBOUNCER_LAUNCHER_PID=$!
    local deadline=$((SECONDS + 60))
    until PGCONNECT_TIMEOUT=2 psql --no-psqlrc -h 127.0.0.1 -p "$port" -U postgres -d idem_test \
        -Atc 'SELECT 1' >/dev/null 2>&1; do
        if ! kill -0 "$PGBOUNCER_LAUNCHER_PID" 2>/dev/null; then
            show_logs "$PGBOUNCER_DIR/stderr.log" "$PGBOUNCER_DIR/pgbouncer.log"
            die "PgBouncer exited during startup"
        fi
        if ((SECONDS >= deadline)); then
            show_logs "$PGBOUNCER_DIR/stderr.log" "$PGBOUNCER_DIR/pgbouncer.log"
            die "PgBouncer did not answer within 60 s"
        fi
        sleep 0.2
    done
    log "$(pgbouncer --version | head -n 1)"
}

# MariaDB, MySQL and TiDB speak the same protocol, and MariaDB's clients
# serve all three. Run a client PROGRAM as root against the server at WHERE:
# a Unix socket (a path) or, for TiDB, which has none, a TCP port on
# 127.0.0.1. --no-defaults must come first; it keeps any /etc/mysql or
# ~/.my.cnf settings (e.g. the system server's socket) out.
my_client() {
    local program=$1 where=$2
    shift 2
    local conn=(--socket="$where")
    if [[ $where != /* ]]; then
        conn=(--protocol=TCP --host=127.0.0.1 --port="$where")
    fi
    "$program" --no-defaults "${conn[@]}" --user=root "$@"
}

my_root() { my_client mariadb "$@"; }

# Print those of the LOG files that the server has written to.
show_logs() {
    local file
    for file in "$@"; do
        if [[ -s $file ]]; then
            cat "$file" >&2
        fi
    done
}

# Wait until the server at WHERE answers, as long as its launcher lives; on
# failure show its LOG files. `ping` succeeds as soon as the server answers.
wait_for_server() {
    local name=$1 where=$2 launcher_pid=$3
    shift 3
    local deadline=$((SECONDS + 60))
    until my_client mariadb-admin "$where" --connect-timeout=2 ping >/dev/null 2>&1; do
        if ! kill -0 "$launcher_pid" 2>/dev/null; then
            show_logs "$@"
            die "$name exited during startup"
        fi
        if ((SECONDS >= deadline)); then
            show_logs "$@"
            die "$name did not answer within 60 s"
        fi
        sleep 0.2
    done
}

# The database and user that the DSNs name, the same on MariaDB, MySQL and
# TiDB (at WHERE, see my_client). ALL on *.* includes PROCESS and CONNECTION
# ADMIN/SUPER, which tests need to see and KILL other sessions. Fine on a
# throwaway server.
create_test_db() {
    local where=$1
    my_root "$where" <<'SQL'
CREATE DATABASE idem_test;
CREATE USER 'idem'@'127.0.0.1' IDENTIFIED BY 'idem';
GRANT ALL PRIVILEGES ON *.* TO 'idem'@'127.0.0.1';
SQL
}

# The settings that MariaDB and MySQL share: loopback alone, no name
# lookups, and InnoDB's buffer pool, which, like PostgreSQL's buffers, holds
# the big table of proving/cmd/idembench. A commit's log is written to the
# operating system at once and flushed to disk about once a second, which a
# killed server survives and a failing machine does not; with
# IDEM_DURABLE=1, it is flushed at each commit, as is the binary log that
# start_mariadb and await_mysql then keep.
set_my_settings() {
    MY_SETTINGS=(--bind-address=127.0.0.1 --skip-name-resolve
        --innodb-buffer-pool-size=1G --max-connections=300)
    if [[ -n $WANT_DURABLE ]]; then
        MY_SETTINGS+=(--innodb-flush-log-at-trx-commit=1 --sync-binlog=1)
    else
        MY_SETTINGS+=(--innodb-flush-log-at-trx-commit=2)
    fi
}

# With IDEM_DURABLE=1, write the controls of server NAME (see the header):
# a link to its PID_FILE, and a restart script that runs COMMAND as the
# database user, as it ran at the start. pg_ctl returns once the server
# answers; a mysqld goes into the background, and the script waits until
# it answers on SOCKET (empty for pg_ctl). The script's output goes to
# whoever runs it; the server's, to its log.
write_control() {
    local name=$1 pid_file=$2 socket=$3
    shift 3
    [[ -n $WANT_DURABLE ]] || return 0
    local dir=$CONTROL_DIR/$name
    ln -sfn "$pid_file" "$dir/pid"
    db_user_prefix
    {
        echo '#!/usr/bin/env bash'
        echo "# Written by scripts/servers.bash: starts $name again after a kill, as it"
        echo "# was started, and returns once it answers."
        echo 'set -euo pipefail'
        printf 'cd %q\n' "$TMP_DIR"
        printf '%q ' "${DB_USER_PREFIX[@]}" "$@"
        if [[ -n $socket ]]; then
            # shellcheck disable=SC2016  # the script's own variables
            printf '%s\n' '</dev/null >/dev/null 2>&1 &' \
                'launcher=$!' \
                'deadline=$((SECONDS + 120))'
            printf 'until mariadb-admin --no-defaults --socket=%q --user=root --connect-timeout=2 ping >/dev/null 2>&1; do\n' "$socket"
            # shellcheck disable=SC2016
            printf '    kill -0 "$launcher" 2>/dev/null || { echo "%s exited as it restarted" >&2; exit 1; }\n' "$name"
            printf '    ((SECONDS < deadline)) || { echo "%s did not answer within 120 s of its restart" >&2; exit 1; }\n' "$name"
            printf '%s\n' '    sleep 0.1' 'done'
        else
            echo
        fi
    } >"$dir/restart"
    chmod +x "$dir/restart"
}

# Stopping a MariaDB or MySQL server takes two steps, so that the servers
# shut down side by side. signal_server sends SIGTERM, a clean shutdown, to
# the pid in PID_FILE, and prints that pid if the server was running.
signal_server() {
    local pid_file=$1 pid
    [[ -f $pid_file ]] || return 0
    pid=$(cat "$pid_file" 2>/dev/null || true)
    if [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null; then
        echo "$pid"
    fi
}

# reap_server gives the server PID (empty if signal_server found none) 30 s
# to exit before SIGKILL, then makes sure that its LAUNCHER is gone.
reap_server() {
    local pid=$1 launcher_pid=$2
    if [[ -n $pid ]]; then
        local deadline=$((SECONDS + 30))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    # Normally the launcher has exited with the server by now. If startup was
    # interrupted before the pid file existed, TERM it: runuser passes the
    # signal on to the server (and kills it 2 s later if needed).
    kill -TERM "$launcher_pid" 2>/dev/null || true
    wait "$launcher_pid" 2>/dev/null || true
}

# Where MariaDB keeps its files, for mariadb-install-db (which hands them on
# to the mariadbd it runs) and for the server alike: without --tmpdir,
# mariadb-install-db's server puts the temporary tables of its bootstrap SQL
# in /tmp, under names made of its pid, where another run's files may be; the
# socket and pid file would default to /run/mysqld and the data directory.
# --secure-file-priv confines LOAD DATA and SELECT ... INTO OUTFILE, which
# MariaDB, unlike MySQL, lets write anywhere by default, to our directory.
mariadb_places() {
    MARIADB_PLACES=(
        --datadir="$MARIADB_DIR/data"
        --tmpdir="$MARIADB_DIR/tmp"
        --socket="$MARIADB_DIR/mysql.sock"
        --pid-file="$MARIADB_DIR/mariadbd.pid"
        --secure-file-priv="$MARIADB_DIR/files"
    )
}

start_mariadb() {
    local port=$1
    log "starting MariaDB on 127.0.0.1:$port"
    mariadb_places
    # "normal" gives root@localhost an empty password instead of unix_socket
    # authentication, so root can connect over the socket no matter which OS
    # user runs this script. The server is private and throwaway. Its
    # messages go to stderr, so into the log here, as it has no --log-error.
    as_db_user_logged "$MARIADB_DIR/install-db.log" mariadb-install-db --no-defaults \
        "${MARIADB_PLACES[@]}" --auth-root-authentication-method=normal \
        --skip-test-db --skip-name-resolve ||
        { cat "$MARIADB_DIR/install-db.log" >&2; die "mariadb-install-db failed"; }

    # In the background; the launcher PID is runuser's (or mariadbd's) and is
    # only used to notice an early death. Stopping uses the pid file.
    local server=(mariadbd --no-defaults "${MARIADB_PLACES[@]}" --port="$port"
        --log-error="$MARIADB_DIR/error.log" "${MY_SETTINGS[@]}")
    if [[ -n $WANT_DURABLE ]]; then
        server+=(--log-bin="$MARIADB_DIR/data/binlog")
    fi
    as_db_user "${server[@]}" </dev/null >/dev/null 2>&1 &
    MARIADB_LAUNCHER_PID=$!

    wait_for_server MariaDB "$MARIADB_DIR/mysql.sock" "$MARIADB_LAUNCHER_PID" "$MARIADB_DIR/error.log"
    write_control mariadb "$MARIADB_DIR/mariadbd.pid" "$MARIADB_DIR/mysql.sock" "${server[@]}"
    create_test_db "$MARIADB_DIR/mysql.sock"
    log "MariaDB $(my_root "$MARIADB_DIR/mysql.sock" --batch --skip-column-names -e 'SELECT VERSION()')"
}

# mysqld runs through the dynamic loader and libraries of the unpacked
# directory (they are newer than the system's; see scripts/mysql-unpack).
# These options go into every mysqld command: no option files (--no-defaults
# must come first), the unpacked tree's directories, and every place where
# mysqld makes files: our data directory; our --tmpdir, which --initialize
# needs as much as the server (it opens temporary files there, in /tmp
# without it); a directory of our own for --secure-file-priv, without which
# mysqld refuses to start (the compiled-in one does not exist here); socket
# and pid file, whose defaults are in /run/mysqld and the data directory;
# and no X Protocol plugin, which would listen on port 33060 and on a socket
# in /run/mysqld.
set_mysqld_command() {
    MYSQLD=(
        "$MYSQL_ROOT/usr/lib64/ld-linux-x86-64.so.2"
        --library-path "$MYSQL_ROOT/usr/lib/x86_64-linux-gnu"
        "$MYSQL_ROOT/usr/sbin/mysqld" --no-defaults
        --basedir="$MYSQL_ROOT/usr"
        --lc-messages-dir="$MYSQL_ROOT/usr/share/mysql"
        --character-sets-dir="$MYSQL_ROOT/usr/share/mysql/charsets"
        --plugin-dir="$MYSQL_ROOT/usr/lib/mysql/plugin"
        --datadir="$MYSQL_DIR/data"
        --tmpdir="$MYSQL_DIR/tmp"
        --secure-file-priv="$MYSQL_DIR/files"
        --socket="$MYSQL_DIR/mysql.sock"
        --pid-file="$MYSQL_DIR/mysqld.pid"
        --mysqlx=OFF
    )
}

# MySQL starts in two steps, as its data directory takes the longest to
# create (a few seconds, against about one for PostgreSQL's and MariaDB's):
# start_mysql creates it in the background while the other servers start,
# and await_mysql then starts the server on it.
start_mysql() {
    local port=$1
    log "starting MySQL on 127.0.0.1:$port"
    set_mysqld_command
    # --initialize-insecure: root@localhost with an empty password, like
    # MariaDB's root above. Its messages go to stderr, so into the log here,
    # as it has no --log-error. In a background subshell: its PID is only
    # waited for, by await_mysql or, if something fails meanwhile, by cleanup.
    as_db_user_logged "$MYSQL_DIR/initialize.log" "${MYSQLD[@]}" --initialize-insecure &
    MYSQL_INIT_PID=$!
}

await_mysql() {
    local port=$1 rc=0
    wait "$MYSQL_INIT_PID" || rc=$?
    MYSQL_INIT_PID=""
    if ((rc != 0)); then
        cat "$MYSQL_DIR/initialize.log" >&2 || true
        die "mysqld --initialize-insecure failed"
    fi

    # As MariaDB above, with the same settings, and no binary log, which
    # MySQL, unlike MariaDB, writes by default (with a sync to disk at each
    # commit), unless IDEM_DURABLE=1.
    local server=("${MYSQLD[@]}" --port="$port" --log-error="$MYSQL_DIR/error.log" "${MY_SETTINGS[@]}")
    if [[ -z $WANT_DURABLE ]]; then
        server+=(--skip-log-bin)
    fi
    as_db_user "${server[@]}" </dev/null >/dev/null 2>&1 &
    MYSQL_LAUNCHER_PID=$!

    wait_for_server MySQL "$MYSQL_DIR/mysql.sock" "$MYSQL_LAUNCHER_PID" "$MYSQL_DIR/error.log"
    write_control mysql "$MYSQL_DIR/mysqld.pid" "$MYSQL_DIR/mysql.sock" "${server[@]}"
    create_test_db "$MYSQL_DIR/mysql.sock"
    log "MySQL $(my_root "$MYSQL_DIR/mysql.sock" --batch --skip-column-names -e 'SELECT VERSION()')"
}

# TiDB, like MySQL, starts in two steps: start_tidb launches tidb-server,
# which takes a few seconds to bootstrap its system tables while the other
# servers start, and await_tidb waits for it. The config follows the one in
# scripts/tidb-build's header: every file the server makes (socket none,
# logs, temporary and spill directories, oom_record/ beside the log) is in
# TIDB_DIR. path = "" keeps the data in a new directory under $TMPDIR, which
# the server deletes when it stops cleanly; TMPDIR points into TIDB_DIR, so
# that even a killed server leaves nothing behind once TMP_DIR is gone.
# pessimistic-auto-commit = true makes autocommit statements lock as MySQL's
# do, instead of failing on a write conflict at commit.
start_tidb() {
    local port=$1 status_port=$2
    log "starting TiDB on 127.0.0.1:$port (status port $status_port)"
    cat >"$TIDB_DIR/tidb.toml" <<EOF
store = "unistore"
path = ""
host = "127.0.0.1"
port = $port
socket = ""
temp-dir = "$TIDB_DIR/temp"
tmp-storage-path = "$TIDB_DIR/tmp-storage"

[status]
report-status = true
status-host = "127.0.0.1"
status-port = $status_port

[log]
level = "warn"
slow-query-file = "$TIDB_DIR/tidb-slow.log"

[log.file]
filename = "$TIDB_DIR/tidb.log"

[pessimistic-txn]
pessimistic-auto-commit = true
EOF
    # tidb-server writes no pid file: sh writes its own pid, then becomes
    # tidb-server, so that cleanup can signal the server itself. The launcher
    # is the subshell, which becomes runuser (as root) or the server: both
    # pass a SIGTERM on, should cleanup come before the pid file.
    # shellcheck disable=SC2016  # $$, $0 and $@ are sh's
    local server=(env TMPDIR="$TIDB_DIR/tmp" sh -c 'echo "$$" >"$0" && exec "$@"'
        "$TIDB_DIR/tidb-server.pid" "$TIDB_SERVER" -config "$TIDB_DIR/tidb.toml")
    TIDB_STARTED=$SECONDS
    (
        cd "$TMP_DIR"
        if is_root; then
            exec runuser -u "$DB_OS_USER" -- "${server[@]}"
        fi
        exec "${server[@]}"
    ) </dev/null >"$TIDB_DIR/stderr.log" 2>&1 &
    TIDB_LAUNCHER_PID=$!
}

await_tidb() {
    local port=$1
    wait_for_server TiDB "$port" "$TIDB_LAUNCHER_PID" "$TIDB_DIR/stderr.log" "$TIDB_DIR/tidb.log"
    log "TiDB answered $((SECONDS - TIDB_STARTED)) s after its start"
    create_test_db "$port"
    # VERSION() is TiDB's placeholder (the build has no git tags): the commit
    # tells which TiDB this is.
    log "TiDB $(my_root "$port" --batch --skip-column-names \
            -e "SELECT CONCAT(VERSION(), ', commit ', SUBSTRING_INDEX(SUBSTRING_INDEX(tidb_version(), 'Git Commit Hash: ', -1), '\\n', 1))")"
}

# Print a BASE port such that BASE to BASE+N-1 are free on 127.0.0.1, none
# of them one of the ports given after N (picked already, and released, by
# pick_free_ports): vttestserver takes its ports in a row from a base.
# Without python3, probe random bases as pick_free_ports does.
pick_free_port_range() {
    if ! command -v python3 >/dev/null 2>&1; then
        local n=$1 base port tries
        shift
        for ((tries = 0; tries < 100; tries++)); do
            base=$((20000 + RANDOM % 10000))
            for ((port = base; port < base + n; port++)); do
                [[ " $* " == *" $port "* ]] && continue 2
                (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue 2
            done
            echo "$base"
            return 0
        done
        return 1
    fi
    python3 - "$@" <<'EOF'
import socket, sys
n, taken = int(sys.argv[1]), {int(p) for p in sys.argv[2:]}
for _ in range(100):
    socks = []
    try:
        first = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        socks.append(first)
        first.bind(("127.0.0.1", 0))
        base = first.getsockname()[1]
        if base + n > 65536 or any(p in taken for p in range(base, base + n)):
            continue
        for p in range(base + 1, base + n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind(("127.0.0.1", p))
        print(base)
        sys.exit(0)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
sys.exit(1)
EOF
}

# Vitess: vttestserver runs one mysqld and, in one process, vtcombo
# (vtgate, vtctld and a vttablet per shard) over it, with a keyspace
# idem_test of two shards, -80 and 80-, each a database of that mysqld.
# vttestserver takes four ports from BASE: vtcombo's HTTP and gRPC ports,
# mysqld's, and vtgate's MySQL port (BASE+3), which the tests get. What it
# needs is put together in VITESS_DIR:
# - root/, its VTROOT: bin/ with mysqlctl (a link into the cache) and
#   vtcombo, which runs the cache's with larger pools of each tablet's
#   connections to mysqld than vttestserver asks for: it passes 4 for
#   transactions and 4 for other queries, and flags given last win. With
#   4, a fifth transaction on a shard waits in vttablet, before it reaches
#   MySQL, for one of the four to end, so that claims that wait for a held
#   key queue behind each other and wait several times the lock wait.
#   config/ from Vitess's source with test-suite.cnf made to suit
#   MySQL 9 (innodb_log_file_size is gone: innodb_redo_log_capacity), and
#   vthook/mysqld_shutdown, which mysqlctl runs instead of mysqladmin to
#   stop mysqld: MariaDB's mariadb-admin sends a shutdown command that MySQL
#   9.7 refuses, and vttestserver would then delete the data directory under
#   a live mysqld. The hook sends SIGTERM, a clean shutdown, to the pid in
#   the pid file; mysqlctl then waits for the pid file and socket to go.
# - mysql/, its VT_MYSQL_ROOT: sbin/mysqld runs the unpacked mysqld through
#   the unpacked loader and libraries, as set_mysqld_command does.
# - extra.cnf, added to the my.cnf that mysqlctl writes: loopback only, the
#   unpacked tree's directories, no X Protocol, and secure-file-priv and the
#   temporary directory in VITESS_DIR.
# - schema/idem_test/vschema.json, the keyspace's VSchema at the start:
#   sharded, with one vindex, xxhash, of the type of the same name (a hash
#   of any bytes: the hash vindex takes numbers only). vtgate sends a
#   statement on a table to the shard of its vindex column's value, and
#   refuses it on a table that the VSchema does not name, so a test names
#   each table it creates, with ALTER VSCHEMA ON table ADD VINDEX
#   xxhash(column). Without the sharded bit, vtgate would take the keyspace
#   for an unsharded one and refuse DDL, which needs one shard there.
# - data/, vttestserver's data directory, VTDATAROOT: mysqld's data,
#   socket, pid file, logs and temporary files are in data/vt_0000000001,
#   vtcombo's logs in data/logs. vttestserver deletes it when it stops.
# vtgate runs with --transaction-mode SINGLE, so that a transaction that
# would write on two shards fails (error 1317) rather than committing
# without atomicity, and lets every user change the VSchema with ALTER
# VSCHEMA ("%"), which tests that make tables of their own need. Its MySQL
# port takes any user and password. It also prints its configuration, as
# JSON on stdout, once it is ready.
start_vitess() {
    local base=$1
    log "starting Vitess (vttestserver) with vtgate on 127.0.0.1:$((base + 3)) (ports $base-$((base + 3)))"
    local root=$VITESS_DIR/root
    mkdir -p "$root/bin" "$root/vthook" "$VITESS_DIR/mysql/sbin" "$VITESS_DIR/data" "$VITESS_DIR/schema/idem_test"
    echo '{"sharded": true, "vindexes": {"xxhash": {"type": "xxhash"}}}' >"$VITESS_DIR/schema/idem_test/vschema.json"
    ln -s "$VITESS_BIN/bin/mysqlctl" "$root/bin/mysqlctl"
    cat >"$root/bin/vtcombo" <<EOF
#!/bin/sh
exec "$VITESS_BIN/bin/vtcombo" "\$@" --queryserver-config-transaction-cap 64 --queryserver-config-pool-size 16
EOF
    cp -R "$VITESS_BIN/config" "$root/config"
    chmod -R u+w "$root/config"
    grep -q '^innodb_log_file_size' "$root/config/mycnf/test-suite.cnf" ||
        die "Vitess's config/mycnf/test-suite.cnf has no innodb_log_file_size line to replace"
    sed -i 's/^innodb_log_file_size.*/innodb_redo_log_capacity = 8M/' "$root/config/mycnf/test-suite.cnf"
    cat >"$root/vthook/mysqld_shutdown" <<'EOF'
#!/bin/sh
# Stop mysqld, for mysqlctl shutdown (see scripts/test, start_vitess).
pid_file=$VTDATAROOT/vt_0000000001/mysql.pid
[ -f "$pid_file" ] || exit 0
pid=$(cat "$pid_file") || exit 1
kill -TERM "$pid" 2>/dev/null || true
EOF
    cat >"$VITESS_DIR/mysql/sbin/mysqld" <<EOF
#!/bin/sh
exec "$MYSQL_ROOT/usr/lib64/ld-linux-x86-64.so.2" --library-path "$MYSQL_ROOT/usr/lib/x86_64-linux-gnu" \
    "$MYSQL_ROOT/usr/sbin/mysqld" "\$@"
EOF
    chmod 755 "$root/vthook/mysqld_shutdown" "$VITESS_DIR/mysql/sbin/mysqld" "$root/bin/vtcombo"
    cat >"$VITESS_DIR/extra.cnf" <<EOF
bind-address = 127.0.0.1
mysqlx = OFF
lc-messages-dir = $MYSQL_ROOT/usr/share/mysql
character-sets-dir = $MYSQL_ROOT/usr/share/mysql/charsets
plugin-dir = $MYSQL_ROOT/usr/lib/mysql/plugin
secure-file-priv = $VITESS_DIR/files
innodb_buffer_pool_size = 128M
EOF
    if is_root; then
        chown -R "$DB_OS_USER:" "$VITESS_DIR"
    fi
    # vttestserver's own pid, written by sh before it becomes vttestserver,
    # as for tidb-server: cleanup signals it, and vttestserver stops vtcombo
    # and mysqld.
    # shellcheck disable=SC2016  # $$, $0 and $@ are sh's
    local server=(env TMPDIR="$VITESS_DIR/tmp" VTROOT="$root" VTDATAROOT="$VITESS_DIR/data"
        VT_MYSQL_ROOT="$VITESS_DIR/mysql" VT_MYSQL_BASEDIR="$MYSQL_ROOT/usr"
        sh -c 'echo "$$" >"$0" && exec "$@"' "$VITESS_DIR/vttestserver.pid"
        "$VITESS_BIN/bin/vttestserver"
        --port "$base" --data-dir "$VITESS_DIR/data"
        --mysql-bind-host 127.0.0.1 --vtcombo-bind-host 127.0.0.1
        --keyspaces idem_test --num-shards 2 --replica-count 0 --rdonly-count 0
        --schema-dir "$VITESS_DIR/schema"
        --extra-my-cnf "$VITESS_DIR/extra.cnf"
        --transaction-mode SINGLE --vschema-ddl-authorized-users %)
    VITESS_STARTED=$SECONDS
    (
        cd "$TMP_DIR"
        if is_root; then
            exec runuser -u "$DB_OS_USER" -- "${server[@]}"
        fi
        exec "${server[@]}"
    ) </dev/null >"$VITESS_DIR/stdout.log" 2>"$VITESS_DIR/stderr.log" &
    VITESS_LAUNCHER_PID=$!
}

# Wait for vttestserver's JSON on stdout, then for vtgate to answer on both
# shards.
await_vitess() {
    local port=$1
    local deadline=$((SECONDS + 120))
    until [[ -s $VITESS_DIR/stdout.log ]] &&
        my_client mariadb "$port" --password=idem --connect-timeout=2 -D idem_test \
            --batch --skip-column-names -e 'SHOW VITESS_SHARDS' 2>/dev/null | grep -q '^idem_test/80-$'; do
        if ! kill -0 "$VITESS_LAUNCHER_PID" 2>/dev/null; then
            show_logs "$VITESS_DIR/stdout.log" "$VITESS_DIR/stderr.log" "$VITESS_DIR/data/vt_0000000001/error.log"
            log "Vitess exited during startup"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            show_logs "$VITESS_DIR/stderr.log" "$VITESS_DIR/data/vt_0000000001/error.log"
            die "Vitess did not answer within 120 s"
        fi
        sleep 0.2
    done
    log "Vitess answered $((SECONDS - VITESS_STARTED)) s after its start: $(my_client mariadb "$port" --password=idem \
        --batch --skip-column-names -e 'SELECT VERSION()'), $(head -c 300 "$VITESS_DIR/stdout.log")"
}

# Wait for Vitess on vitess_base's ports, and start it again on other ones
# when it could not bind one: vttestserver binds its ports seconds after
# they were found free, and another program (another run of this script,
# say) may take one meanwhile. Two more starts at most.
await_vitess_restarting() {
    local tries
    for ((tries = 1; ; tries++)); do
        await_vitess "$((vitess_base + 3))" && return 0
        if ((tries == 3)) || ! grep -qs 'address already in use' "$VITESS_DIR/stdout.log" "$VITESS_DIR/stderr.log"; then
            die "Vitess exited during startup"
        fi
        log "a port of Vitess was taken by another program meanwhile: starting it again on other ports"
        stop_vitess
        rm -rf "$VITESS_DIR"
        mkdir -p "$VITESS_DIR/tmp" "$VITESS_DIR/files"
        vitess_base=$(pick_free_port_range 4 "$pg_port" "$mariadb_port" "$mysql_port" "$tidb_port" \
            "$tidb_status_port" "$pgbouncer_port") || die "could not find 4 free TCP ports in a row for Vitess"
        start_vitess "$vitess_base"
    done
}

# Stop Vitess: vttestserver, on SIGTERM, stops vtcombo and, through the
# hook, mysqld, then deletes its data directory. mysqld's pid is read first,
# so that it is stopped even if vttestserver could not stop it.
stop_vitess() {
    local mysqld_pid="" vttestserver_pid
    mysqld_pid=$(cat "$VITESS_DIR/data/vt_0000000001/mysql.pid" 2>/dev/null || true)
    vttestserver_pid=$(signal_server "$VITESS_DIR/vttestserver.pid")
    reap_server "$vttestserver_pid" "$VITESS_LAUNCHER_PID"
    if [[ -n $mysqld_pid ]] && kill -0 "$mysqld_pid" 2>/dev/null &&
        grep -q mysqld "/proc/$mysqld_pid/cmdline" 2>/dev/null; then
        log "stopping Vitess's mysqld, which vttestserver left running"
        kill -TERM "$mysqld_pid" 2>/dev/null
        reap_server "$mysqld_pid" ""
    fi
}

# Runs on every exit: success, failure, die, Ctrl-C or SIGTERM. MariaDB,
# MySQL and TiDB get their SIGTERM first and shut down while PostgreSQL stops.
cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    # Whatever read our stderr may be gone (`scripts/test 2>&1 | tee log`,
    # then Ctrl-C): a log line must then fail, not kill us halfway through.
    trap '' PIPE
    local mariadb_pid="" mysql_pid="" tidb_pid="" pgbouncer_pid=""
    # Vitess first: its vtcombo holds connections to its mysqld.
    if [[ -n $VITESS_LAUNCHER_PID ]]; then
        log "stopping Vitess"
        stop_vitess
    fi
    # PgBouncer goes first, so that PostgreSQL sees its connections close.
    # SIGTERM shuts it down at once, without waiting for its clients.
    if [[ -n $PGBOUNCER_LAUNCHER_PID ]]; then
        log "stopping PgBouncer"
        pgbouncer_pid=$(signal_server "$PGBOUNCER_DIR/pgbouncer.pid")
        reap_server "$pgbouncer_pid" "$PGBOUNCER_LAUNCHER_PID"
    fi
    if [[ -n $TIDB_LAUNCHER_PID ]]; then
        log "stopping TiDB"
        tidb_pid=$(signal_server "$TIDB_DIR/tidb-server.pid")
    fi
    if [[ -n $MYSQL_LAUNCHER_PID ]]; then
        log "stopping MySQL"
        mysql_pid=$(signal_server "$MYSQL_DIR/mysqld.pid")
    fi
    if [[ -n $MARIADB_LAUNCHER_PID ]]; then
        log "stopping MariaDB"
        mariadb_pid=$(signal_server "$MARIADB_DIR/mariadbd.pid")
    fi
    stop_postgres
    if [[ -n $MARIADB_LAUNCHER_PID ]]; then
        reap_server "$mariadb_pid" "$MARIADB_LAUNCHER_PID"
    fi
    if [[ -n $MYSQL_LAUNCHER_PID ]]; then
        reap_server "$mysql_pid" "$MYSQL_LAUNCHER_PID"
    fi
    if [[ -n $TIDB_LAUNCHER_PID ]]; then
        reap_server "$tidb_pid" "$TIDB_LAUNCHER_PID"
    fi
    # MySQL's data directory was still being created: let that end (it
    # takes seconds), so that no process of ours outlives the script.
    if [[ -n $MYSQL_INIT_PID ]]; then
        wait "$MYSQL_INIT_PID" 2>/dev/null
    fi
    if [[ -n $TMP_DIR && -d $TMP_DIR ]]; then
        rm -rf "$TMP_DIR"
    fi
    exit "$rc"
}

# start_servers starts every server that the environment asks for (TiDB
# with IDEM_TIDB=1, Vitess with IDEM_VITESS=1, the others always),
# installing what is missing, in a temporary directory of its own, and
# exports their DSNs (the IDEM_*_DSN variables above). From its first step
# on, an EXIT trap stops everything it started, whatever the outcome; a
# script that calls it runs its command after it, and exits.
start_servers() {
    case ${IDEM_TIDB-} in
    1) WANT_TIDB=1 ;;
    "" | 0) ;;
    *) die "IDEM_TIDB must be 1 (start TiDB) or 0 or unset (do not), not '$IDEM_TIDB'" ;;
    esac
    case ${IDEM_DURABLE-} in
    1) WANT_DURABLE=1 ;;
    "" | 0) ;;
    *) die "IDEM_DURABLE must be 1 (durable servers, with controls) or 0 or unset (fast ones), not '$IDEM_DURABLE'" ;;
    esac
    case ${IDEM_VITESS-} in
    1) WANT_VITESS=1 ;;
    "" | 0) ;;
    *) die "IDEM_VITESS must be 1 (start Vitess) or 0 or unset (do not), not '$IDEM_VITESS'" ;;
    esac

    ensure_c_compiler
    ensure_postgres
    ensure_pgbouncer
    ensure_mariadb
    ensure_mysql
    if [[ -n $WANT_TIDB ]]; then
        ensure_tidb
    fi
    if [[ -n $WANT_VITESS ]]; then
        ensure_vitess
    fi
    ensure_db_os_user
    ensure_chromium

    # From here on something may be running: always clean up. Exiting from
    # the INT/TERM traps runs the EXIT trap once, with the status given.
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    make_tmp_dir
    set_my_settings
    local pg_port mariadb_port mysql_port tidb_port tidb_status_port pgbouncer_port
    read -r pg_port mariadb_port mysql_port tidb_port tidb_status_port pgbouncer_port < <(pick_free_ports 6) || true
    [[ -n $pg_port && -n $mariadb_port && -n $mysql_port && -n $tidb_port && -n $tidb_status_port &&
        -n $pgbouncer_port ]] ||
        die "could not find free TCP ports"
    local vitess_base=""
    if [[ -n $WANT_VITESS ]]; then
        vitess_base=$(pick_free_port_range 4 "$pg_port" "$mariadb_port" "$mysql_port" "$tidb_port" \
            "$tidb_status_port" "$pgbouncer_port") || die "could not find 4 free TCP ports in a row for Vitess"
    fi

    # The slow first steps of MySQL and TiDB run while PostgreSQL and
    # MariaDB start.
    start_mysql "$mysql_port"
    if [[ -n $WANT_TIDB ]]; then
        start_tidb "$tidb_port" "$tidb_status_port"
    fi
    if [[ -n $WANT_VITESS ]]; then
        start_vitess "$vitess_base"
    fi
    start_postgres "$pg_port"
    start_pgbouncer "$pgbouncer_port" "$pg_port"
    start_mariadb "$mariadb_port"
    await_mysql "$mysql_port"
    if [[ -n $WANT_TIDB ]]; then
        await_tidb "$tidb_port"
    fi
    if [[ -n $WANT_VITESS ]]; then
        await_vitess_restarting
    fi

    export IDEM_POSTGRES_DSN="postgres://postgres@127.0.0.1:$pg_port/idem_test?sslmode=disable"
    export IDEM_PGBOUNCER_DSN="postgres://postgres@127.0.0.1:$pgbouncer_port/idem_test?sslmode=disable"
    export IDEM_MARIADB_DSN="idem:idem@tcp(127.0.0.1:$mariadb_port)/idem_test"
    export IDEM_MYSQL_DSN="idem:idem@tcp(127.0.0.1:$mysql_port)/idem_test"
    if [[ -n $WANT_TIDB ]]; then
        export IDEM_TIDB_DSN="idem:idem@tcp(127.0.0.1:$tidb_port)/idem_test"
    else
        # Nor one from the caller's environment: only IDEM_TIDB=1 brings
        # TiDB in.
        unset IDEM_TIDB_DSN
    fi
    if [[ -n $WANT_DURABLE ]]; then
        export IDEM_SERVER_CONTROL=$CONTROL_DIR
    else
        unset IDEM_SERVER_CONTROL
    fi
    if [[ -n $WANT_VITESS ]]; then
        export IDEM_VITESS_DSN="idem:idem@tcp(127.0.0.1:$((vitess_base + 3)))/idem_test"
    else
        unset IDEM_VITESS_DSN
    fi
}
