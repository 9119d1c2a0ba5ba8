#!/usr/bin/env bash
# A local three-region cluster on loopback: eu-west, us-east and ap-south,
# each a full node with its own data dir (data/cluster/<region>) and its own
# embedded NATS server, joined over memberlist (encrypted with a generated
# key) and NATS gateways. Ctrl-C stops all three.
#
#   ./scripts/cluster.sh            # pages on http://localhost:8081 … 8083
#   ./scripts/cluster.sh --tls      # every path encrypted: HTTPS on 8081 … 8083,
#                                   # HTTPS between nodes, NATS gateways over mutual TLS
#   ./scripts/cluster.sh [--tls] -- --require-session --trusted-proxies 127.0.0.1/32
#                                   # flags after -- go to every node
#
# --tls makes a throwaway CA and one certificate per node with openssl
# (data/cluster/tls; trust ca.pem in your browser or with SSL_CERT_FILE).
#
# One admin token for the three (data/cluster/admin-token), so the host view
# works against any region; the key, token and session secret go to the
# nodes as files, so none shows in ps. Logs: data/cluster/<region>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
base=data/cluster
mkdir -p "$base" bin
go build -o bin/node ./cmd/node

[ -s "$base/admin-token" ] || head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$base/admin-token"
[ -s "$base/gossip-key" ] || head -c 32 /dev/urandom | base64 > "$base/gossip-key"
[ -s "$base/session-secret" ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$base/session-secret"
chmod 600 "$base/admin-token" "$base/gossip-key" "$base/session-secret"

regions=(eu-west us-east ap-south)
scheme=http
tlsflags=()
curlca=()
extra=()
tlsmode=false
while [ $# -gt 0 ]; do
  case "$1" in
    --tls) tlsmode=true; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "cluster.sh: unknown argument $1 (want --tls, then -- and flags for every node)" >&2; exit 2 ;;
  esac
done
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
seeds="127.0.0.1:7947,127.0.0.1:7948,127.0.0.1:7949"
pids=()
stop() {
  trap - INT TERM EXIT
  echo; echo "stopping ${pids[*]}"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop INT TERM EXIT

for i in 0 1 2; do
  region=${regions[$i]}
  demo=false; [ "$i" = 0 ] && demo=true
  [ "$scheme" = https ] && tlsflags=(--tls-cert "$tls/$region.pem" --tls-key "$tls/$region-key.pem" --tls-ca "$tls/ca.pem")
  ./bin/node --region "$region" --node-name "$region-1" --data-dir "$base/$region" "${tlsflags[@]}" \
    --http-addr "127.0.0.1:$((8081 + i))" --admin-addr "127.0.0.1:$((9101 + i))" --gossip-addr "127.0.0.1:$((7947 + i))" --join "$seeds" \
    --gossip-key-file "$base/gossip-key" --gossip-profile lan --push-pull-interval 5s \
    --nats-addr "127.0.0.1:$((4223 + i))" --nats-cluster-addr "127.0.0.1:$((6223 + i))" \
    --nats-gateway-addr "127.0.0.1:$((7223 + i))" --admin-token-file "$base/admin-token" --session-secret-file "$base/session-secret" --demo="$demo" \
    "${extra[@]}" > "$base/$region.log" 2>&1 &
  pids+=($!)
done

for i in 0 1 2; do
  url="$scheme://127.0.0.1:$((8081 + i))"
  for _ in $(seq 1 100); do
    curl -fsS "${curlca[@]}" "$url/readyz" >/dev/null 2>&1 && break
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "${regions[$i]} exited:"; cat "$base/${regions[$i]}.log"; exit 1; }
    sleep 0.1
  done
done

echo "three regions up (admin token in $base/admin-token; secrets are passed by file, never on a command line)"
for i in 0 1 2; do
  echo "  ${regions[$i]}: $scheme://localhost:$((8081 + i))/#/poll/demo   (log: $base/${regions[$i]}.log)"
done
echo "  cluster view (members, NATS links): curl -s ${curlca[*]} $scheme://localhost:9101/v1/cluster   metrics: $scheme://localhost:9101/metrics"
[ "$scheme" = https ] && echo "  the tally CLI trusts the local CA with: export SSL_CERT_FILE=$tls/ca.pem"
echo "Ctrl-C stops the three nodes."
wait
