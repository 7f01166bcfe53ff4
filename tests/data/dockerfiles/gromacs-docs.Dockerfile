# Modeled on: gromacs/gromacs:docs/docs.dockerfile (commit 2c99c1622d3a563d639c662ea42bbc9c5dbb8f29)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: unpinned-from-in-one-stage, arg-before-from, args-in-from-reference, multi-stage-named, stage-keyword-lowercase-as, env-legacy-form, copy-to-env-path, arg-after-from, arg-empty-string-default, copy-from-stage-variable-source, no-cmd-no-entrypoint, line-continuation, comments
# DELIBERATELY UNPINNED (second stage only): the build stage is pinned, but
# `FROM httpd` has neither tag nor digest; the converter's pin rule must
# refuse the file because of that one stage.
#
# Builds the HTML documentation inside the project's CI image, then serves it
# from a web-server image. Run from the repository root:
#
#     docker build -t gromacs/docs -f docs/docs.dockerfile .
#     docker run --rm -p 8080:80 gromacs/docs
#
# Pick another CI image or tag with --build-arg BASE_IMAGE=... BASE_TAG=...;
# pass build-tool options (e.g. "-j4") with --build-arg BUILD_ARGS=...

ARG BASE_IMAGE=ci-ubuntu-24.04-llvm-19-docs
ARG BASE_TAG=latest
FROM registry.gitlab.com/gromacs/gromacs/$BASE_IMAGE:$BASE_TAG@sha256:aceea073c19740bb2f4da6b7acb5ac5e5158bdad58bdc1da3d2f1ee552432168 as build

# the sources stay in this stage; only the HTML is copied out
ENV SRC_DIR /gromacs-source
COPY . $SRC_DIR

# repeated in the final stage
ENV BUILD_DIR /tmp/gromacs-build

RUN mkdir -p $BUILD_DIR
WORKDIR $BUILD_DIR

# Sphinx "todo" output on or off
ARG TODOS=1
# --build-arg TYPE=...
ARG TYPE=Release
# free-form CMake arguments
ARG CMAKE_ARGS=""
RUN . /root/venv/py3.9/bin/activate && \
    cmake $SRC_DIR \
        -DCMAKE_INSTALL_PREFIX=/usr/local/gromacs \
        -DGMXAPI=ON \
        -DGMX_THREAD_MPI=ON \
        -DCMAKE_BUILD_TYPE=$TYPE \
        -DSPHINX_CONFIG_OVERRIDES="-Dtodo_include_todos=$TODOS" \
        $CMAKE_ARGS

# passed after `--` to the native build tool
ARG BUILD_ARGS=""

RUN cmake --build . -- $BUILD_ARGS

RUN cmake --build . --target webpage -- $BUILD_ARGS


FROM httpd

ENV BUILD_DIR /tmp/gromacs-build
COPY --from=build $BUILD_DIR/docs/html/ /usr/local/apache2/htdocs/
