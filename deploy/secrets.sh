#!/usr/bin/env bash
# Writes the cluster's secrets for docker-compose.multi.yml into ./secrets/
# (ignored by git and by the image build), once: an existing file is kept.
# Compose bind-mounts them at /run/secrets/ with the host's owner and mode,
# and the node runs as uid 65532 (distroless "nonroot"): run as root, the
# script gives them to that uid with mode 0400; otherwise it says how.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
mkdir -p secrets
make() { # name, command printing the secret
  if [ ! -s "secrets/$1" ]; then
    eval "$2" > "secrets/$1"
    echo "wrote secrets/$1"
  fi
}
make gossip_key     'head -c 32 /dev/urandom | base64'
make admin_token    'head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"'
make session_secret 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"'
if [ "$(id -u)" = 0 ]; then
  chown 65532:65532 secrets/gossip_key secrets/admin_token secrets/session_secret
  chmod 0400 secrets/gossip_key secrets/admin_token secrets/session_secret
  if [ -d secrets/tls ]; then # deploy/multi-host: this host's certificate
    chown -R 65532:65532 secrets/tls
    chmod 0400 secrets/tls/*
  fi
else
  echo "the node's container runs as uid 65532 and must read these files; run:"
  echo "  sudo chown 65532:65532 secrets/*  &&  sudo chmod 0400 secrets/*"
fi
echo "the admin token is in secrets/admin_token (for tally --token-file); nothing was printed"
