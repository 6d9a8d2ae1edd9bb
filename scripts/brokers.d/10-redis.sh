# Redis 7 from Debian, on 127.0.0.1:6379 (plain) and 127.0.0.1:6380 (TLS, with a throwaway CA
# generated on first start, for the rediss:// tests), no persistence.
BROKERS+=(redis)
REDIS_PORT=${BQ_REDIS_PORT:-6379}
REDIS_TLS_PORT=${BQ_REDIS_TLS_PORT:-6380}
REDIS_DIR="$BQ_BROKERS_DIR/redis"
install_redis() {
    command -v redis-server >/dev/null || apt_install redis-server
    command -v openssl >/dev/null || apt_install openssl
}
redis_tls_material() {
    local d="$REDIS_DIR/tls"
    [ -s "$d/server.crt" ] && return 0
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=babelqueue-test-ca" \
        -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$d/ext.cnf"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -days 3650 -extfile "$d/ext.cnf" -out "$d/server.crt" >/dev/null 2>&1
}
start_redis() {
    mkdir -p "$REDIS_DIR"
    redis_tls_material
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$REDIS_DIR/tls/server.crt" \
        --tls-key-file "$REDIS_DIR/tls/server.key" --tls-ca-cert-file "$REDIS_DIR/tls/ca.crt" \
        --tls-auth-clients no \
        --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log"
}
ready_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
stop_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true; }
env_redis() {
    echo "export BQ_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    echo "export BQ_REDISS_URL=rediss://127.0.0.1:$REDIS_TLS_PORT"
    echo "export BQ_REDIS_TLS_CA=$REDIS_DIR/tls/ca.crt"
}
