# Modeled on: opendatacube/datacube-wps:Dockerfile (commit 6168b2728d48ff55550d930e4525d2da102668cf)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: syntax-directive-comment, arg-before-from, arg-used-only-after-redeclare, multi-stage-named, unnamed-final-stage, env-multi-pair, comments-inside-continuation, add-url, add-url-from-arg, add-checksum, add-chown, add-chmod, add-link, copy-link, run-mount-cache, mount-cache-id, copy-from-stage, copy-chown, copy-from-stage-glob, add-local-dir, entrypoint-exec, cmd-shell, user-before-cmd, line-continuation
# syntax=docker/dockerfile:1
ARG py_env_path=/env
FROM ghcr.io/osgeo/gdal:ubuntu-small-3.8.5@sha256:8c94d0d37afea0c4ed706d87e708cfba00dd3eefc03f563dbd874a5223073904 AS builder

ARG UV=https://github.com/astral-sh/uv/releases/download/0.6.6/uv-x86_64-unknown-linux-gnu.tar.gz

ENV LC_ALL=C.UTF-8 \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=0 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=python3.10 \
    UV_PROJECT_ENVIRONMENT=/app

RUN export DEBIAN_FRONTEND=noninteractive && \
    apt-get update -y && \
    apt-get install -y --no-install-recommends \
      build-essential \
      libffi-dev \
      # geometry headers, for building shapely from source
      libgeos-dev \
      # PostgreSQL client headers
      libpq-dev \
      python3-dev \
      unzip

ARG py_env_path

WORKDIR /build

# (the checksum below is invented for this test corpus, not the real one)
ADD --checksum=sha256:47929fd243b5b47a775fd92c50d60bc2d8c00c7b1d7d87cdbbab3629e5d49bcf --chown=root:root --chmod=644 --link $UV uv.tar.gz

RUN tar xf uv.tar.gz -C /usr/local/bin --strip-components=1 --no-same-owner

COPY --link pyproject.toml uv.lock /build/

# a cache id of its own, apart from other package managers' caches
RUN --mount=type=cache,id=opendatacube-uv-cache,target=/root/.cache \
    uv sync --locked --no-install-project \
      --no-binary-package fiona \
      --no-binary-package rasterio \
      --no-binary-package shapely

ENV PATH=${py_env_path}/bin:$PATH

FROM ghcr.io/osgeo/gdal:ubuntu-small-3.8.5@sha256:8c94d0d37afea0c4ed706d87e708cfba00dd3eefc03f563dbd874a5223073904

RUN mkdir -p /code/logs
WORKDIR /code

COPY docker/wps-entrypoint.sh /usr/local/bin/wps-entrypoint.sh

ENV LC_ALL=C.UTF-8 \
    LANG=C.UTF-8 \
    PATH=/app/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

RUN export DEBIAN_FRONTEND=noninteractive && \
    apt-get update -y && \
    apt-get upgrade -y && \
    apt-get install -y --no-install-recommends \
      curl \
      libpq5 \
      tini \
      git \
    && rm -rf /var/lib/apt/lists/*

# node and vega-lite, to render charts as SVG
RUN curl -LsS https://raw.githubusercontent.com/tj/n/master/bin/n -o n \
    && bash n lts \
    && rm n \
    && npm install --engine-strict vega-lite vega-cli canvas

RUN useradd -m -s /bin/bash -N -g 100 -u 1001 wps

ARG py_env_path
# numeric owner: some builders reject a name together with --link
COPY --from=builder --link --chown=1000:1000 /app /app
COPY --from=builder --link /build/*.txt /conf/
COPY --from=builder --link /usr/local/bin/uv /usr/local/bin/uv
COPY --from=builder --link /usr/local/bin/uvx /usr/local/bin/uvx

# /usr/local/bin first, so overrides placed there win
ENV PATH=/usr/local/bin:/app/bin:${py_env_path}/bin:$PATH

ADD . /code
WORKDIR /code
RUN uv pip install -r requirements.txt

RUN chmod 666 /code/pywps.cfg \
    && chmod 666 /code/datacube-wps-config.yaml \
    && chown wps:users /code/logs \
    && chown wps:users /code

ENTRYPOINT ["wps-entrypoint.sh"]

USER wps
CMD gunicorn -b 0.0.0.0:8000 datacube_wps:app
