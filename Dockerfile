# Multi-stage build: a static rlserver binary on a minimal, non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version rlserver reports (--version, INFO server, the start line):
#   docker build --build-arg VERSION=$(git describe --tags --always) -t rlserver .
# (.dockerignore keeps .git out of the context, so it is read here, outside.)
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rlserver ./cmd/rlserver \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rlserver /usr/local/bin/rlserver
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
EXPOSE 6379
VOLUME /data
# Inside a container the server listens on all interfaces and the port
# mapping decides who reaches it, so protected mode is off here (as in
# Redis's official image). Set RL_REQUIREPASS for anything reachable
# beyond a trusted network.
ENV RL_ADDR=0.0.0.0:6379 RL_DIR=/data RL_PROTECTED_MODE=false RL_METRICS_ADDR=0.0.0.0:9121
# Prometheus metrics, the status page, /healthz and /readyz.
EXPOSE 9121
# PINGs the server on RL_ADDR (authenticating with RL_REQUIREPASS).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/usr/local/bin/rlserver", "--healthcheck"]
ENTRYPOINT ["/usr/local/bin/rlserver"]
