# Shared by the bench scripts that run one node and the tally tool:
# source it from the repository root. It makes $tmp (removed at exit,
# with every process whose pid is in $pids stopped), builds $tmp/node and
# $tmp/tally, and defines:
#
#   start_node PORT     a node on 127.0.0.1:PORT with no limits on votes,
#                       viewers per address or trust, data in $tmp/data;
#                       sets $node (its pid), $url and $auth (the admin
#                       token's header)
#   metric NAME         a series' value from the node's /metrics
#   wait_line FILE TEXT PID
#                       wait until FILE holds TEXT; if PID ends first,
#                       print FILE and fail
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/node" ./cmd/node
go build -o "$tmp/tally" ./cmd/tally

start_node() {
  url=http://127.0.0.1:$1
  "$tmp/node" --data-dir "$tmp/data" --http-addr "127.0.0.1:$1" --gossip-addr 127.0.0.1:0 --nats-addr 127.0.0.1:0 \
    --nats-cluster-addr '' --nats-gateway-addr '' --nats-leaf-addr '' --rate-ip 0 --rate-voter 0 --trust-floor 0 --pow-bits 0 --demo=false \
    --max-viewers-per-ip 100000 > "$tmp/node.log" 2>&1 &
  node=$!; pids+=($node)
  until curl -sf "$url/readyz" >/dev/null; do
    kill -0 "$node" 2>/dev/null || { cat "$tmp/node.log"; exit 1; }
    sleep 0.2
  done
  auth="Authorization: Bearer $(cat "$tmp/data/admin-token")"
}

metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

wait_line() {
  until grep -q "$2" "$1" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || { cat "$1"; exit 1; }
    sleep 0.2
  done
}
