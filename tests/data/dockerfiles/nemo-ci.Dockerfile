# Modeled on: NVIDIA/NeMo:Dockerfile.ci (commit 0021db277ae20cd6b17ecb4f0e630d7fa26dd836)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: syntax-directive-comment, arg-before-from, label-quoted-key, run-heredoc, heredoc-quoted-delimiter, heredoc-with-interpreter-args, run-mount-bind, mount-flags-on-own-lines, arg-after-from, run-trailing-shell-comment, workdir-relative-copy, env-self-reference, comments
# syntax=docker/dockerfile:1-labs

ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.07-py3@sha256:11648cb817e074b8638a278d049b9967abbe27223278af3d1924e5664848d763

FROM ${BASE_IMAGE}
LABEL "nemo.library"="nemo-core"

ENV TRANSFORMERS_OFFLINE=0
ENV HYDRA_FULL_ERROR=1
ENV PYTHONUNBUFFERED=1

# system packages
RUN <<"EOF" bash -ex
apt-get update
apt-get install -y bc libsox-fmt-all
apt-get clean
EOF

WORKDIR /workspace

# a CUDA extension, built from a tagged checkout
ARG CAUSAL_CONV_TAG=v1.2.2.post1

RUN <<"EOF" bash -ex
# clone, build, remove the checkout

git clone --depth 1 --branch ${CAUSAL_CONV_TAG} https://github.com/Dao-AILab/causal-conv1d && \
  cd causal-conv1d && \
  python setup.py install && \
  cd .. && \
  rm -rf causal-conv1d

EOF

RUN pip install hatchling   # build backend for the next install
ARG NEMO_RUN_TAG=main
RUN pip install nemo_run@git+https://github.com/NVIDIA/NeMo-Run.git@${NEMO_RUN_TAG}

# revisions of the heavy dependencies
ARG TE_TAG=main
ARG MCORE_TAG=main

ARG APEX_TAG=master
RUN \
--mount=type=bind,source=requirements,target=requirements \
--mount=type=bind,source=tools,target=tools \
--mount=type=bind,source=setup.py,target=setup.py \
--mount=type=bind,source=nemo/package_info.py,target=nemo/package_info.py \
--mount=type=bind,source=nemo/__init__.py,target=nemo/__init__.py <<"EOF" bash -ex
pip install --no-cache-dir --no-build-isolation --extra-index-url https://pypi.nvidia.com \
"transformer-engine @ git+https://github.com/NVIDIA/TransformerEngine.git@${TE_TAG}" \
"megatron_core @ git+https://github.com/NVIDIA/Megatron-LM.git@${MCORE_TAG}" \
"apex @ git+https://github.com/NVIDIA/apex.git@${APEX_TAG}" \
".[all]"

# the dataset helpers are compiled in place
git clone https://github.com/NVIDIA/Megatron-LM.git && \
pushd Megatron-LM && \
git checkout ${MCORE_TAG} && \
  pushd megatron/core/datasets && \
  make && \
  popd && \
popd
export PYTHONPATH="${PYTHONPATH}:/workspace/Megatron-LM"

EOF

# the source tree itself
COPY ./ ./
RUN <<"EOF" bash -ex
pip install --no-cache-dir --no-build-isolation ".[all]"

# open permissions on the workspace
chmod 777 -R /workspace
EOF

ENV PYTHONPATH="${PYTHONPATH}:/workspace/Megatron-LM"
