# One image with all four binaries; the compose file and the Kubernetes manifests pick
# the command. The runtime is distroless (no package manager, runs as nonroot) plus a
# static busybox for the few commands skills run through the exec tool (sh, wc, ...),
# such as the example skills; `skillbus` itself needs none of them.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git is not in the build context, so `skillbus version` shows the module version but
# no commit; binaries built with `make build` in a checkout show both.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM busybox:1.37-musl AS busybox
RUN mkdir /out && cp /bin/busybox /out/busybox && cd /out && \
    for a in sh cat cut echo env grep head ls sed sleep sort tail tr wc; do ln -s busybox "$a"; done

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=busybox /out/ /bin/
COPY --from=build /out/ /usr/local/bin/
COPY testdata/skills /skills
USER nonroot
ENTRYPOINT ["/usr/local/bin/skillbus"]
