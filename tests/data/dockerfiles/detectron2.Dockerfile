# Modeled on: facebookresearch/detectron2:docker/Dockerfile (commit 06f7906a0cbd81f75e12b6ef1cf5132fcde18d71)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: env-legacy-form, line-continuation, tab-indented-continuation, arg-after-from, user-then-run, env-from-arg, run-trailing-shell-comment, comments

FROM nvidia/cuda:11.1.1-cudnn8-devel-ubuntu18.04@sha256:ba71773f1d0707ebd48963f7f2b869e08eeea58da7b5e95196ae181b0a0a020e
# An older Ubuntu on purpose: the OpenCV wheels misbehave on newer ones.

ENV DEBIAN_FRONTEND noninteractive
RUN apt-get update && apt-get install -y \
    python3.7 python3.7-dev python3-opencv \
    ca-certificates git wget sudo ninja-build

# let python3 and python mean 3.7
RUN update-alternatives --install /usr/bin/python3 python3 /usr/bin/python3.7 2
RUN ln -sv /usr/bin/python3.7 /usr/bin/python

# an unprivileged account for the build
ARG USER_ID=1000
RUN useradd -m --no-log-init --system --uid ${USER_ID} builder -g sudo
RUN echo '%sudo ALL=(ALL) NOPASSWD:ALL' >> /etc/sudoers
USER builder
WORKDIR /home/builder

ENV PATH="/home/builder/.local/bin:${PATH}"
RUN wget -q https://bootstrap.pypa.io/pip/get-pip.py && \
	python3 get-pip.py --user && \
	rm get-pip.py

# pin numpy first so the host-provided one is not picked up
RUN pip install --user numpy==1.20.3

RUN pip install --user tensorboard cmake   # apt's cmake is too old
RUN pip install --user torch==1.10 torchvision==0.11.1 -f https://download.pytorch.org/whl/cu111/torch_stable.html

RUN pip install --user 'git+https://github.com/facebookresearch/fvcore'
RUN git clone https://github.com/facebookresearch/detectron2 detectron2_repo
# no GPU is visible while the image builds, so force the CUDA code paths
ENV FORCE_CUDA="1"
# every common architecture: slower to build, works on more cards
ARG TORCH_CUDA_ARCH_LIST="Pascal;Volta;Turing"
ENV TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST}"

RUN pip install --user -e detectron2_repo

# fixed model cache location
ENV FVCORE_CACHE="/tmp"
WORKDIR /home/builder/detectron2_repo

# usage, not run at build time:
#   python3 demo/demo.py --config-file configs/<model>.yaml \
	#--input in.jpg --output out/
