# Modeled on: mamba-org/micromamba-docker:Dockerfile (commit 020d51cc61fbc27b45e7040e6c85656cef526439)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, from-platform, multi-stage-named, arg-after-from, shell, shell-custom-wrapper, copy-from-stage, quoted-paths, env-from-arg, copy-after-run, entrypoint-exec, cmd-exec, line-continuation, comments

ARG BASE_IMAGE=debian:bookworm-slim@sha256:12f2bc40491f9f7b029e375c38f2ecef73006e86ca71ea9321b3cf777df92ba8

# Two stages so that curl and TLS tooling stay out of the final image.
FROM --platform=$BUILDPLATFORM $BASE_IMAGE AS fetcher
ARG VERSION=1.5.0

# hadolint ignore=DL3018
RUN if grep -q '^ID=alpine$' /etc/os-release; then \
       apk add --no-cache bash bzip2 curl; \
    else \
       apt-get update && apt-get install -y --no-install-recommends \
         bzip2 ca-certificates curl \
       && rm -rf /var/lib/apt/lists/*; \
    fi
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG TARGETARCH
RUN case "$TARGETARCH" in \
      amd64) ARCH=64 ;; \
      arm64) ARCH=aarch64 ;; \
      ppc64le) ARCH=ppc64le ;; \
    esac; \
    curl -L "https://micro.mamba.pm/api/micromamba/linux-${ARCH}/${VERSION}" \
      | tar -xj -C /tmp bin/micromamba

FROM $BASE_IMAGE

ENV LANG=C.UTF-8 LC_ALL=C.UTF-8
ENV ENV_NAME="base"
ENV MAMBA_ROOT_PREFIX="/opt/conda"
ENV MAMBA_EXE="/bin/micromamba"

COPY --from=fetcher /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=fetcher /tmp/bin/micromamba "$MAMBA_EXE"

# hadolint ignore=DL3018
RUN { grep -q '^ID=alpine$' /etc/os-release && apk add --no-cache bash; } || true

ARG MAMBA_USER=mambauser
ARG MAMBA_USER_ID=57439
ARG MAMBA_USER_GID=57439
ENV MAMBA_USER=$MAMBA_USER
ENV MAMBA_USER_ID=$MAMBA_USER_ID
ENV MAMBA_USER_GID=$MAMBA_USER_GID

COPY _dockerfile_initialize_user_accounts.sh /usr/local/bin/_dockerfile_initialize_user_accounts.sh
COPY _dockerfile_setup_root_prefix.sh /usr/local/bin/_dockerfile_setup_root_prefix.sh

RUN /usr/local/bin/_dockerfile_initialize_user_accounts.sh && \
    /usr/local/bin/_dockerfile_setup_root_prefix.sh

USER $MAMBA_USER

WORKDIR /tmp

# wrapper that activates the environment for `docker run` commands
COPY _entrypoint.sh /usr/local/bin/_entrypoint.sh
COPY _activate_current_env.sh /usr/local/bin/_activate_current_env.sh
ENTRYPOINT ["/usr/local/bin/_entrypoint.sh"]

CMD ["/bin/bash"]

# RUN lines of derived images go through this wrapper as their shell
COPY _dockerfile_shell.sh /usr/local/bin/_dockerfile_shell.sh
SHELL ["/usr/local/bin/_dockerfile_shell.sh"]
