#!/usr/bin/env bash
# A local three-region cluster on loopback: eu-west, us-east and ap-south,
# each a full node with its own data dir (data/cluster/<region>) and its own
# embedded NATS server, joined over memberlist (encrypted with a generated
# key) and NATS gateways. Ctrl-C stops all three.
#
#   ./scripts/cluster.sh            # pages on http://localhost:8081 … 8083
#   ./scripts/cluster.sh --tls      # every path encrypted: HTTPS on 8081 … 8083,
#                                   # HTTPS between nodes, NATS gateways over mutual TLS
#   ./scripts/cluster.sh --port-base 18081   # another cluster beside it: HTTP 18081 … 18083,
#                                   # data in data/cluster-18081
#   ./scripts/cluster.sh [--tls] -- --require-session --trusted-proxies 127.0.0.1/32
#                                   # flags after -- go to every node
#   ./scripts/cluster.sh --edges 2  # and two edges per region (--role edge) that take
#                                   # votes and relay them to the region's full node:
#                                   # HTTP on P+10+3i+j for region i, edge j (8091 … 8099)
#   ./scripts/cluster.sh stop us-east      # while it runs (another shell): stop one region
#   ./scripts/cluster.sh restart us-east   # … and start it again, with the same flags
#
# Ports, from the base P (8081): HTTP P+i, admin P+1020+i, gossip P-134+i,
# NATS client P-3858+i, routes P-1858+i, gateways P-858+i, leaf nodes
# P-2858+i, for region i = 0, 1, 2 (P from 3900 to 64000). Edge j of
# region i takes HTTP, gossip and NATS client at the same offsets from
# P+10+3i+j, and its metrics and /v1/cluster on the admin port at the same
# offset (P+1030+3i+j: off the public port, which would show a hidden
# poll's ballot counts in /metrics); no route, gateway or leaf port: an
# edge is a leaf of its region's full nodes.
#
# --tls makes a throwaway CA and one certificate per node with openssl
# (data/cluster/tls; trust ca.pem in your browser or with SSL_CERT_FILE).
#
# One admin token for the three (data/cluster/admin-token), so the host view
# works against any region; the key, token and session secret go to the
# nodes as files, so none shows in ps. Logs: data/cluster/<region>.log; each
# node's pid and command line: <region>.pid and <region>.cmd beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
regions=(eu-west us-east ap-south)
port=8081
action=start
region_arg=
scheme=http
tlsflags=()
curlca=()
extra=()
tlsmode=false
edges=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tls) tlsmode=true; shift ;;
    --port-base)
      [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "$2" -ge 3900 ] && [ "$2" -le 64000 ] || { echo "cluster.sh: --port-base wants a port from 3900 to 64000, not '${2:-}'" >&2; exit 2; }
      port=$2; shift 2 ;;
    --edges)
      [[ "${2:-}" =~ ^[0-3]$ ]] || { echo "cluster.sh: --edges wants 0 to 3 edges per region, not '${2:-}'" >&2; exit 2; }
      edges=$2; shift 2 ;;
    stop|restart)
      action=$1; region_arg=${2:-}
      [[ " ${regions[*]} " == *" $region_arg "* ]] || { echo "cluster.sh: $1 wants a region: ${regions[*]}" >&2; exit 2; }
      shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown argument $1 (want --tls, --port-base P, --edges N, stop REGION, restart REGION, then -- and flags for every node; --help)" >&2; exit 2 ;;
  esac
done
base=data/cluster
[ "$port" = 8081 ] || base=data/cluster-$port

