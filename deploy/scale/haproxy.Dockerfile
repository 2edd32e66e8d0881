# HAProxy 2.6 from Debian bookworm with the scale-out configuration (haproxy.cfg beside this file), for
# compose.scale.yaml: no Docker Hub needed. Build it as the project's images are built:
#   container/base-image && container/build -t coursebot-haproxy -f deploy/scale/haproxy.Dockerfile deploy/scale
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
COPY haproxy.cfg /etc/haproxy/haproxy.cfg
USER haproxy
# -W: master-worker (a reload is a SIGUSR2); -db: stay in the foreground, logs to stderr.
STOPSIGNAL SIGUSR1
ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
