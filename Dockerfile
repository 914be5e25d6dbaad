# syntax=docker/dockerfile:1
#
# The Switchyard gateway as a small non-root image:
#
#   docker build -t switchyard:0.1.0 .
#   docker run --rm -p 8080:8080 switchyard:0.1.0          # the embedded default config
#   docker run --rm -p 8080:8080 -v "$PWD/my.yaml:/etc/switchyard/config.yaml:ro" \
#     switchyard:0.1.0 serve --config /etc/switchyard/config.yaml --listen 0.0.0.0:8080
#
# The release profile is fat LTO with one codegen unit: expect several minutes
# of build on a small machine. Needs BuildKit (the default builder since
# Docker 23) for the cache mounts. charts/switchyard deploys this image.

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY . .
# Cache mounts keep the crates.io downloads and the target directory between
# builds; the binary is copied out of the cached target dir in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release -p switchyard --locked \
    && install -D -m 0755 target/release/switchyard /out/usr/local/bin/switchyard \
    && mkdir -p /out/var/lib/switchyard

# glibc and libgcc_s (all the binary links besides the kernel) and CA
# certificates; no shell, no package manager.
FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="switchyard" \
      org.opencontainers.image.description="Multi-model LLM routing gateway" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/usr/local/bin/switchyard /usr/local/bin/switchyard
# The working directory holds the ledger (switchyard-ledger.db unless
# ledger.path says otherwise), so it belongs to the user the gateway runs as.
COPY --from=builder --chown=10001:10001 /out/var/lib/switchyard /var/lib/switchyard
USER 10001:10001
WORKDIR /var/lib/switchyard
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
