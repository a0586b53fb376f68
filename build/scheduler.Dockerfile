# muster-scheduler: a static binary on a distroless base, run as non-root.
#   docker build -f build/scheduler.Dockerfile -t muster-scheduler .
FROM golang:1.24 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG KUBE_VERSION=v1.34.4
ARG KUBE_MINOR=34
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/muster-dev/muster/pkg/version.Version=${VERSION} -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_MINOR}" \
      -o /out/muster-scheduler ./cmd/scheduler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/muster-scheduler /muster-scheduler
USER 65532:65532
ENTRYPOINT ["/muster-scheduler"]