# ready URL: wait until the node answers /readyz (it may be replaying its
# ledger or catching up with the others' votes); false after 30 s.
ready() {
  for _ in $(seq 1 300); do
    curl -fsS "${curlca[@]}" "$1/readyz" 2>/dev/null | grep -q '"ready"' && return 0
    [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}

stop_region() {
  local pidfile=$base/$1.pid
  [ -s "$pidfile" ] || { echo "cluster.sh: $1 is not running ($pidfile missing)" >&2; return 1; }
  local pid; pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
  echo "$1 stopped (pid $pid)"
}

if [ "$action" != start ]; then
  if [ "$action" = stop ] || [ -s "$base/$region_arg.pid" ]; then
    stop_region "$region_arg" || exit 1
  fi
  if [ "$action" = restart ]; then
    [ -s "$base/$region_arg.cmd" ] || { echo "cluster.sh: no $base/$region_arg.cmd: start the cluster first" >&2; exit 1; }
    [ -s "$base/tls/ca.pem" ] && grep -q -- --tls-cert "$base/$region_arg.cmd" && curlca=(--cacert "$base/tls/ca.pem")
    mapfile -d '' cmd < "$base/$region_arg.cmd"
    nohup "${cmd[@]}" >> "$base/$region_arg.log" 2>&1 &
    echo $! > "$base/$region_arg.pid"
    url=$(grep -q -- --tls-cert "$base/$region_arg.cmd" && echo https || echo http)://127.0.0.1:$(tr '\0' '\n' < "$base/$region_arg.cmd" | grep -A1 -x -- --http-addr | tail -1 | cut -d: -f2)
    if ready "$url" "$!"; then
      echo "$region_arg restarted (pid $!) and ready at $url"
    else
      echo "$region_arg restarted (pid $!) but not ready within 30 s: see $base/$region_arg.log" >&2; exit 1
    fi
  fi
  exit 0
fi

mkdir -p "$base" bin
go build -ldflags "-X tally/internal/buildinfo.stamped=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/tally-node ./cmd/node

[ -s "$base/admin-token" ] || head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$base/admin-token"
[ -s "$base/gossip-key" ] || head -c 32 /dev/urandom | base64 > "$base/gossip-key"
[ -s "$base/session-secret" ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$base/session-secret"
chmod 600 "$base/admin-token" "$base/gossip-key" "$base/session-secret"

if $tlsmode; then
  scheme=https
  tls=$base/tls
  mkdir -p "$tls"
  if [ ! -s "$tls/ca.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=tally local CA" \
      -keyout "$tls/ca-key.pem" -out "$tls/ca.pem" 2>/dev/null
  fi
  for region in "${regions[@]}"; do
    [ -s "$tls/$region.pem" ] && continue
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$region-1" \
      -keyout "$tls/$region-key.pem" -out "$tls/$region.csr" 2>/dev/null
    openssl x509 -req -in "$tls/$region.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca-key.pem" -CAcreateserial -days 30 \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n') \
      -out "$tls/$region.pem" 2>/dev/null
    rm -f "$tls/$region.csr"
  done
  chmod 600 "$tls"/*-key.pem
  curlca=(--cacert "$tls/ca.pem")
fi
seeds="127.0.0.1:$((port - 134)),127.0.0.1:$((port - 133)),127.0.0.1:$((port - 132))"
stop() {
  trap - INT TERM EXIT
  echo
  # All at once: each drains (--drain, 5 s) before it stops.
  for region in "${regions[@]}"; do stop_region "$region" 2>/dev/null & done
  for ((j = 0; j < edges; j++)); do
    for region in "${regions[@]}"; do stop_region "$region-edge-$j" 2>/dev/null & done
  done
  wait
  exit 0
}
trap stop INT TERM EXIT

for i in 0 1 2; do
  region=${regions[$i]}
  demo=false; [ "$i" = 0 ] && demo=true
  [ "$scheme" = https ] && tlsflags=(--tls-cert "$tls/$region.pem" --tls-key "$tls/$region-key.pem" --tls-ca "$tls/ca.pem")
  cmd=(./bin/tally-node --region "$region" --node-name "$region-1" --data-dir "$base/$region" "${tlsflags[@]}"
    --http-addr "127.0.0.1:$((port + i))" --admin-addr "127.0.0.1:$((port + 1020 + i))" --gossip-addr "127.0.0.1:$((port - 134 + i))" --join "$seeds"
    --gossip-key-file "$base/gossip-key" --gossip-profile lan --push-pull-interval 5s --expect-full-nodes 3
    --nats-addr "127.0.0.1:$((port - 3858 + i))" --nats-cluster-addr "127.0.0.1:$((port - 1858 + i))"
    --nats-gateway-addr "127.0.0.1:$((port - 858 + i))" --nats-leaf-addr "127.0.0.1:$((port - 2858 + i))" --admin-token-file "$base/admin-token" --session-secret-file "$base/session-secret" --demo="$demo"
    "${extra[@]}")
  printf '%s\0' "${cmd[@]}" > "$base/$region.cmd"
  "${cmd[@]}" > "$base/$region.log" 2>&1 &
  echo $! > "$base/$region.pid"
done

# Edges: they join the full nodes, serve viewers and relay votes. Each
# one's embedded NATS is a leaf of its region's full nodes: it opens no
# route, gateway or leaf port.
for ((j = 0; j < edges; j++)); do
  for i in 0 1 2; do
    region=${regions[$i]} k=$((10 + 3 * i + j)) name=${regions[$i]}-edge-$j
    [ "$scheme" = https ] && tlsflags=(--tls-cert "$tls/$region.pem" --tls-key "$tls/$region-key.pem" --tls-ca "$tls/ca.pem")
    cmd=(./bin/tally-node --role edge --region "$region" --node-name "$name" --data-dir "$base/$name" "${tlsflags[@]}"
      --http-addr "127.0.0.1:$((port + k))" --admin-addr "127.0.0.1:$((port + 1020 + k))" --gossip-addr "127.0.0.1:$((port - 134 + k))" --join "$seeds"
      --gossip-key-file "$base/gossip-key" --gossip-profile lan --push-pull-interval 5s --expect-full-nodes 3
      --nats-addr "127.0.0.1:$((port - 3858 + k))" --demo=false "${extra[@]}")
    printf '%s\0' "${cmd[@]}" > "$base/$name.cmd"
    "${cmd[@]}" > "$base/$name.log" 2>&1 &
    echo $! > "$base/$name.pid"
  done
done

for i in 0 1 2; do
  url="$scheme://127.0.0.1:$((port + i))"
  if ! ready "$url" "$(cat "$base/${regions[$i]}.pid")"; then
    echo "${regions[$i]} is not ready within 30 s ($url/readyz); its log:"; tail -20 "$base/${regions[$i]}.log"; exit 1
  fi
done

for ((j = 0; j < edges; j++)); do
  for i in 0 1 2; do
    name=${regions[$i]}-edge-$j url="$scheme://127.0.0.1:$((port + 10 + 3 * i + j))"
    if ! ready "$url" "$(cat "$base/$name.pid")"; then
      echo "$name is not ready within 30 s ($url/readyz); its log:"; tail -20 "$base/$name.log"; exit 1
    fi
    echo "  edge $name: $url/#/poll/demo (log: $base/$name.log)"
  done
done

echo "three regions up and ready (admin token in $base/admin-token; secrets are passed by file, never on a command line)"
for i in 0 1 2; do
  echo "  ${regions[$i]}: $scheme://localhost:$((port + i))/#/poll/demo   (log: $base/${regions[$i]}.log)"
done
echo "  cluster view (members, NATS links): curl -s${curlca[*]:+ ${curlca[*]}} $scheme://localhost:$((port + 1020))/v1/cluster   metrics: $scheme://localhost:$((port + 1020))/metrics"
[ "$scheme" = https ] && echo "  the tally CLI trusts the local CA with: export SSL_CERT_FILE=$tls/ca.pem"
echo "Ctrl-C stops the three nodes; ./scripts/cluster.sh $([ "$port" = 8081 ] || echo "--port-base $port ")stop|restart REGION, from another shell, one."
while :; do sleep 1; done # the nodes may be restarted by another shell: they are not all this shell's children
