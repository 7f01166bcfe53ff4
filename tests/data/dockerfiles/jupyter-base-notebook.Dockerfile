# Modeled on: jupyter/docker-stacks:images/base-notebook/Dockerfile (commit 00a67281613254de8a253a292313eb7187c83982)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, arg-default-from-arg, label, shell, user-then-run, comments-inside-continuation, expose-from-env, cmd-exec, cmd-before-copy, copy-multi-source, healthcheck, healthcheck-options, quoted-paths, line-continuation

ARG REGISTRY=quay.io
ARG OWNER=jupyter
ARG BASE_CONTAINER=$REGISTRY/$OWNER/docker-stacks-foundation:2023-10-20@sha256:a61698a687c6c08caf093b02052d4de9e7a0d72bb49409bf2725a6d6162c6f29
FROM $BASE_CONTAINER

LABEL maintainer="Jupyter Project <jupyter@googlegroups.com>"

# pipefail for every RUN
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

USER root

# OS packages the server needs at start
RUN apt-get update --yes && \
    apt-get install --yes --no-install-recommends \
    fonts-liberation \
    # pandoc converts notebooks to other formats
    pandoc \
    # run-one backs the RESTARTABLE option
    run-one && \
    apt-get clean && rm -rf /var/lib/apt/lists/*

USER ${NB_UID}

# the notebook servers, a generated config, then clean-up and permission repair
WORKDIR /tmp
RUN mamba install --yes \
    'jupyterlab' \
    'notebook' \
    'jupyterhub' && \
    jupyter server --generate-config && \
    mamba clean --all -f -y && \
    jupyter lab clean && \
    rm -rf "/home/${NB_USER}/.cache/yarn" && \
    fix-permissions "${CONDA_DIR}" && \
    fix-permissions "/home/${NB_USER}"

ENV JUPYTER_PORT=8888
EXPOSE $JUPYTER_PORT

# start command
CMD ["start-notebook.py"]

# local files as late as possible
COPY start-notebook.py start-notebook.sh start-singleuser.py start-singleuser.sh /usr/local/bin/
COPY jupyter_server_config.py docker_healthcheck.py /etc/jupyter/

USER root
RUN fix-permissions /etc/jupyter/

# probe for lab, notebook and server front ends
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 \
    CMD /etc/jupyter/docker_healthcheck.py || exit 1

USER ${NB_UID}

WORKDIR "${HOME}"
