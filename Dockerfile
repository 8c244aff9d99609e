# The xwait worker and CLI, installed from a wheel.  Used by docker-compose.yml.
#
# Stage 1 builds wheels of every dependency at the versions of requirements.lock
# (hashes checked) and of xwait; stage 2 installs them without a compiler,
# without network and without the source tree, so the image runs exactly what
# `pip install xwait-*.whl` gives a user, with the locked versions (the schemas
# and example topology are package data inside the wheel).
#
# xwait's own wheel carries the native record path (native/, Rust): stage 1 gets a
# Rust toolchain (rustup's minimal profile, the version the project builds with)
# for it; the image itself holds only the built wheel.
FROM python:3.11-slim AS build
ARG RUST_VERSION=1.95.0
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates gcc libc6-dev \
 && curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
    | sh -s -- -y --profile minimal --default-toolchain $RUST_VERSION
ENV PATH=/root/.cargo/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY streams ./streams
COPY native ./native
RUN pip wheel --no-cache-dir --wheel-dir /wheels -r requirements.lock \
 && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# An unprivileged user owns the RocksDB folder; nothing runs as root.
RUN useradd --create-home --uid 10001 xwait && install -d -o xwait -g xwait /data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels xwait && rm -rf /wheels
USER xwait
WORKDIR /home/xwait
ENV XWAIT_DATA_DIR=/data \
    XWAIT_WEB_HOST=0.0.0.0
EXPOSE 6066
# Healthy while /healthz answers 200: the web server is up and the worker's
# event loop turns (it says 503 after the loop was held 30 s, and a loop that
# hangs does not answer at all).
HEALTHCHECK --interval=10s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('XWAIT_WEB_PORT', '6066') + '/healthz', timeout=4)"]
CMD ["xwait", "worker"]
