# Modeled on: nf-core/tools:Dockerfile (commit 01f1f78e9f766ac694d11d29b7a68d65dca15e13)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: label, label-multi-key, env-legacy-form, arg-empty-quoted-default, env-from-arg, copy-after-run, line-continuation, entrypoint-exec, cmd-exec, exec-form-inner-spaces, comments
FROM python:3.14-slim@sha256:79eab4bfda966cb905ef380e7cb1d439eb7f1dc97862485ea04e119d4e7fd191
LABEL authors="maintainer@example.org" \
    description="Image with the requirements of the nf-core command-line tools"

# ignore packages under $HOME
ENV PYTHONNUSERSITE=1

# a current pip, and uv
RUN python -m pip install --upgrade pip uv

# what the workflow manager needs
RUN apt-get update \
    && apt-get upgrade -y \
    && apt-get install -y git \
    && apt-get install -y curl

# a Java runtime; its package expects the man1 folder to exist
RUN mkdir -p /usr/share/man/man1 \
    && apt-get install -y default-jre \
    && apt-get clean -y && rm -rf /var/lib/apt/lists/*

# workflow-manager version, from a build argument
ARG NXF_VER=""
ENV NXF_VER ${NXF_VER}
# the workflow manager
RUN curl -s https://get.nextflow.io | bash \
    && mv nextflow /usr/local/bin \
    && chmod a+rx /usr/local/bin/nextflow
# the test framework
RUN curl -fsSL https://get.nf-test.com | bash \
    && mv nf-test /usr/local/bin \
    && chmod a+rx /usr/local/bin/nf-test

# the package sources
COPY . /usr/src/nf_core
WORKDIR /usr/src/nf_core

# install the package
RUN uv pip install --system .

# run the tool against the current folder by default
ENTRYPOINT [ "nf-core" ]
CMD [ "." ]
