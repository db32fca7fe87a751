# syntax=docker/dockerfile:1.7
# The gateway image: a static binary on distroless, non-root (uid 65532).
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#                --build-arg COMMIT=$(git rev-parse HEAD) -t gateway .
#   docker run --rm -p 8080:8080 gateway            # the shipped demo config (mock upstream)
# Kubernetes: charts/gateway (docs/deploy.md) mounts its own config over /etc/gateway.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=""
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/gateway ./cmd/gateway
# /healthcheck URL: exit 0 on HTTP 200. Exec probe for sidecar mode, where the
# gateway listens on loopback and the kubelet cannot reach it (distroless has
# no curl). Kept here, not in the module, so the gateway's code is unchanged.
COPY <<'GO' /tmp/healthcheck/main.go
package main

import (
	"crypto/tls"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		os.Stderr.WriteString("usage: healthcheck URL\n")
		os.Exit(2)
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// Loopback only; the gateway's own certificate need not name 127.0.0.1.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	r, err := c.Get(os.Args[1])
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		os.Stderr.WriteString(r.Status + "\n")
		os.Exit(1)
	}
}
GO
RUN cd /tmp/healthcheck && GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/healthcheck main.go
# Defaults for a plain `docker run`: the shipped config and policies, and a
# writable audit directory owned by the non-root user.
RUN mkdir -p /out/app/data/audit && cp -r config /out/app/config && cp -r rego /out/app/rego \
    && rm -f /out/app/rego/*.go

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="gateway" \
      org.opencontainers.image.description="Governance gateway for LLM agent traffic" \
      org.opencontainers.image.source="https://github.com/sacpgw/gateway"
COPY --from=build /out/gateway /gateway
COPY --from=build /out/healthcheck /healthcheck
COPY --from=build --chown=65532:65532 /out/app /app
WORKDIR /app
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/gateway"]
CMD ["serve", "--config", "/app/config"]
