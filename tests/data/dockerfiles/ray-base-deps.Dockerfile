# Modeled on: ray-project/ray:docker/base-deps/Dockerfile (commit 00c1d517d7e52cd8bfa59c0a8d40a27ade4dca25)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: syntax-directive-comment, arg-before-from, arg-quoted-value, multi-stage-named, unnamed-final-stage, run-heredoc, heredoc-with-shebang, env-legacy-form, arg-after-from, copy-from-stage, user-then-run, quoted-paths, shell, workdir-from-env, comments
# syntax=docker/dockerfile:1.3-labs

# The libraries Ray needs at run time.

# GPU variants pass a CUDA developer image here.
ARG BASE_IMAGE="ubuntu:24.04@sha256:19a0a084b9b98c04a22f4cac4a949148eb595a0350ba65e52e51eac3fb8b2c7c"

# --- HAProxy, compiled in a stage of its own ---
FROM ${BASE_IMAGE} AS haproxy-builder

RUN <<EOF
#!/bin/bash
set -euo pipefail

apt-get update -y
apt-get install -y --no-install-recommends \
    build-essential \
    ca-certificates \
    curl \
    libssl-dev \
    zlib1g-dev

# from the release tarball
HAPROXY_VERSION="2.8.12"
SRC_DIR=$(mktemp -d)
curl -sSfL -o "${SRC_DIR}/haproxy.tar.gz" "https://www.haproxy.org/download/2.8/src/haproxy-${HAPROXY_VERSION}.tar.gz"
tar -xzf "${SRC_DIR}/haproxy.tar.gz" -C "${SRC_DIR}" --strip-components=1
make -C "${SRC_DIR}" TARGET=linux-glibc USE_OPENSSL=1 USE_ZLIB=1 -j$(nproc)
make -C "${SRC_DIR}" install SBINDIR=/usr/local/bin
rm -rf "${SRC_DIR}"

EOF

# --- the image itself ---
FROM ${BASE_IMAGE}
ENV TZ=America/Los_Angeles
ENV LC_ALL=C.UTF-8
ENV LANG=C.UTF-8

# Some GPU operators inject driver paths under /usr/local/nvidia after the
# container starts, so they are on the search paths in advance.
ENV PATH "/home/ray/anaconda3/bin:$PATH:/usr/local/nvidia/bin"
ENV LD_LIBRARY_PATH "$LD_LIBRARY_PATH:/usr/local/nvidia/lib64"
ARG DEBIAN_FRONTEND=noninteractive
ARG PYTHON_VERSION=3.10
ARG CONSTRAINTS_FILE="python/requirements_compiled_py${PYTHON_VERSION}.txt"

ARG RAY_UID=1000
ARG RAY_GID=100

RUN <<EOF
#!/bin/bash

set -euo pipefail

apt-get update -y
apt-get upgrade -y

PKGS=(
    sudo
    tzdata
    git
    wget
    cmake
    g++
    zlib1g-dev

    # for the cluster autoscaler
    tmux
    rsync
    openssh-client
)

apt-get install -y "${PKGS[@]}"

useradd -ms /bin/bash -d /home/ray ray --uid $RAY_UID --gid $RAY_GID
usermod -aG sudo ray
echo 'ray ALL=NOPASSWD: ALL' >> /etc/sudoers

mkdir -p /etc/haproxy /run/haproxy
chown -R ray:"$(id -gn ray)" /run/haproxy

EOF

COPY --from=haproxy-builder /usr/local/bin/haproxy /usr/local/bin/haproxy

USER $RAY_UID
ENV HOME=/home/ray
WORKDIR /home/ray

COPY "$CONSTRAINTS_FILE" /home/ray/requirements_compiled.txt

SHELL ["/bin/bash", "-c"]

RUN <<EOF
#!/bin/bash

set -euo pipefail

# host architecture
case "${HOSTTYPE}" in
    x86_64*)  ARCH="x86_64" ;;
    aarch64*) ARCH="aarch64" ;;
    *) echo "unsupported architecture ${HOSTTYPE}" >&2; exit 1 ;;
esac

# conda-forge's installer
wget --quiet \
    "https://github.com/conda-forge/miniforge/releases/download/24.11.3-0/Miniforge3-24.11.3-0-Linux-${ARCH}.sh" \
    -O /tmp/miniforge.sh

/bin/bash /tmp/miniforge.sh -b -u -p $HOME/anaconda3
rm /tmp/miniforge.sh
$HOME/anaconda3/bin/conda install -y python=$PYTHON_VERSION
$HOME/anaconda3/bin/conda clean -y --all

# conda's Python as the system Python
export PATH=$HOME/anaconda3/bin:$PATH
pip install --no-cache-dir -c $HOME/requirements_compiled.txt numpy psutil

sudo rm -rf /var/lib/apt/lists/*
sudo apt-get clean

EOF

WORKDIR $HOME
