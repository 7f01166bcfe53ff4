# Modeled on: reframe-hpc/reframe:examples/tutorial/dockerfiles/singlenode.Dockerfile (commit 4b759b38adf110ad9de4d3b440a29688e09fcf41)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: copy-from-image, line-continuation, copy-after-run, user-then-run, env-trailing-colon, no-cmd-no-entrypoint, comments
FROM ubuntu:24.04@sha256:19a0a084b9b98c04a22f4cac4a949148eb595a0350ba65e52e51eac3fb8b2c7c
COPY --from=ghcr.io/astral-sh/uv:latest@sha256:2bdd7b9beec432a9deeb86ccfbcf21f7cffacd8cb1a5b3cf3e72e1ea2439dfcf /uv /uvx /usr/local/bin/

RUN apt-get -y update && \
    apt-get -y install curl && \
    apt-get -y install sudo && \
    apt-get -y install clang gcc git jq libomp-dev

# the STREAM memory-bandwidth benchmark, built from source
WORKDIR /usr/local/share
RUN mkdir -p stream/bin && \
    cd stream && \
    curl -fsSLJO https://www.cs.virginia.edu/stream/FTP/Code/stream.c && \
    gcc -DSTREAM_ARRAY_SIZE=100000000 -O3 -Wall -fopenmp -o bin/stream.x stream.c
ENV PATH=/usr/local/share/stream/bin:$PATH

# the framework's sources, from the build context
WORKDIR /workspace
COPY . /workspace/reframe

# a tutorial account with passwordless sudo
RUN useradd -ms /bin/bash -G sudo user && \
    echo '%sudo ALL=(ALL) NOPASSWD:ALL' >> /etc/sudoers

WORKDIR /home/user

# install the framework as that user
USER user
RUN uv tool install /workspace/reframe
ENV PATH=/home/user/.local/bin:$PATH
ENV MANPATH=/home/user/.local/share/uv/tools/reframe-hpc/share/man:
