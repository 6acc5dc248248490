#!/usr/bin/env bash
# Runs a real RabbitMQ broker (Debian's rabbitmq-server package, installed by
# scripts/install-deps) as the current user, for dlqctl's RabbitMQ tests,
# benchmarks and examples.
#
#   rabbitmq.sh start DATA_DIR   start a broker whose config, database, logs,
#                                Erlang cookie, PIDs and env file live in
#                                DATA_DIR; prints DATA_DIR/env
#                                (AMQP_URL=amqp://guest:guest@127.0.0.1:PORT/,
#                                ADMIN_URL=http://127.0.0.1:PORT, NODE=…)
#   rabbitmq.sh stop DATA_DIR    stop it by PID (TERM, then KILL after 30 s)
#
# Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user, so this
# runs /usr/lib/rabbitmq/bin/rabbitmq-server directly with RABBITMQ_*
# variables pointing into DATA_DIR, and its own epmd (the Erlang port mapper)
# on a free port, so that nothing is shared with another broker on the
# machine and stop leaves no process behind. start picks free loopback ports
# (AMQP, management, distribution, epmd) and records them in DATA_DIR/ports;
# a later start on the same DATA_DIR reuses them and the node's database,
# so a restarted broker has the same URL, queues and persistent messages.
#
# Environment: RABBITMQ_HOME_DIR (/usr/lib/rabbitmq), RABBITMQ_READY_TIMEOUT
# (120 s), RABBITMQ_MANAGEMENT (1, with the shovel plugin; 0 starts without
# the management plugin, which starts faster), RABBITMQ_WATCH_PID: when set, start leaves a watchdog
# that stops the broker once that process has exited.
set -euo pipefail

HOME_DIR=${RABBITMQ_HOME_DIR:-/usr/lib/rabbitmq}
READY_TIMEOUT=${RABBITMQ_READY_TIMEOUT:-120}
STOP_TIMEOUT=30
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "rabbitmq: $*" >&2; exit 1; }
usage() { echo "usage: $0 start DATA_DIR | stop DATA_DIR" >&2; exit 2; }

server_bin() {
  local s="$HOME_DIR/bin/rabbitmq-server"
  [ -x "$s" ] || die "$s not found: install Debian's rabbitmq-server (scripts/install-deps, or apt-get install rabbitmq-server)"
  echo "$s"
}

epmd_bin() {
  command -v epmd >/dev/null 2>&1 && { command -v epmd; return; }
  local e
  for e in /usr/lib/erlang/erts-*/bin/epmd; do [ -x "$e" ] && { echo "$e"; return; }; done
  die "epmd not found (it comes with erlang-base, a dependency of rabbitmq-server)"
}

# ports_in_use prints every local TCP port in use (any state), from /proc.
ports_in_use() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    awk 'NR > 1 { split($2, a, ":"); print a[2] }' "$f" | while read -r h; do echo $((16#$h)); done
  done
}

# listening PORT: some socket listens on PORT (state 0A).
listening() {
  local hex f
  hex=$(printf '%04X' "$1")
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    if awk -v h="$hex" 'NR > 1 { split($2, a, ":"); if (toupper(a[2]) == h && $4 == "0A") found = 1 } END { exit !found }' "$f"; then
      return 0
    fi
  done
  return 1
}

# pick_ports N prints N distinct free ports from 20000-59999 (below the
# usual ephemeral range, so that outgoing connections do not take them).
pick_ports() {
  local used p n=0 tries=0 picked=" "
  used=" $(ports_in_use | sort -un | tr '\n' ' ') "
  while [ $n -lt "$1" ]; do
    tries=$((tries + 1))
    [ $tries -lt 1000 ] || die "no free port found"
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    case "$used$picked" in *" $p "*) continue ;; esac
    picked="$picked$p "
    echo "$p"
    n=$((n + 1))
  done
}

read_pid() {
  [ -f "$1" ] || return 1
  local pid
  pid=$(cat "$1")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  echo "$pid"
}

