#!/usr/bin/env bash
# Builds and runs a real nats-server with JetStream for dlqctl's NATS tests
# and examples.
#
#   nats.sh fetch            build nats-server from its Go module (through the
#                            Go module proxy, once) into the cache; prints the
#                            binary's path
#   nats.sh start DATA_DIR   start a server on a free loopback port with its
#                            JetStream store in DATA_DIR/jetstream; its PID,
#                            log and port go in DATA_DIR; prints
#                            DATA_DIR/env (NATS_URL=nats://127.0.0.1:PORT)
#   nats.sh stop DATA_DIR    stop it (TERM, then KILL after 10 s)
#
# A later start on the same DATA_DIR reuses its port and its store, so a
# restarted server has the same URL and the same streams.
#
# Environment: NATS_SERVER_VERSION (2.15.2), NATS_CACHE
# (~/.cache/dlqctl), NATS_READY_TIMEOUT (30 s).
set -euo pipefail

VERSION=${NATS_SERVER_VERSION:-2.15.2}
CACHE=${NATS_CACHE:-$HOME/.cache/dlqctl}
READY_TIMEOUT=${NATS_READY_TIMEOUT:-30}

die() { echo "nats: $*" >&2; exit 1; }
usage() { echo "usage: $0 fetch | start DATA_DIR | stop DATA_DIR" >&2; exit 2; }

bin_path() { echo "$CACHE/nats-server-$VERSION/nats-server"; }

cmd_fetch() {
  local bin
  bin=$(bin_path)
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  command -v go >/dev/null 2>&1 || die "go not found: building nats-server needs the Go toolchain"
  mkdir -p "$(dirname "$bin")"
  # Test packages may build at the same time: one at a time.
  exec 9>"$CACHE/nats-server-$VERSION.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -x "$bin" ]; then
    (cd "$CACHE" && GOBIN="$(dirname "$bin")" GOFLAGS=-buildvcs=false \
      go install "github.com/nats-io/nats-server/v2@v$VERSION") >&2 \
      || die "go install github.com/nats-io/nats-server/v2@v$VERSION failed"
  fi
  echo "$bin"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

cmd_start() {
  local dir=$1 bin port pid
  bin=$(cmd_fetch)
  mkdir -p "$dir/jetstream"
  if [ -f "$dir/port" ]; then port=$(cat "$dir/port"); else port=$(free_port); echo "$port" >"$dir/port"; fi
  "$bin" -a 127.0.0.1 -p "$port" -js -sd "$dir/jetstream" >>"$dir/nats.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/nats.pid"
  for _ in $(seq $((READY_TIMEOUT * 10))); do
    if grep -q "Server is ready" "$dir/nats.log" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "NATS_URL=nats://127.0.0.1:$port" >"$dir/env"
      echo "$dir/env"
      return
    fi
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/nats.log" >&2; die "nats-server exited"; }
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  die "nats-server not ready after ${READY_TIMEOUT}s"
}

cmd_stop() {
  local dir=$1 pid
  [ -f "$dir/nats.pid" ] || return 0
  pid=$(cat "$dir/nats.pid")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/nats.pid"
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) [ $# -eq 2 ] || usage; cmd_start "$2" ;;
  stop) [ $# -eq 2 ] || usage; cmd_stop "$2" ;;
  *) usage ;;
esac
