# PostgreSQL 15 from Debian bookworm, for compose.scale.yaml: no Docker Hub needed. Build it as the project's
# images are built (README, "Scale-out with compose"):
#   container/base-image && container/build -t coursebot-postgres -f deploy/scale/postgres.Dockerfile deploy/scale
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && mkdir -p -m 0700 /var/lib/postgresql/data \
 && chown postgres:postgres /var/lib/postgresql/data
COPY postgres-entrypoint /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
USER postgres
STOPSIGNAL SIGINT
EXPOSE 5432
HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=5 CMD pg_isready -h 127.0.0.1 -q
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
