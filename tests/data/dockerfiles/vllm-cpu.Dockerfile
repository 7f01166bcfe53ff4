# Modeled on: vllm-project/vllm:docker/Dockerfile.cpu (commit 002c42b2b4358cc689ec19f2e591a38de6694718)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: multi-stage-named, from-stage-by-arg, automatic-platform-arg, run-mount-cache, mount-sharing-locked, run-mount-secret, run-mount-bind, mount-bind-from-stage, arg-after-from, arg-redeclared-in-stage, env-from-arg, env-from-arg-with-alternate, workdir-relative-copy, copy-from-stage, add-local-relative, label, label-from-arg-with-default, entrypoint-exec, entrypoint-per-stage, env-legacy-form, line-continuation, comments
# CPU image for x86_64 and arm64; pick one with `docker buildx build --platform=...`.
#
# Targets:
#   vllm-openai (default, the last stage): serving
#   vllm-test: CI tests
#   vllm-dev: development
#
# Build arguments:
#   PYTHON_VERSION=3.12 (default) | 3.11 | 3.10
#   VLLM_CPU_X86=0 (default) | 1, for cross-compilation
#   VLLM_CPU_ARM_BF16=0 (default) | 1, for cross-compilation

######################### BASE #########################
FROM ubuntu:25.04@sha256:60f5053e11d56e18971bdab15f010aab0c026c6653f2ec32a7953004fad76ac9 AS base

# no uv cache: a republished wheel would otherwise be served stale
ENV UV_NO_CACHE=1

RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt,sharing=locked \
    apt-get update -y \
    && apt-get install -y --no-install-recommends ca-certificates curl git

ARG TARGETARCH

######################### COMMON #########################
FROM base AS base-common

WORKDIR /workspace

ARG PYTHON_VERSION=3.12

ARG max_jobs=32
ENV MAX_JOBS=${max_jobs}

# compilers, run-time libraries, and uv
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt,sharing=locked \
    apt-get update -y \
    && apt-get install -y --no-install-recommends sudo ccache gcc g++ make \
    libtcmalloc-minimal4 libnuma-dev jq \
    && curl -LsSf https://astral.sh/uv/install.sh | sh

ARG TARGETARCH
ARG USE_SCCACHE
ARG SCCACHE_BUCKET_NAME=vllm-build-sccache
ARG SCCACHE_REGION_NAME=us-west-2

# set only when USE_SCCACHE is non-empty
ENV SCCACHE_BUCKET=${USE_SCCACHE:+${SCCACHE_BUCKET_NAME}}
ENV SCCACHE_REGION=${USE_SCCACHE:+${SCCACHE_REGION_NAME}}

ENV CCACHE_DIR=/root/.cache/ccache
ENV CMAKE_CXX_COMPILER_LAUNCHER=ccache

ENV PATH="/root/.local/bin:$PATH"
ENV VIRTUAL_ENV="/opt/venv"
ENV UV_PYTHON_INSTALL_DIR=/opt/uv/python
RUN uv venv --python ${PYTHON_VERSION} --seed ${VIRTUAL_ENV}
ENV PATH="$VIRTUAL_ENV/bin:$PATH"

ENV UV_HTTP_TIMEOUT=500

ENV UV_INDEX_STRATEGY="unsafe-best-match"
ENV UV_LINK_MODE="copy"

ENV TARGETARCH=${TARGETARCH}

######################### PYTHON DEPENDENCIES #########################
FROM base-common AS base-common-pydeps

ARG PYTORCH_CPU_INDEX_BASE_URL=https://download.pytorch.org/whl

COPY requirements/common.txt requirements/common.txt
COPY requirements/cpu.txt requirements/cpu.txt

RUN --mount=type=cache,target=/root/.cache/uv \
    uv pip install --upgrade pip && \
    uv pip install -r requirements/cpu.txt \
        --extra-index-url ${PYTORCH_CPU_INDEX_BASE_URL}/cpu

######################### PER-ARCHITECTURE BASES #########################
FROM base-common-pydeps AS base-amd64

ENV LD_PRELOAD="/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"

FROM base-common-pydeps AS base-arm64

ENV LD_PRELOAD="/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4"

######################### ARCHITECTURE SELECTED BY TARGETARCH #########################
FROM base-${TARGETARCH} AS base-arch

RUN echo 'ulimit -c 0' >> ~/.bashrc

######################### SOURCES #########################
FROM base-arch AS vllm-src

# ARGs do not cross FROM: declare them again
ARG PYTORCH_CPU_INDEX_BASE_URL=https://download.pytorch.org/whl

ARG GIT_REPO_CHECK=0
# x86 ISA extensions when cross-compiling: --build-arg VLLM_CPU_X86=1
ARG VLLM_CPU_X86=0
ENV VLLM_CPU_X86=${VLLM_CPU_X86}
# ARM BF16 when cross-compiling: --build-arg VLLM_CPU_ARM_BF16=1
ARG VLLM_CPU_ARM_BF16=0
ENV VLLM_CPU_ARM_BF16=${VLLM_CPU_ARM_BF16}

