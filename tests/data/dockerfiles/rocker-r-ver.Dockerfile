# Modeled on: rocker-org/rocker-versioned2:dockerfiles/r-ver_4.3.1.Dockerfile (commit 4d9a4b7123ba64e3ed5773a8849def1bf1b8e880)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: label, label-multi-key, line-continuation, copy-after-run, copy-dir, cmd-exec
FROM ubuntu:jammy@sha256:8ce85481ad987398b8ffc57b3d0f1901c4296b5d226116cc4be7c01b7787d24e

LABEL org.opencontainers.image.licenses="GPL-2.0-or-later" \
      org.opencontainers.image.source="https://github.com/rocker-org/rocker-versioned2" \
      org.opencontainers.image.vendor="Rocker Project"

ENV R_VERSION=4.3.1
ENV R_HOME=/usr/local/lib/R
ENV TZ=Etc/UTC

COPY scripts/install_R_source.sh /rocker_scripts/install_R_source.sh

RUN /rocker_scripts/install_R_source.sh

ENV CRAN=https://p3m.dev/cran/__linux__/jammy/2023-10-30
ENV LANG=en_US.UTF-8

COPY scripts /rocker_scripts

RUN /rocker_scripts/setup_R.sh

CMD ["R"]
