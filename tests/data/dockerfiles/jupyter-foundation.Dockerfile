# Modeled on: jupyter/docker-stacks:images/docker-stacks-foundation/Dockerfile (commit 00987883e58d139b5ed01f803f95e639c59bf340)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, label, arg-after-from, shell, user-then-run, env-multi-pair, env-from-arg, comments-inside-continuation, copy-chown, quoted-paths, copy-after-run, copy-multi-source, entrypoint-exec, line-continuation

# Ubuntu LTS as the root image; override with --build-arg ROOT_CONTAINER=...
ARG ROOT_CONTAINER=ubuntu:22.04@sha256:cb287cf26b15fded26828219b268886d76ea3963bc93495425dcf08225c86e9f

FROM $ROOT_CONTAINER

LABEL maintainer="Jupyter Project <jupyter@googlegroups.com>"
ARG NB_USER="jovyan"
ARG NB_UID="1000"
ARG NB_GID="100"

# make every RUN below fail on the first broken pipe
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

USER root

# OS packages for a minimal server
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update --yes && \
    # patch the base image, which is rebuilt less often than we build
    apt-get upgrade --yes && \
    apt-get install --yes --no-install-recommends \
    # bzip2 unpacks the micromamba download
    bzip2 \
    ca-certificates \
    locales \
    sudo \
    # tini: a small PID 1 that reaps zombies
    tini \
    wget && \
    apt-get clean && rm -rf /var/lib/apt/lists/* && \
    echo "en_US.UTF-8 UTF-8" > /etc/locale.gen && \
    echo "C.UTF-8 UTF-8" >> /etc/locale.gen && \
    locale-gen

ENV CONDA_DIR=/opt/conda \
    SHELL=/bin/bash \
    NB_USER="${NB_USER}" \
    NB_UID=${NB_UID} \
    NB_GID=${NB_GID} \
    LC_ALL=C.UTF-8 \
    LANG=C.UTF-8 \
    LANGUAGE=C.UTF-8
ENV PATH="${CONDA_DIR}/bin:${PATH}" \
    HOME="/home/${NB_USER}"

# helper that repairs group permissions after installs
COPY fix-permissions /usr/local/bin/fix-permissions
RUN chmod a+rx /usr/local/bin/fix-permissions

# coloured prompt and conda hook in the skeleton .bashrc
# hadolint ignore=SC2016
RUN sed -i 's/^#force_color_prompt=yes/force_color_prompt=yes/' /etc/skel/.bashrc && \
    # activation hook, see the conda docs on shell integration
    echo 'eval "$(conda shell.bash hook)"' >> /etc/skel/.bashrc

# the notebook user, in the users group, with writable conda and home
RUN echo "auth requisite pam_deny.so" >> /etc/pam.d/su && \
    sed -i.bak -e 's/^%admin/#%admin/' /etc/sudoers && \
    sed -i.bak -e 's/^%sudo/#%sudo/' /etc/sudoers && \
    useradd --no-log-init --create-home --shell /bin/bash --uid "${NB_UID}" --no-user-group "${NB_USER}" && \
    mkdir -p "${CONDA_DIR}" && \
    chown "${NB_USER}:${NB_GID}" "${CONDA_DIR}" && \
    chmod g+w /etc/passwd && \
    fix-permissions "${CONDA_DIR}" && \
    fix-permissions "/home/${NB_USER}"

USER ${NB_UID}

# a Python version, or "default"
ARG PYTHON_VERSION=3.11

# the traditional work folder
RUN mkdir "/home/${NB_USER}/work" && \
    fix-permissions "/home/${NB_USER}"

# micromamba bootstraps the prefix and is then thrown away; one RUN keeps
# the permission fix-ups from duplicating files across layers
COPY --chown="${NB_UID}:${NB_GID}" initial-condarc "${CONDA_DIR}/.condarc"
WORKDIR /tmp
RUN set -x && \
    arch=$(uname -m) && \
    if [ "${arch}" = "x86_64" ]; then \
        # the download service names this one "64"
        arch="64"; \
    fi && \
    wget --progress=dot:giga -O - \
        "https://micro.mamba.pm/api/micromamba/linux-${arch}/latest" | tar -xvj bin/micromamba && \
    PYTHON_SPECIFIER="python=${PYTHON_VERSION}" && \
    if [[ "${PYTHON_VERSION}" == "default" ]]; then PYTHON_SPECIFIER="python"; fi && \
    ./bin/micromamba install \
        --root-prefix="${CONDA_DIR}" \
        --prefix="${CONDA_DIR}" \
        --yes \
        'jupyter_core' \
        'mamba' \
        "${PYTHON_SPECIFIER}" && \
    rm -rf /tmp/bin/ && \
    mamba clean --all -f -y && \
    fix-permissions "${CONDA_DIR}" && \
    fix-permissions "/home/${NB_USER}"

# local scripts go in late so edits do not bust the cache
COPY run-hooks.sh start.sh /usr/local/bin/

ENTRYPOINT ["tini", "-g", "--", "start.sh"]

USER root

# folders for start-up hooks
RUN mkdir /usr/local/bin/start-notebook.d && \
    mkdir /usr/local/bin/before-notebook.d

COPY 10activate-conda-env.sh /usr/local/bin/before-notebook.d/

# back to the unprivileged user
USER ${NB_UID}

WORKDIR "${HOME}"
