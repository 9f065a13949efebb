# One image with all four binaries; the compose file and the Kubernetes manifests pick
# the command.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
COPY testdata/skills /skills
USER nonroot
ENTRYPOINT ["/usr/local/bin/skillbus"]
