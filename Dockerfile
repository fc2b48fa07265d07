# agentgate container image: a static binary on an empty base.
#
#   docker build -t agentgate --build-arg VERSION=v1.2.3 .
#   docker run -p 127.0.0.1:8080:8080 -e AGENTGATE_API_KEYS=$(openssl rand -hex 24) \
#     -v agentgate-data:/data agentgate
#
# The image listens on 0.0.0.0:8080, and `serve` refuses a non-loopback
# address without API keys: set AGENTGATE_API_KEYS (comma-separated, each at
# least 16 characters) or give a config file (AGENTGATE_CONFIG) with
# server.api_keys. Without AGENTGATE_DATABASE_URL the data (SQLite store and
# blobs/) lives in the /data volume: one gateway per volume. See the README's
# Settings for every variable, and deploy/README.md.
#
# Dockerfile.local packages a binary built on the host instead, for machines
# without this Go image.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO_ENABLED=0: a static binary (modernc.org/sqlite needs no cgo) that runs
# on scratch. Time zones are embedded (time/tzdata), so none are copied.
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/agentgate ./cmd/agentgate \
 && /out/agentgate version
# The final stage's files, with their owners and modes: the non-root user
# (uid/gid 65532, the usual "nonroot" id), the CA bundle for TLS to model
# providers, Slack, Discord and Telegram, a writable /tmp (SQLite's temporary
# files) and the data directory. scratch has no shell to make them.
RUN mkdir -p /out/rootfs/etc/ssl/certs /out/rootfs/tmp /out/rootfs/data \
 && echo 'agentgate:x:65532:65532:agentgate:/data:/sbin/nologin' > /out/rootfs/etc/passwd \
 && echo 'agentgate:x:65532:' > /out/rootfs/etc/group \
 && cp /etc/ssl/certs/ca-certificates.crt /out/rootfs/etc/ssl/certs/ \
 && mv /out/agentgate /out/rootfs/agentgate \
 && chmod 1777 /out/rootfs/tmp \
 && chown 65532:65532 /out/rootfs/data && chmod 0700 /out/rootfs/data

FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="agentgate" \
      org.opencontainers.image.description="A durable gateway between AI agents and the chat tools teams use, with human approvals" \
      org.opencontainers.image.version="${VERSION}"
# COPY --from keeps the owners and modes of what is under rootfs/.
COPY --from=build /out/rootfs/ /
USER 65532:65532
ENV AGENTGATE_DATA_DIR=/data \
    AGENTGATE_ADDR=0.0.0.0:8080
VOLUME ["/data"]
EXPOSE 8080
# `agentgate health` asks GET /readyz (the store answers; no key needed) on
# the listen address. Orchestrators may probe /healthz and /readyz directly.
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=3 CMD ["/agentgate", "health"]
# SIGTERM (docker stop's default) stops taking work, lets in-flight steps
# finish for 10 seconds and hands the rest back to the queue.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/agentgate"]
CMD ["serve"]
