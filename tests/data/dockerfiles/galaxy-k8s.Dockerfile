# Modeled on: galaxyproject/galaxy:.k8s_ci.Dockerfile (commit 1268ceb99b08b84e0f3ab3f690ce151d60736807)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, arg-default-from-arg, multi-stage-named, unnamed-final-stage, arg-after-from, arg-redeclared-in-stage, env-from-arg, workdir-relative-copy, copy-multi-source-glob, copy-from-stage, copy-chown, chown-before-from-flag, label, expose, entrypoint-exec, cmd-exec, line-continuation, comments
# Three build stages and a final one:
#   stage1       - build tools, the deployment playbook, the sources it needs
#   server_build - the playbook's server steps, then pruning
#   client_build - the playbook's client steps, then pruning
#   (final)      - a user, a directory, and the two built trees

# Init ARGs
ARG ROOT_DIR=/galaxy
ARG SERVER_DIR=$ROOT_DIR/server

ARG STAGE1_BASE=python:3.12-slim@sha256:1d0447543fac833cc86eed3edb0988e1c6ea7dfb011f7448f93bf50a6f1486d0
ARG FINAL_STAGE_BASE=$STAGE1_BASE
ARG GALAXY_USER=galaxy
ARG GALAXY_PLAYBOOK_REPO=https://github.com/galaxyproject/galaxy-docker-k8s
ARG GALAXY_PLAYBOOK_BRANCH=v4.2.1

ARG GIT_COMMIT=unspecified
ARG BUILD_DATE=unspecified
ARG IMAGE_TAG=unspecified

#======================================================
# stage 1: what every build needs
#======================================================
FROM $STAGE1_BASE AS stage1
ARG DEBIAN_FRONTEND=noninteractive
ARG SERVER_DIR
ARG GALAXY_PLAYBOOK_REPO
ARG GALAXY_PLAYBOOK_BRANCH

ENV LC_ALL=en_US.UTF-8
ENV LANG=en_US.UTF-8

# compilers, git and the playbook runner
RUN set -xe; \
    echo "Acquire::http {No-Cache=True;};" > /etc/apt/apt.conf.d/no-cache \
    && apt-get -qq update && apt-get install -y --no-install-recommends \
        locales locales-all \
        git \
        make \
        gcc \
        bzip2 \
    && pip install --no-cache virtualenv ansible \
    && apt-get autoremove -y && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /tmp/*

# a clean playbook checkout and its roles
WORKDIR /tmp/ansible
RUN rm -rf *
RUN git clone --depth 1 --branch $GALAXY_PLAYBOOK_BRANCH $GALAXY_PLAYBOOK_REPO galaxy-docker
WORKDIR /tmp/ansible/galaxy-docker
RUN ansible-galaxy install -r requirements.yml -p roles --force-with-deps

# only the parts of the source tree the build reads
COPY client/ $SERVER_DIR/client
COPY config/ $SERVER_DIR/config
COPY lib/ $SERVER_DIR/lib
COPY scripts/ $SERVER_DIR/scripts
COPY static/ $SERVER_DIR/static
COPY templates/ $SERVER_DIR/templates
COPY Makefile *.sh $SERVER_DIR

#======================================================
# stage 2a: server
#======================================================
FROM stage1 AS server_build
ARG SERVER_DIR

RUN ansible-playbook -i localhost, playbook.yml -v -e "{galaxy_build_client: false, galaxy_virtualenv_command: virtualenv}"

# drop what the running container never reads
WORKDIR $SERVER_DIR

RUN rm -rf \
        .ci \
        .git \
        doc \
        test \
        test-data
# every node_modules folder: the client is already built
RUN find . -name "node_modules" -type d -prune -exec rm -rf '{}' +

#======================================================
# stage 2b: client
#======================================================
FROM stage1 AS client_build
ARG SERVER_DIR

RUN ansible-playbook -i localhost, playbook.yml -v --tags "galaxy_build_client" -e "{galaxy_virtualenv_command: virtualenv}"

WORKDIR $SERVER_DIR
RUN rm -rf \
        .ci \
        .git \
        doc \
        test \
        test-data
RUN find . -name "node_modules" -type d -prune -exec rm -rf '{}' +

#======================================================
# final image from the stages above
#======================================================
FROM $FINAL_STAGE_BASE
ARG DEBIAN_FRONTEND=noninteractive
ARG ROOT_DIR
ARG SERVER_DIR
ARG GALAXY_USER

ARG GIT_COMMIT
ARG BUILD_DATE
ARG IMAGE_TAG

LABEL org.opencontainers.image.title="Galaxy Minimal Image" \
      org.opencontainers.image.description="A small Galaxy image for k8s and CI" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="$IMAGE_TAG" \
      org.opencontainers.image.revision=$GIT_COMMIT \
      org.opencontainers.image.created=$BUILD_DATE

ENV LC_ALL=en_US.UTF-8
ENV LANG=en_US.UTF-8

# a few tools for debugging inside the container, and tini
RUN set -xe; \
    echo "Acquire::http {No-Cache=True;};" > /etc/apt/apt.conf.d/no-cache \
    && apt-get -qq update && apt-get install -y --no-install-recommends \
        locales \
        curl \
        procps \
        less \
        bzip2 \
        tini \
    && echo "$LANG UTF-8" > /etc/locale.gen \
    && locale-gen $LANG && update-locale LANG=$LANG \
    && apt-get autoremove -y && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /tmp/*

# the service account and its tree
RUN set -xe; \
      adduser --system --group --uid 10001 $GALAXY_USER \
      && mkdir -p $SERVER_DIR \
      && chown $GALAXY_USER:$GALAXY_USER $ROOT_DIR -R

WORKDIR $ROOT_DIR
# both destinations are relative to the WORKDIR above
COPY --chown=$GALAXY_USER:$GALAXY_USER --from=server_build $ROOT_DIR .
COPY --chown=$GALAXY_USER:$GALAXY_USER --from=client_build $SERVER_DIR/static ./server/static

WORKDIR $SERVER_DIR

# build metadata, shown by the version endpoint
RUN printf '{"git_commit": "%s", "build_date": "%s", "image_tag": "%s"}\n' "$GIT_COMMIT" "$BUILD_DATE" "$IMAGE_TAG" > version.json \
    && chown $GALAXY_USER:$GALAXY_USER version.json

EXPOSE 8080
USER $GALAXY_USER

ENV PATH="$SERVER_DIR/.venv/bin:${PATH}"
ENV GALAXY_CONFIG_CONDA_AUTO_INIT=False

ENTRYPOINT ["tini", "--"]

# default command
CMD ["galaxy"]
