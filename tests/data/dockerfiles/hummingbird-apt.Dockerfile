# Modeled on: StanfordBioinformatics/Hummingbird:Dockerfile (commit 21057f6b3b086b13d2f93c4bb9c4aea8fe5cac74)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: label-quoted, env-legacy-space-form, apt-get-install-continued, copy-dir-contents-trailing-slash, workdir-after-copy, entrypoint-exec, built-from-registry
# The task image of a resource profiler for genomics pipelines: GNU time from apt,
# the task wrapper scripts, the wrapper as entrypoint. Cut down: the package list
# (git and curl), and the cloud CLI installers and seqtk's git build, which fetch
# from hosts other than the distribution's mirror.
FROM broadinstitute/gatk:4.1.4.0@sha256:c335b099be56a17cd259d7dcc1e6e45c5b0eedb3f35743e380924497d5f7d86e

LABEL gatk.version="4.1.4.0"

ENV DEBIAN_FRONTEND noninteractive

RUN apt-get update && apt-get install -y \
    time

COPY scripts/ /usr/local/bin/
WORKDIR /tmp

ENTRYPOINT ["/usr/local/bin/fetch_and_run.sh"]
