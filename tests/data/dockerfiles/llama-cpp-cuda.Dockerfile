# Modeled on: ggml-org/llama.cpp:.devops/cuda.Dockerfile (commit 00d69466401fcd0adefa36d269861b5efda8a551)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, arg-composed-from-args, digest-in-arg-default, multi-stage-named, arg-after-from, env-multi-pair, workdir-relative-copy, run-mount-cache, copy-from-stage, copy-multi-source, healthcheck, healthcheck-exec-form, entrypoint-exec, entrypoint-per-stage, line-continuation, comments
ARG UBUNTU_VERSION=24.04
# should match the CUDA level the host driver supports
ARG CUDA_VERSION=12.8.1
# the build image
ARG BASE_CUDA_DEV_CONTAINER=nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION}@sha256:b24fea543eb03c1852c2d9408432f2a8d1baa590116aaee5556ce5a9806d0401

ARG BASE_CUDA_RUN_CONTAINER=nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION}@sha256:542d984edd2083b2442c53b215f1b52e0300e6db4beb84d747dc357c8359c220

FROM ${BASE_CUDA_DEV_CONTAINER} AS build

# GPU architectures to compile for ("default": all supported ones)
ARG CUDA_DOCKER_ARCH=default

RUN apt-get update \
    && apt-get install -y \
        gcc-14 \
        g++-14 \
        build-essential \
        cmake \
        python3 \
        python3-pip \
        git \
        libssl-dev \
        libgomp1

ARG CCACHE_ENABLED="false"
RUN if $CCACHE_ENABLED; then \
        apt-get update \
        && apt-get install -y --no-install-recommends \
            ccache; \
    fi

ENV CC=gcc-14 CXX=g++-14 CUDAHOSTCXX=g++-14

WORKDIR /app

COPY . .

RUN --mount=type=cache,target=/root/.cache/ccache \
    if [ "${CUDA_DOCKER_ARCH}" != "default" ]; then \
        export CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=${CUDA_DOCKER_ARCH}"; \
    fi \
    && cmake -B build \
        -DGGML_NATIVE=OFF \
        -DGGML_CUDA=ON \
        -DGGML_BACKEND_DL=ON \
        -DLLAMA_BUILD_TESTS=OFF \
        ${CMAKE_ARGS} \
        -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined . \
    && cmake --build build --config Release -j$(nproc)

RUN mkdir -p /app/lib && \
    find build -name "*.so*" -exec cp -P {} /app/lib \;

RUN mkdir -p /app/full \
    && cp build/bin/* /app/full \
    && cp *.py /app/full \
    && cp -r gguf-py /app/full \
    && cp requirements.txt /app/full \
    && cp .devops/tools.sh /app/full/tools.sh

## shared runtime base
FROM ${BASE_CUDA_RUN_CONTAINER} AS base

RUN apt-get update \
    && apt-get install -y libgomp1 curl \
    && apt autoremove -y \
    && apt clean -y \
    && rm -rf /tmp/* /var/tmp/*

COPY --from=build /app/lib/ /app

### everything, including the Python conversion scripts
FROM base AS full

COPY --from=build /app/full /app

WORKDIR /app

RUN apt-get update \
    && apt-get install -y \
    git \
    python3 \
    python3-pip \
    python3-wheel \
    && pip install --break-system-packages -r requirements.txt \
    && apt autoremove -y \
    && apt clean -y


ENTRYPOINT ["/app/tools.sh"]

### command-line tool only
FROM base AS light

COPY --from=build /app/full/llama-cli /app/full/llama-completion /app

WORKDIR /app

ENTRYPOINT [ "/app/llama-cli" ]

### HTTP server only (the default target: last stage)
FROM base AS server

ENV LLAMA_ARG_HOST=0.0.0.0

COPY --from=build /app/full/llama-server /app

WORKDIR /app

HEALTHCHECK CMD [ "curl", "-f", "http://localhost:8080/health" ]

ENTRYPOINT [ "/app/llama-server" ]
