# Modeled on: jupyterhub/jupyterhub:Dockerfile (commit 00777568d0f0a5328360aa91bf52a0b352bffcc4)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, from-platform, from-platform-default-value, multi-stage-named, workdir-relative-copy, run-mount-cache, mount-target-from-arg, run-mount-cache-from-stage, copy-from-stage-glob, expose, label, comments-inside-continuation, cmd-exec, line-continuation, comments
# A base image for running JupyterHub; put the site configuration in a
# derived image or mount it at /srv/jupyterhub.
#
#   docker run -v $PWD:/srv/jupyterhub -t <image>
#
######################################################################
# Multi-stage: the pure-Python hub wheel is built once, natively on the
# build host; other wheels and the final image follow the target platform.

ARG BASE_IMAGE=ubuntu:22.04@sha256:cb287cf26b15fded26828219b268886d76ea3963bc93495425dcf08225c86e9f


######################################################################
# the hub wheel, on the build platform (no emulation)
FROM --platform=${BUILDPLATFORM:-linux/amd64} $BASE_IMAGE AS jupyterhub-builder

ENV DEBIAN_FRONTEND=noninteractive

# separate RUN lines and no apt clean-up, so later stages can share layers

RUN apt-get update -qq \
 && apt-get install -yqq --no-install-recommends \
    build-essential \
    ca-certificates \
    curl \
    locales \
    python3-dev \
    python3-pip \
    python3-venv \
 && python3 -m pip install --no-cache-dir --upgrade setuptools pip build wheel
# the distribution's Node is too old to build the JS assets
RUN curl -fsSL https://deb.nodesource.com/setup_18.x | bash - \
 && apt-get install -yqq --no-install-recommends \
    nodejs \
 && npm install --global yarn

WORKDIR /src/jupyterhub
# the whole build context, minus .dockerignore
COPY . .

ARG PIP_CACHE_DIR=/tmp/pip-cache
RUN --mount=type=cache,target=${PIP_CACHE_DIR} \
    python3 -m build --wheel

# check what the wheel installs
RUN --mount=type=cache,target=${PIP_CACHE_DIR} \
    python3 -m pip install ./dist/*.whl \
 && cd ci \
 && python3 check_installed_data.py

######################################################################
# the remaining wheels, some of them platform specific
FROM $BASE_IMAGE AS wheel-builder

ENV DEBIAN_FRONTEND=noninteractive

RUN apt-get update -qq \
 && apt-get install -yqq --no-install-recommends \
    build-essential \
    ca-certificates \
    curl \
    locales \
    python3-dev \
    python3-pip \
    python3-venv \
 && python3 -m pip install --no-cache-dir --upgrade setuptools pip build wheel

WORKDIR /src/jupyterhub

COPY --from=jupyterhub-builder /src/jupyterhub/dist/*.whl /src/jupyterhub/dist/
ARG PIP_CACHE_DIR=/tmp/pip-cache
RUN --mount=type=cache,target=${PIP_CACHE_DIR} \
    python3 -m pip wheel --wheel-dir wheelhouse dist/*.whl


######################################################################
# the final image, for the target platform
FROM $BASE_IMAGE AS jupyterhub

ENV DEBIAN_FRONTEND=noninteractive \
    SHELL=/bin/bash \
    LC_ALL=en_US.UTF-8 \
    LANG=en_US.UTF-8 \
    LANGUAGE=en_US.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1

EXPOSE 8000

LABEL maintainer="Jupyter Project <jupyter@googlegroups.com>"
LABEL org.jupyter.service="jupyterhub"

WORKDIR /srv/jupyterhub

RUN apt-get update -qq \
 && apt-get install -yqq --no-install-recommends \
    ca-certificates \
    curl \
    locales \
    python-is-python3 \
    python3-pip \
    nodejs \
    npm \
 && locale-gen $LC_ALL \
 && npm install -g configurable-http-proxy@^4.2.0 \
 # drop caches and logs
 && rm -rf /var/lib/apt/lists/* /var/log/* /var/tmp/* ~/.npm
# the wheels from the previous stage, reached through a cache mount of it
RUN --mount=type=cache,from=wheel-builder,source=/src/jupyterhub/wheelhouse,target=/tmp/wheelhouse \
    # keep pip itself current
    python3 -m pip install --no-compile --no-cache-dir --upgrade setuptools pip \
 && python3 -m pip install --no-compile --no-cache-dir /tmp/wheelhouse/*

CMD ["jupyterhub"]