# alive PID: the process exists and is not a zombie.
alive() {
  local st=""
  { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
  st=${st##*) }
  [ "${st:0:1}" != Z ]
}

# amqp_ready PORT: the broker answers the AMQP protocol header with
# connection.start (frame type 1), which it does only once it has booted.
amqp_ready() {
  local reply
  reply=$(timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf 'AMQP\x00\x00\x09\x01' >&3; head -c 1 <&3 | od -An -tu1" 2>/dev/null) || return 1
  [ "$(echo "$reply" | tr -d ' ')" = 1 ]
}

http_ready() {
  timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf 'GET /api/overview HTTP/1.0\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n' >&3; head -c 12 <&3" 2>/dev/null | grep -q ' 200'
}

cmd_start() {
  local data=$1 server epmd amqp mgmt dist epmdport pid node
  server=$(server_bin)
  epmd=$(epmd_bin)
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
  if pid=$(read_pid "$data/rabbitmq.pid") && alive "$pid"; then
    die "a broker (pid $pid) is already running for $data: stop it first"
  fi
  if [ -f "$data/ports" ]; then
    read -r amqp mgmt dist epmdport <"$data/ports"
    for p in $amqp $mgmt $dist $epmdport; do
      ! listening "$p" || die "port $p recorded in $data/ports is taken by another process"
    done
  else
    mapfile -t ports < <(pick_ports 4)
    amqp=${ports[0]} mgmt=${ports[1]} dist=${ports[2]} epmdport=${ports[3]}
    echo "$amqp $mgmt $dist $epmdport" >"$data/ports"
  fi
  node="dlqctl-$amqp@localhost"
  mkdir -p "$data/mnesia" "$data/log" "$data/home"
  {
    echo "listeners.tcp.1 = 127.0.0.1:$amqp"
    echo "loopback_users = none"
    echo "log.file.level = info"
    echo "log.console = false"
    # A test machine is often short of disk; the default 50 MB alarm would
    # block every publisher.
    echo "disk_free_limit.absolute = 1MB"
    if [ "${RABBITMQ_MANAGEMENT:-1}" = 1 ]; then
      echo "management.tcp.port = $mgmt"
      echo "management.tcp.ip = 127.0.0.1"
      # Counts for stats extras: refresh every second rather than every 5.
      echo "collect_statistics_interval = 1000"
    fi
  } >"$data/rabbitmq.conf"
  if [ "${RABBITMQ_MANAGEMENT:-1}" = 1 ]; then
    # The shovel feeds a stream DLQ on brokers that cannot dead-letter
    # into one (3.10); dlq init declares it through the management API.
    echo '[rabbitmq_management,rabbitmq_shovel].' >"$data/enabled_plugins"
  else
    echo '[].' >"$data/enabled_plugins"
  fi
  rm -f "$data/rabbitmq.pid" "$data/epmd.pid" "$data/env"
  (
    cd "$data"
    # Our own epmd on our own port, in the foreground of its own session,
    # so that stop can end it by PID (an epmd started by the node would
    # daemonize and outlive the broker).
    setsid "$epmd" -port "$epmdport" -address 127.0.0.1 </dev/null >>"$data/log/epmd.log" 2>&1 &
    echo $! >"$data/epmd.pid"
  )
  (
    cd "$data"
    export HOME="$data/home" ERL_EPMD_PORT=$epmdport
    export RABBITMQ_NODENAME="$node" RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$amqp RABBITMQ_DIST_PORT=$dist
    export RABBITMQ_MNESIA_BASE="$data/mnesia" RABBITMQ_LOG_BASE="$data/log"
    export RABBITMQ_CONFIG_FILE="$data/rabbitmq" RABBITMQ_ENABLED_PLUGINS_FILE="$data/enabled_plugins"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$data/advanced.config" RABBITMQ_CONF_ENV_FILE="$data/rabbitmq-env.conf"
    export RABBITMQ_PID_FILE="$data/mnesia/node.pid" RABBITMQ_SERVER_START_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    : >"$data/rabbitmq-env.conf"
    setsid "$server" </dev/null >>"$data/log/console.log" 2>&1 &
    echo $! >"$data/rabbitmq.pid"
  )
  pid=$(read_pid "$data/rabbitmq.pid") || die "could not record the broker's pid"
  if [ -n "${RABBITMQ_WATCH_PID:-}" ]; then
    [[ "$RABBITMQ_WATCH_PID" =~ ^[0-9]+$ ]] || die "RABBITMQ_WATCH_PID must be a pid"
    setsid bash "$HERE/$(basename "${BASH_SOURCE[0]}")" __watch "$data" "$RABBITMQ_WATCH_PID" </dev/null >/dev/null 2>&1 &
    echo $! >"$data/watchdog.pid"
  fi
  local deadline=$((SECONDS + READY_TIMEOUT))
  until amqp_ready "$amqp" && { [ "${RABBITMQ_MANAGEMENT:-1}" != 1 ] || http_ready "$mgmt"; }; do
    if ! alive "$pid"; then
      tail -n 30 "$data/log/console.log" >&2 || true
      tail -n 30 "$data/log/$node.log" >&2 2>/dev/null || true
      die "the broker exited during start-up (logs in $data/log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      cmd_stop "$data" || true
      die "the broker did not answer on port $amqp within ${READY_TIMEOUT}s (logs in $data/log)"
    fi
    sleep 0.5
  done
  {
    echo "AMQP_URL=amqp://guest:guest@127.0.0.1:$amqp/"
    if [ "${RABBITMQ_MANAGEMENT:-1}" = 1 ]; then echo "ADMIN_URL=http://127.0.0.1:$mgmt"; fi
    echo "NODE=$node"
    echo "PID=$pid"
  } >"$data/env.tmp"
  mv "$data/env.tmp" "$data/env"
  echo "$data/env"
}

# stop_pid FILE: TERM the process group the PID in FILE leads, then KILL.
stop_pid() {
  local pid
  pid=$(read_pid "$1") || return 0
  if alive "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if alive "$pid"; then
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$1"
}

cmd_stop() {
  local data=$1
  [ -d "$data" ] || return 0
  data=$(cd "$data" && pwd)
  local w
  if w=$(read_pid "$data/watchdog.pid") && alive "$w"; then kill "$w" 2>/dev/null || true; fi
  rm -f "$data/watchdog.pid"
  stop_pid "$data/rabbitmq.pid"
  stop_pid "$data/epmd.pid"
  rm -f "$data/env"
}

# __watch DATA_DIR PID: stop the broker once PID has exited.
cmd_watch() {
  local data=$1 watched=$2
  while alive "$watched"; do sleep 2; done
  rm -f "$data/watchdog.pid"
  cmd_stop "$data"
}

[ $# -ge 1 ] || usage
case "$1" in
  start) [ $# -eq 2 ] || usage; cmd_start "$2" ;;
  stop) [ $# -eq 2 ] || usage; cmd_stop "$2" ;;
  __watch) [ $# -eq 3 ] || usage; cmd_watch "$2" "$3" ;;
  *) usage ;;
esac
