# One image with the bot, the runner and bubblewrap. Run it with a token and a volume:
#   docker run -e TELEGRAM_BOT_TOKEN=... -v coursebot-data:/data coursebot
FROM python:3.11-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY runner ./runner
# The CPU build of torch: the default index would pull a CUDA build of several GB.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu '.[runner]'
COPY lessons ./lessons
COPY locales ./locales

RUN useradd --create-home --uid 10001 coursebot && mkdir /data && chown coursebot /data
USER coursebot
ENV COURSEBOT_DB=/data/coursebot.sqlite3 \
    COURSEBOT_LESSONS=/app/lessons \
    COURSEBOT_LOCALES=/app/locales \
    PYTHONUNBUFFERED=1
VOLUME /data
# coursebot refuses bad content and config with one clear line; SIGTERM closes the database cleanly.
STOPSIGNAL SIGTERM
CMD ["coursebot", "run"]
