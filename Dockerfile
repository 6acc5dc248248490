# The dlqctl container image, built by goreleaser (dockers_v2) for
# linux/amd64 and linux/arm64 from the release binary, which it places at
# $TARGETPLATFORM/dlqctl in the build context. distroless/static holds CA
# certificates and time zones and nothing else: no shell, no package
# manager. It runs as the non-root user 65532, whose home is the working
# folder; mount a volume for plans and journals (docs/install.md).
FROM gcr.io/distroless/static-debian12:nonroot
ARG TARGETPLATFORM
COPY $TARGETPLATFORM/dlqctl /usr/bin/dlqctl
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/usr/bin/dlqctl"]
