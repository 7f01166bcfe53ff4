# Modeled on: pangeo-data/pangeo-docker-images:base-image/Dockerfile (commit 012c96055c55fe32da40b9d4bf4727b82a4cf81f)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: onbuild, onbuild-copy-chown, onbuild-arg, onbuild-user, env-multi-pair, env-from-env, arg-after-from, user-then-run, expose, entrypoint-exec, commented-out-cmd, line-continuation-leading-semicolon, comments
FROM ubuntu:18.04@sha256:f601e6d88db23ca19274c712bb188a00012fb4e84e12268f0d85a7eeed75552f
# base image of the pangeo images: derived images run the ONBUILD steps below

# root section
# keep the conda version close to what repo2docker uses
# ========================
ENV CONDA_VERSION=4.9.0-0 \
    CONDA_ENV=notebook \
    NB_USER=jovyan \
    NB_UID=1000 \
    SHELL=/bin/bash \
    LANG=C.UTF-8  \
    LC_ALL=C.UTF-8 \
    CONDA_DIR=/srv/conda

ENV NB_PYTHON_PREFIX=${CONDA_DIR}/envs/${CONDA_ENV} \
    DASK_ROOT_CONFIG=${CONDA_DIR}/etc \
    HOME=/home/${NB_USER} \
    PATH=${CONDA_DIR}/bin:${PATH}

# the notebook user, ownership of /srv, conda activation at login
RUN echo "Creating ${NB_USER} user..." \
    && groupadd --gid ${NB_UID} ${NB_USER}  \
    && useradd --create-home --gid ${NB_UID} --no-log-init --uid ${NB_UID} ${NB_USER} \
    && echo ". ${CONDA_DIR}/etc/profile.d/conda.sh ; conda activate ${CONDA_ENV}" > /etc/profile.d/init_conda.sh \
    && chown -R ${NB_USER}:${NB_USER} /srv

# no interactive prompts from apt
ARG DEBIAN_FRONTEND=noninteractive

RUN echo "Installing apt packages..." \
    && apt-get update --fix-missing \
    && apt-get install -y apt-utils 2> /dev/null \
    && apt-get install -y wget zip \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*
# ========================

USER ${NB_USER}
WORKDIR ${HOME}

RUN echo "Installing Miniforge..." \
    && URL="https://github.com/conda-forge/miniforge/releases/download/${CONDA_VERSION}/Miniforge3-${CONDA_VERSION}-Linux-x86_64.sh" \
    && wget --quiet ${URL} -O miniconda.sh \
    && /bin/bash miniconda.sh -u -b -p ${CONDA_DIR} \
    && rm miniconda.sh \
    && conda install -y -c conda-forge mamba \
    && mamba clean -afy \
    && find ${CONDA_DIR} -follow -type f -name '*.pyc' -delete

EXPOSE 8888
ENTRYPOINT ["/srv/start"]
#CMD ["jupyter", "notebook", "--ip", "0.0.0.0"]

# Triggers: these run only in images built FROM this one
# ----------------------
ONBUILD USER root
# owner written out literally
ONBUILD COPY --chown=jovyan:jovyan . /home/jovyan

ONBUILD RUN echo "Looking for a 'binder' or '.binder' folder" \
        ; if [ -d binder ] ; then \
        echo "using binder/" \
        ; elif [ -d .binder ] ; then \
        echo "using .binder/" \
        ; else \
        echo "using ./" \
        ; fi

ONBUILD ARG DEBIAN_FRONTEND=noninteractive
ONBUILD RUN echo "Looking for apt.txt..." \
        ; [ -d binder ] && cd binder \
        ; [ -d .binder ] && cd .binder \
        ; if test -f "apt.txt" ; then \
        apt-get update --fix-missing \
        && xargs -a apt.txt apt-get install -y \
        && apt-get clean \
        && rm -rf /var/lib/apt/lists/* \
        ; fi

ONBUILD USER ${NB_USER}

# the "notebook" environment, from a lock file or environment.yml
ONBUILD RUN echo "Looking for conda-linux-64.lock or environment.yml..." \
        ; [ -d binder ] && cd binder \
        ; [ -d .binder ] && cd .binder \
        ; if test -f "conda-linux-64.lock" ; then \
        mamba create --name ${CONDA_ENV} --file conda-linux-64.lock \
        ; elif test -f "environment.yml" ; then \
        mamba env create --name ${CONDA_ENV} -f environment.yml  \
        ; else echo "neither found, creating a default environment" ; \
        mamba create --name ${CONDA_ENV} pangeo-notebook \
        ; fi \
        && mamba clean -yaf

# pip packages
ONBUILD RUN echo "Looking for requirements.txt..." \
        ; [ -d binder ] && cd binder \
        ; [ -d .binder ] && cd .binder \
        ; if test -f "requirements.txt" ; then \
        ${NB_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r requirements.txt \
        ; fi

# a postBuild script, run inside the environment
ONBUILD RUN echo "Looking for postBuild..." \
        ; [ -d binder ] && cd binder \
        ; [ -d .binder ] && cd .binder \
        ; if test -f "postBuild" ; then \
        export PATH=${NB_PYTHON_PREFIX}/bin:${PATH} \
        && chmod +x postBuild \
        && ./postBuild \
        && rm -rf /tmp/* ${HOME}/.cache \
        ; fi

# replace the start script when one is provided
ONBUILD RUN echo "Looking for start..." \
        ; [ -d binder ] && cd binder \
        ; [ -d .binder ] && cd .binder \
        ; if test -f "start" ; then \
        chmod +x start \
        && cp start /srv/start \
        ; fi
# ----------------------
