# Modeled on: tensorflow/tensorflow:tensorflow/tools/dockerfiles/dockerfiles/gpu.Dockerfile (commit 030ac63a93967da57a6272f42f1b52b779e12091)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, arg-empty-default, param-expansion-in-from, digest-after-composed-reference, single-named-stage, arg-redeclared-in-stage, arg-from-arg, shell, bash-substitution-in-run, env-legacy-form, copy-after-run, line-continuation, comments
# The original is generated from partial files; this keeps its final shape.

ARG UBUNTU_VERSION=18.04

ARG ARCH=
ARG CUDA=10.1
FROM nvidia/cuda${ARCH:+-$ARCH}:${CUDA}-base-ubuntu${UBUNTU_VERSION}@sha256:f2c4bd6f5fd5a588c1a87af2b75086d05110341c511e05f377a3e9c73ef37d1f as base
# FROM used ARCH and CUDA; declare them again to use them below
# (the defaults given before FROM still apply)
ARG ARCH
ARG CUDA
ARG CUDNN=7.6.4.38-1
ARG CUDNN_MAJOR_VERSION=7
ARG LIB_DIR_PREFIX=x86_64
ARG LIBNVINFER=6.0.1-1
ARG LIBNVINFER_MAJOR_VERSION=6

# bash, for the ${VAR/./-} substitutions below
SHELL ["/bin/bash", "-c"]
# libraries the GPU build needs
RUN apt-get update && apt-get install -y --no-install-recommends \
        build-essential \
        cuda-command-line-tools-${CUDA/./-} \
        cuda-cufft-${CUDA/./-} \
        cuda-curand-${CUDA/./-} \
        curl \
        libcudnn7=${CUDNN}+cuda${CUDA} \
        libhdf5-serial-dev \
        pkg-config \
        unzip

# TensorRT, except on POWER
RUN [[ "${ARCH}" = "ppc64le" ]] || { apt-get update && \
        apt-get install -y --no-install-recommends libnvinfer${LIBNVINFER_MAJOR_VERSION}=${LIBNVINFER}+cuda${CUDA} \
        libnvinfer-plugin${LIBNVINFER_MAJOR_VERSION}=${LIBNVINFER}+cuda${CUDA} \
        && apt-get clean \
        && rm -rf /var/lib/apt/lists/*; }

# CUPTI, for profiling
ENV LD_LIBRARY_PATH /usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib64:$LD_LIBRARY_PATH

# the libcuda stub where the framework looks for it
RUN ln -s /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/lib64/stubs/libcuda.so.1 \
    && echo "/usr/local/cuda/lib64/stubs" > /etc/ld.so.conf.d/z-cuda-stubs.conf \
    && ldconfig

ARG USE_PYTHON_3_NOT_2
ARG _PY_SUFFIX=${USE_PYTHON_3_NOT_2:+3}
ARG PYTHON=python${_PY_SUFFIX}
ARG PIP=pip${_PY_SUFFIX}

# UTF-8 by default
ENV LANG C.UTF-8

RUN apt-get update && apt-get install -y \
    ${PYTHON} \
    ${PYTHON}-pip

RUN ${PIP} --no-cache-dir install --upgrade \
    pip \
    setuptools

# some tools expect a plain "python"
RUN ln -s $(which ${PYTHON}) /usr/local/bin/python

# which package and version: --build-arg TF_PACKAGE=... TF_PACKAGE_VERSION=...
ARG TF_PACKAGE=tensorflow
ARG TF_PACKAGE_VERSION=
RUN ${PIP} install ${TF_PACKAGE}${TF_PACKAGE_VERSION:+==${TF_PACKAGE_VERSION}}

COPY bashrc /etc/bash.bashrc
RUN chmod a+rwx /etc/bash.bashrc
