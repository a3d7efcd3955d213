#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the tests: `.ci/pg.sh start` prints the DSN,
# `.ci/pg.sh stop` removes it; `.ci/pg.sh restart` restarts the server in place.
# Runs the server as the `postgres` user (initdb/postgres refuse root), on 127.0.0.1
# and a private Unix socket directory only. Installs PostgreSQL with apt-get if missing.
set -euo pipefail

DATA=${MEMSHIFT_PGDATA:-/tmp/memshift-pg}
PORT=${MEMSHIFT_PGPORT:-54329}
PASSWORD=${MEMSHIFT_PGPASSWORD:-memshift-test-secret}

pgbin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

ensure_installed() {
  if [ -z "$(pgbin)" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
  fi
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
}

as_pg() { runuser -u postgres -- "$@"; }

case "${1:-}" in
  start)
    ensure_installed
    BIN=$(pgbin)
    if [ -f "$DATA/postmaster.pid" ]; then as_pg "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true; fi
    rm -rf "$DATA"
    mkdir -p "$DATA"
    chown postgres: "$DATA"
    chmod 700 "$DATA"
    pwfile=$(mktemp)
    printf '%s\n' "$PASSWORD" > "$pwfile"
    chown postgres: "$pwfile"
    as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      --pwfile="$pwfile" -E UTF8 --no-sync >/dev/null
    rm -f "$pwfile"
    as_pg "$BIN/pg_ctl" -D "$DATA" -w -l "$DATA/server.log" \
      -o "-p $PORT -c listen_addresses=127.0.0.1 -k $DATA -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null
    as_pg "$BIN/psql" -h "$DATA" -p "$PORT" -U postgres -q -c "CREATE DATABASE memshift_test" >/dev/null
    echo "postgresql://postgres:${PASSWORD}@127.0.0.1:${PORT}/memshift_test"
    ;;
  restart)
    as_pg "$(pgbin)/pg_ctl" -D "$DATA" -w -m fast restart >/dev/null
    ;;
  stop)
    if [ -f "$DATA/postmaster.pid" ]; then as_pg "$(pgbin)/pg_ctl" -D "$DATA" -w -m fast stop >/dev/null || true; fi
    rm -rf "$DATA"
    ;;
  *)
    echo "usage: $0 start|restart|stop" >&2
    exit 2
    ;;
esac