WORKDIR /vllm-workspace

# refuse ISA flags that do not fit the target architecture
RUN if [ "$TARGETARCH" = "arm64" ] && [ "$VLLM_CPU_X86" != "0" ]; then \
        echo "x86 ISA flags cannot be used for arm64"; \
        exit 1; \
    fi && \
    if [ "$TARGETARCH" = "amd64" ] && [ "$VLLM_CPU_ARM_BF16" != "0" ]; then \
        echo "ARM ISA flags cannot be used for amd64"; \
        exit 1; \
    fi

COPY requirements/build/cpu.txt requirements/build/cpu.txt

RUN --mount=type=cache,target=/root/.cache/uv \
    uv pip install -r requirements/build/cpu.txt \
        --extra-index-url ${PYTORCH_CPU_INDEX_BASE_URL}/cpu

COPY . .

RUN if [ "$GIT_REPO_CHECK" != 0 ]; then bash tools/check_repo.sh ; fi

######################### WHEEL #########################
FROM vllm-src AS vllm-build

ARG USE_SCCACHE

RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=cache,target=/root/.cache/ccache \
    --mount=type=secret,id=aws-credentials,target=/root/.aws/credentials,required=false \
    --mount=type=bind,source=.git,target=.git \
    if [ "$USE_SCCACHE" = "1" ]; then \
        export CMAKE_CXX_COMPILER_LAUNCHER=sccache; \
    fi && \
    VLLM_TARGET_DEVICE=cpu python3 setup.py bdist_wheel --dist-dir=dist

######################### TEST DEPENDENCIES #########################
FROM base-arch AS vllm-test-deps

ARG PYTORCH_CPU_INDEX_BASE_URL=https://download.pytorch.org/whl

WORKDIR /vllm-workspace

COPY requirements/test/cpu.txt requirements/test/cpu.txt

# some test packages have no aarch64 builds
RUN case "$(uname -m)" in \
    aarch64|arm64) sed -i '/^decord==/d' requirements/test/cpu.txt ;; \
    esac

RUN --mount=type=cache,target=/root/.cache/uv \
    uv pip install -r requirements/test/cpu.txt \
        --extra-index-url ${PYTORCH_CPU_INDEX_BASE_URL}/cpu

######################### DEVELOPMENT #########################
FROM vllm-src AS vllm-dev

WORKDIR /vllm-workspace

RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt,sharing=locked \
    apt-get install -y --no-install-recommends vim numactl

# an editable install against the checkout
RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=cache,target=/root/.cache/ccache \
    --mount=type=bind,source=.git,target=.git \
    VLLM_TARGET_DEVICE=cpu python3 setup.py develop

COPY --from=vllm-test-deps /vllm-workspace/requirements/test/cpu.txt requirements/test/cpu.txt

RUN --mount=type=cache,target=/root/.cache/uv \
    uv pip install -r requirements/lint.txt -r requirements/test/cpu.txt

ENTRYPOINT ["bash"]

######################### TEST #########################
FROM vllm-test-deps AS vllm-test

WORKDIR /vllm-workspace

RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=bind,from=vllm-build,src=/vllm-workspace/dist,target=dist \
    uv pip install dist/*.whl

ADD ./tests/ ./tests/
ADD ./examples/ ./examples/
ADD ./benchmarks/ ./benchmarks/
ADD ./vllm/collect_env.py .

RUN --mount=type=cache,target=/root/.cache/uv \
    uv pip install -e tests/vllm_test_utils

# longer timeout for model downloads in tests
ENV HF_HUB_DOWNLOAD_TIMEOUT 60

######################### RELEASE (default target) #########################
FROM base-arch AS vllm-openai

WORKDIR /vllm-workspace

RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=cache,target=/root/.cache/ccache \
    --mount=type=bind,from=vllm-build,src=/vllm-workspace/dist,target=dist \
    uv pip install "$(realpath dist/*.whl)[audio]"

# image metadata
LABEL org.opencontainers.image.title="vLLM CPU"
LABEL org.opencontainers.image.vendor="vLLM Project"
LABEL org.opencontainers.image.source="https://github.com/vllm-project/vllm"

# build configuration, recorded as labels
ARG TARGETARCH
ARG VLLM_CPU_X86
ARG VLLM_CPU_ARM_BF16
ARG PYTHON_VERSION

LABEL ai.vllm.build.target-arch="${TARGETARCH}"
LABEL ai.vllm.build.cpu-x86="${VLLM_CPU_X86:-false}"
LABEL ai.vllm.build.cpu-arm-bf16="${VLLM_CPU_ARM_BF16:-false}"
LABEL ai.vllm.build.python-version="${PYTHON_VERSION:-3.12}"

# chat and tool templates ship with the image
COPY examples examples

ENTRYPOINT ["vllm", "serve"]
