# coursebot images, from one Dockerfile:
#   docker build -t coursebot .                       the bot with its embedded runner (the default target)
#   docker build -t coursebot-job --target job .      what the runner's Docker backend runs each job in:
#                                                     python, torch and the runner; no lessons, no bot
# How to run them, and every flag each container needs and why, is in the README ("Docker").
#
# Build arguments (the defaults are right for a host with internet):
#   PIP_EXTRA_INDEX_URL  where the CPU build of torch comes from (the default index would pull CUDA, GBs)
#   PIP_FIND_LINKS       a URL of local wheels, e.g. a loopback server with --network host (container/build)
#   PIP_CERT_URL         a CA bundle for pip to trust, for a build behind a TLS-intercepting proxy

# --- what every image runs on: Debian's python3.11, bubblewrap for the sandbox, an init -----------
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 bubblewrap tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1

# --- build stages: a venv with torch, then the bot's dependencies and the project beside it ------
FROM runtime AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_FIND_LINKS=
ARG PIP_CERT_URL=
COPY container/pip-install /usr/local/bin/pip-install
COPY pyproject.toml /src/pyproject.toml
# The venv ships without pip: a pip beside it (/opt/pip, build only) installs into it.
RUN python3 -m venv --without-pip /opt/venv \
 && python3 -m venv /opt/pip \
 && pip-install --group runner
# The bot's dependencies, then the project (bot and runner packages), under their own prefix:
# the sandbox binds the venv (torch) into every job, never this. Each package exists once.
RUN pip-install --prefix /app/python --group main --group docker
COPY README.md /src/README.md
COPY bot /src/bot
COPY runner /src/runner
RUN pip-install --prefix /app/python --project /src \
 && echo /app/python/lib/python3.11/site-packages > /app/coursebot.pth

# --- the job image for the runner's Docker backend: no lessons, no bot, no shell tools needed ------
FROM runtime AS job
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app/python/lib/python3.11/site-packages/runner /opt/venv/lib/python3.11/site-packages/runner
# The runner's Docker backend starts each job as its slot's own host uid (runner/docker_backend.py, uids.py) with a
# read-only root; nobody is only the default of a container started by hand. No VOLUME, so no volume leaks.
USER 65534:65534
WORKDIR /tmp

# --- the bot, with the runner embedded (the default target) ----------------------------------------
FROM runtime AS app
# First, as in the job image: the two images then share this layer (torch, 0.87 GB) on disk and in a registry.
COPY --from=build /opt/venv /opt/venv
# The completion card's fonts and layout library (bot/retention/completion_card.py); not in the job image.
# The card draws only Noto Sans: dpkg leaves the 53 MB of serif CJK faces out; the .debs go after install.
RUN echo 'path-exclude=/usr/share/fonts/opentype/noto/NotoSerifCJK-*' > /etc/dpkg/dpkg.cfg.d/coursebot-fonts \
 && apt-get update \
 && apt-get install -y --no-install-recommends libraqm0 fonts-noto-core fonts-noto-cjk \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
COPY --from=build /app/python /app/python
COPY --from=build /app/coursebot.pth /opt/venv/lib/python3.11/site-packages/coursebot.pth
COPY lessons /app/lessons
COPY locales /app/locales
# One unprivileged user owns the data and the runner's socket folder (compose shares it between
# the two containers; a new volume takes this owner and mode). It cannot write the code.
RUN groupadd --gid 10001 coursebot \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /data --shell /usr/sbin/nologin coursebot \
 && mkdir -m 0700 /data /run/coursebot && chown coursebot:coursebot /data /run/coursebot \
 && mkdir -m 0555 /run/sandbox-proc
COPY container/entrypoint /usr/local/bin/coursebot-entrypoint
COPY container/data-folder /usr/local/bin/coursebot-data-folder
COPY container/healthcheck /usr/local/bin/coursebot-healthcheck
ENV PATH=/app/python/bin:/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    COURSEBOT_DB=/data/coursebot.sqlite3 \
    COURSEBOT_LESSONS=/app/lessons \
    COURSEBOT_LOCALES=/app/locales \
    COURSEBOT_MONITORING=0.0.0.0:9464 \
    COURSEBOT_WEB_HOST=0.0.0.0
USER coursebot
WORKDIR /data
# No VOLUME: the data lives where the operator mounts it (-v coursebot-data:/data, compose's volume), and a
# container that needs none (compose's runner) leaves no anonymous volume behind.
# Prepares the sandbox when started as root, drops to a non-root user with no capabilities, and
# makes tini pid 1 (container/entrypoint). The bot closes the database and stops its runner on
# SIGTERM, well within docker stop's 10 s.
ENTRYPOINT ["/usr/local/bin/coursebot-entrypoint"]
STOPSIGNAL SIGTERM
# Each role its own check (container/healthcheck): the bot's /healthz (the database takes a write, the runner
# answers, the Bot API answered lately), a runner's ping, the web chat's page.
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=15s --start-period=180s --retries=3 \
  CMD ["/usr/local/bin/coursebot-healthcheck"]
# On Telegram only: without a token it stops with one line. The web chat runs when asked for (coursebot web).
CMD ["coursebot", "run", "--telegram"]
