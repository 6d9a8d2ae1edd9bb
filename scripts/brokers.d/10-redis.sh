# Redis 7 from Debian, on 127.0.0.1:6379 (plain) and 127.0.0.1:6380 (TLS, with a throwaway CA
# generated on first start, for the rediss:// tests), no persistence. Besides the default user
# (no password), an ACL user `bq-auth` with the password `bq-secret`, for the tests that
# connect with a wrong password.
# A second server on 127.0.0.1:6381 speaks only TLS and requires a client certificate signed by
# the same CA (mutual TLS); a client certificate of that CA and one of a foreign CA (which the
# server does not trust) are made next to the server's, for the mutual-TLS tests.
BROKERS+=(redis)
REDIS_PORT=${BQ_REDIS_PORT:-6379}
REDIS_TLS_PORT=${BQ_REDIS_TLS_PORT:-6380}
REDIS_MTLS_PORT=${BQ_REDIS_MTLS_PORT:-6381}
REDIS_DIR="$BQ_BROKERS_DIR/redis"
REDIS_TLS="$REDIS_DIR/tls"
REDIS_MTLS_DIR="$REDIS_DIR/mtls"
install_redis() {
    command -v redis-server >/dev/null || apt_install redis-server
    command -v openssl >/dev/null || apt_install openssl
}
# redis_client_cert CA_DIR NAME : a client certificate CA_DIR/NAME.crt (key NAME.key) signed by
# the CA of CA_DIR, made once.
redis_client_cert() {
    local d=$1 n=$2
    [ -s "$d/$n.crt" ] && return 0
    openssl req -newkey rsa:2048 -nodes -subj "/CN=babelqueue-$n" \
        -keyout "$d/$n.key" -out "$d/$n.csr" >/dev/null 2>&1
    printf 'extendedKeyUsage=clientAuth\n' > "$d/$n-ext.cnf"
    openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -days 3650 -extfile "$d/$n-ext.cnf" -out "$d/$n.crt.tmp" >/dev/null 2>&1
    mv "$d/$n.crt.tmp" "$d/$n.crt"
}
redis_tls_material() {
    test_tls_material "$REDIS_TLS" babelqueue-test-ca
    redis_client_cert "$REDIS_TLS" client
    # A CA the servers do not trust, and a client certificate of it.
    test_tls_material "$REDIS_TLS/foreign" babelqueue-foreign-ca
    redis_client_cert "$REDIS_TLS/foreign" client
}
# redis_mtls_cli ARG... : redis-cli on the mutual-TLS port, with the trusted client certificate.
redis_mtls_cli() {
    redis-cli --tls --cacert "$REDIS_TLS/ca.crt" --cert "$REDIS_TLS/client.crt" \
        --key "$REDIS_TLS/client.key" -h 127.0.0.1 -p "$REDIS_MTLS_PORT" "$@"
}
start_redis() {
    mkdir -p "$REDIS_DIR" "$REDIS_MTLS_DIR"
    redis_tls_material
    redis_plain_ready || redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" \
        --save "" --appendonly no \
        --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$REDIS_TLS/server.crt" \
        --tls-key-file "$REDIS_TLS/server.key" --tls-ca-cert-file "$REDIS_TLS/ca.crt" \
        --tls-auth-clients no \
        --user bq-auth on '>bq-secret' '~*' '&*' '+@all' \
        --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log"
    redis_mtls_ready || redis-server --daemonize yes --bind 127.0.0.1 --port 0 \
        --save "" --appendonly no \
        --tls-port "$REDIS_MTLS_PORT" --tls-cert-file "$REDIS_TLS/server.crt" \
        --tls-key-file "$REDIS_TLS/server.key" --tls-ca-cert-file "$REDIS_TLS/ca.crt" \
        --tls-auth-clients yes \
        --dir "$REDIS_MTLS_DIR" --pidfile "$REDIS_MTLS_DIR/redis.pid" \
        --logfile "$REDIS_MTLS_DIR/redis.log"
}
redis_plain_ready() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
redis_mtls_ready() { redis_mtls_cli ping 2>/dev/null | grep -q PONG; }
ready_redis() { redis_plain_ready && redis_mtls_ready; }
stop_redis() {
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    redis_mtls_cli shutdown nosave >/dev/null 2>&1 || true
}
env_redis() {
    echo "export BQ_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    echo "export BQ_REDISS_URL=rediss://127.0.0.1:$REDIS_TLS_PORT"
    echo "export BQ_REDIS_TLS_CA=$REDIS_TLS/ca.crt"
    echo "export BQ_REDIS_MTLS_URL=rediss://127.0.0.1:$REDIS_MTLS_PORT"
    echo "export BQ_REDIS_TLS_CLIENT_CERT=$REDIS_TLS/client.crt"
    echo "export BQ_REDIS_TLS_CLIENT_KEY=$REDIS_TLS/client.key"
    echo "export BQ_REDIS_TLS_FOREIGN_CERT=$REDIS_TLS/foreign/client.crt"
    echo "export BQ_REDIS_TLS_FOREIGN_KEY=$REDIS_TLS/foreign/client.key"
}
