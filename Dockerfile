# Multi-stage build of a small static image with the node and the CLI.
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t tally .
#   docker run -p 127.0.0.1:8080:8080 -v tally-data:/data tally
# The build context leaves out .git (see .dockerignore), so the version
# comes from the VERSION build argument.
FROM golang:1.26-bookworm AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X tally/internal/buildinfo.stamped=${VERSION}" -o /out/tally-node ./cmd/node \
 && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X tally/internal/buildinfo.stamped=${VERSION}" -o /out/tally ./cmd/tally \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tally-node /out/tally /usr/local/bin/
COPY --from=build --chown=nonroot:nonroot /out/data /data
ENV TALLY_DATA_DIR=/data TALLY_HTTP_ADDR=:8080 TALLY_GOSSIP_ADDR=:7946
# HTTP (API, page, metrics), memberlist (TCP and UDP), embedded NATS
# (client, routes, gateways) when no TALLY_NATS_URL is given.
EXPOSE 8080 7946 7946/udp 4222 6222 7222 7422
VOLUME ["/data"]
# The image has no shell: the node checks itself (/readyz on loopback).
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 CMD ["/usr/local/bin/tally-node", "healthcheck"]
# SIGTERM drains (--drain) and then shuts down (--shutdown-timeout): give
# `docker stop` more than both, e.g. `docker stop -t 30`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tally-node"]
