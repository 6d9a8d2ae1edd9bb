# PostgreSQL from Debian (`postgresql`, 15 on bookworm), one throwaway cluster in
# $BQ_BROKERS_DIR/postgres: TCP on 127.0.0.1:5432 only, the Unix socket inside that directory, a
# test role and database (`bq` / password `bq`, SCRAM over TCP), no fsync (test speed).
#
# PostgreSQL refuses to run as root: when this script runs as root the cluster belongs to the
# `postgres` account the Debian package creates, and every server command goes through
# `runuser -u postgres`; otherwise it runs as the calling user.
BROKERS+=(postgres)
PG_PORT=${BQ_POSTGRES_PORT:-5432}
PG_USER=${BQ_POSTGRES_USER:-bq}
PG_PASSWORD=${BQ_POSTGRES_PASSWORD:-bq}
PG_DB=${BQ_POSTGRES_DB:-bq}
PG_DIR=$BQ_BROKERS_DIR/postgres
PG_DATA=$PG_DIR/data

# pg_bin TOOL : the path of a server tool of the newest installed major version.
pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] && [ -x "$dir/$1" ] || return 1
    echo "$dir/$1"
}

# pg_as CMD... : runs a command as the cluster's owner.
pg_as() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# pg_admin SQL : runs SQL as the bootstrap superuser over the cluster's private socket.
pg_admin() {
    pg_as psql -X -q -v ON_ERROR_STOP=1 -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres -tA -c "$1"
}

install_postgres() {
    pg_bin pg_ctl >/dev/null || apt_install postgresql
    command -v psql >/dev/null || apt_install postgresql-client
    # Debian's package creates and may start a default cluster on 5432; ours needs that port.
    if command -v pg_lsclusters >/dev/null; then
        local ver name port status _rest
        while read -r ver name port status _rest; do
            if [ "$status" = online ] && [ "$port" = "$PG_PORT" ]; then
                log "stopping Debian's default cluster $ver/$name (it holds port $port)"
                pg_as pg_ctlcluster "$ver" "$name" stop || true
            fi
        done < <(pg_lsclusters -h 2>/dev/null)
    fi
    mkdir -p "$PG_DIR"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$PG_DIR"; fi
    chmod 700 "$PG_DIR"
    if [ ! -s "$PG_DATA/PG_VERSION" ]; then
        log "initdb $PG_DATA"
        # Trust on the socket (a private 0700 directory), passwords (SCRAM) over TCP.
        pg_as "$(pg_bin initdb)" -D "$PG_DATA" -U postgres --auth-local=trust \
            --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 --no-sync >/dev/null
    fi
}

# The server is up and the test role can log in to the test database over TCP.
pg_server_ready() {
    pg_as "$(pg_bin pg_isready)" -q -h "$PG_DIR" -p "$PG_PORT" -d postgres -U postgres
}

start_postgres() {
    if ! pg_server_ready; then
        pg_as "$(pg_bin pg_ctl)" -D "$PG_DATA" -l "$PG_DIR/postgres.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            start >/dev/null
    fi
    # The test role and database; both statements are no-ops on a re-run.
    pg_admin "DO \$\$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN
            CREATE ROLE \"$PG_USER\" LOGIN PASSWORD '$PG_PASSWORD';
        END IF; END \$\$;"
    if [ -z "$(pg_admin "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ]; then
        pg_admin "CREATE DATABASE \"$PG_DB\" OWNER \"$PG_USER\""
    fi
}

ready_postgres() {
    PGPASSWORD=$PG_PASSWORD PGCONNECT_TIMEOUT=3 psql -X -q -h 127.0.0.1 -p "$PG_PORT" \
        -U "$PG_USER" -d "$PG_DB" -tA -c 'SELECT 1' 2>/dev/null | grep -qx 1
}

stop_postgres() {
    [ -s "$PG_DATA/postmaster.pid" ] || return 0
    pg_as "$(pg_bin pg_ctl)" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 || true
}

env_postgres() {
    echo "export BQ_POSTGRES_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB"
}
