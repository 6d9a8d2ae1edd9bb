# Amazon SQS, emulated by moto's server (moto[server] 5.1, installed in the python venv by
# 00-python.sh), on 127.0.0.1:5000. moto checks no signature; the test credentials are dummies.
BROKERS+=(sqs)
SQS_PORT=${BQ_SQS_PORT:-5000}
install_sqs() {
    # moto lives in the reference SDK's venv: make sure it is there (a no-op when it is).
    if [ ! -x "${BQ_VENV:-$BQ_CACHE/venv}/bin/moto_server" ]; then
        install_python
    fi
}
start_sqs() {
    mkdir -p "$BQ_BROKERS_DIR/sqs"
    # setsid + nohup: the server outlives this script; its pid is kept for stop_sqs.
    setsid nohup "${BQ_VENV:-$BQ_CACHE/venv}/bin/moto_server" -H 127.0.0.1 -p "$SQS_PORT" \
        >"$BQ_BROKERS_DIR/sqs/moto.log" 2>&1 </dev/null &
    echo $! >"$BQ_BROKERS_DIR/sqs/moto.pid"
}
ready_sqs() {
    # An SQS ListQueues call over the JSON protocol answers 200 once moto serves SQS (python,
    # not curl: a fresh machine is only promised Python).
    "${BQ_VENV:-$BQ_CACHE/venv}/bin/python" - "$SQS_PORT" <<'PY'
import sys, urllib.request
req = urllib.request.Request(
    "http://127.0.0.1:%s/" % sys.argv[1], data=b"{}", method="POST",
    headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues",
             "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sqs/aws4_request, "
                              "SignedHeaders=host, Signature=0"})
urllib.request.urlopen(req, timeout=2).read()
PY
}
stop_sqs() {
    local pidfile="$BQ_BROKERS_DIR/sqs/moto.pid"
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
}
env_sqs() {
    echo "export BQ_SQS_URL='sqs://us-east-1?endpoint=http://127.0.0.1:$SQS_PORT'"
    echo "export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"
}
