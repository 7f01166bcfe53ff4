# Modeled on: nextflow-io/nextflow:docker/Dockerfile (commit 0117224f9a7b4211b857c054c65d39e593472f9c)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: unpinned-from-tag-only, maintainer, env-single-quoted, line-continuation, entrypoint-exec, trailing-whitespace
# DELIBERATELY UNPINNED: the FROM below has a tag but no digest; the converter's pin rule must refuse this file.
FROM openjdk:8-jre-alpine
MAINTAINER Example Maintainer <maintainer@example.org>

# bash, GNU coreutils and curl for the launcher script
RUN apk update && apk add bash && apk add coreutils && apk add curl

# fetch the launcher and let it pull its runtime
RUN curl -fsSL https://www.nextflow.io/releases/v0.26.0/nextflow > /usr/local/bin/nextflow \
  && chmod 755 /usr/local/bin/nextflow \
  && sync \
  && nextflow -download

# make the JVM honour the container's memory limit
ENV NXF_OPTS='-XX:+UnlockExperimentalVMOptions -XX:+UseCGroupMemoryLimitForHeap'

ENTRYPOINT ["nextflow"] 
