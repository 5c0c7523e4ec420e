# cairn in a container: `docker build -t cairn .`, then
#   docker run -d --name cairn -v cairn-data:/data -p 127.0.0.1:42700:42700 \
#     -e OPENAI_API_KEY cairn
# First set-up inside the volume: docker run --rm -it -v cairn-data:/data cairn init
# (README, "Docker"). The gateway listens on every interface of the
# container so the published port reaches it; publish it on 127.0.0.1 only.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p cairn \
    && strip target/release/cairn \
    && install -m 0755 target/release/cairn /usr/local/bin/cairn

FROM debian:bookworm-slim
# curl only for the health check; ca-certificates for HTTPS to LLM APIs and channels.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin cairn \
    && install -d -m 0700 -o cairn -g cairn /data
COPY --from=build /usr/local/bin/cairn /usr/local/bin/cairn

ENV CAIRN_HOME=/data \
    CAIRN_GATEWAY_HOST=0.0.0.0 \
    CAIRN_GATEWAY_ALLOW_PUBLIC_BIND=true
VOLUME ["/data"]
USER 10001:10001
WORKDIR /data
EXPOSE 42700
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["curl", "--fail", "--silent", "--show-error", "--max-time", "4", "http://127.0.0.1:42700/healthz"]
ENTRYPOINT ["/usr/local/bin/cairn"]
CMD ["daemon"]
