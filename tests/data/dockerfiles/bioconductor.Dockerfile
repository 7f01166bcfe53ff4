# Modeled on: Bioconductor/bioconductor_docker:Dockerfile (commit 12d0fc375f8420a29276ef6c4ffbb1fd083fd53e)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, arg-composed-from-with-digest, multi-stage-named, from-stage-by-arg, env-from-arg-with-default, arg-from-arg, add-local-file, copy-from-stage-whole-root, label, arg-redeclared-in-stage, cmd-exec, line-continuation, comments
# suggested image name: bioconductor/bioconductor_docker:devel
ARG BASE_IMAGE=rocker/rstudio
ARG arm64_tag=4.3.1
ARG amd64_tag=4.3.1
FROM ${BASE_IMAGE}:${arm64_tag}@sha256:7ff330db1a3040df96f8656584b833a0adce08353c26ae06c10dddcbf3860c89 AS base-arm64
# carried into the final image
ENV BIOCONDUCTOR_USE_CONTAINER_REPOSITORY=FALSE

FROM ${BASE_IMAGE}:${amd64_tag}@sha256:7ff330db1a3040df96f8656584b833a0adce08353c26ae06c10dddcbf3860c89 AS base-amd64
# carried into the final image
ENV BIOCONDUCTOR_USE_CONTAINER_REPOSITORY=TRUE

# set by the builder when --platform is given
ARG TARGETARCH
ENV TARGETARCH=${TARGETARCH:-amd64}
FROM base-$TARGETARCH AS base

## release of the project this image tracks
ARG BIOCONDUCTOR_VERSION=3.18

## bump the patch number on every change to this file
ARG BIOCONDUCTOR_PATCH=22

ARG BIOCONDUCTOR_DOCKER_VERSION=${BIOCONDUCTOR_VERSION}.${BIOCONDUCTOR_PATCH}

## build-time installs must not come from the binary repository
ENV BIOCONDUCTOR_USE_CONTAINER_REPOSITORY=FALSE

# system libraries, the site library path and the build-machine variables
ADD bioc_scripts/install_bioc_sysdeps.sh /tmp/
RUN bash /tmp/install_bioc_sysdeps.sh $BIOCONDUCTOR_VERSION \
    && echo "R_LIBS=/usr/local/lib/R/host-site-library:\${R_LIBS}" > /usr/local/lib/R/etc/Renviron.site \
    && curl -OL http://bioconductor.org/checkResults/devel/bioc-LATEST/Renviron.bioc \
    && grep -o '^[^#]*' Renviron.bioc | sed 's/export //g' >> /etc/environment \
    && cat Renviron.bioc >> /usr/local/lib/R/etc/Renviron.site \
    && echo BIOCONDUCTOR_VERSION=${BIOCONDUCTOR_VERSION} >> /usr/local/lib/R/etc/Renviron.site \
    && echo BIOCONDUCTOR_DOCKER_VERSION=${BIOCONDUCTOR_DOCKER_VERSION} >> /usr/local/lib/R/etc/Renviron.site \
    && echo 'LIBSBML_CFLAGS="-I/usr/include"' >> /usr/local/lib/R/etc/Renviron.site \
    && rm -rf Renviron.bioc

ARG TARGETARCH
ENV TARGETARCH=${TARGETARCH:-amd64}

FROM base-$TARGETARCH AS final
COPY --from=base / /

LABEL name="bioconductor/bioconductor_docker" \
      version=$BIOCONDUCTOR_DOCKER_VERSION \
      url="https://github.com/Bioconductor/bioconductor_docker" \
      vendor="Bioconductor Project" \
      license="Artistic-2.0"

# ARGs end with their stage: declare them again here
ARG BIOCONDUCTOR_VERSION=3.18
ARG BIOCONDUCTOR_PATCH=22
ARG BIOCONDUCTOR_DOCKER_VERSION=${BIOCONDUCTOR_VERSION}.${BIOCONDUCTOR_PATCH}

# set by the builder when --platform is given
ARG TARGETPLATFORM
ENV TARGETPLATFORM=${TARGETPLATFORM:-linux/amd64}

ENV PLATFORM=${TARGETPLATFORM}
ENV LIBSBML_CFLAGS="-I/usr/include"
ENV LIBSBML_LIBS="-lsbml"
ENV BIOCONDUCTOR_DOCKER_VERSION=$BIOCONDUCTOR_DOCKER_VERSION
ENV BIOCONDUCTOR_VERSION=$BIOCONDUCTOR_VERSION
ENV BIOCONDUCTOR_NAME="bioconductor_docker"

# s6-overlay's init
CMD ["/init"]
