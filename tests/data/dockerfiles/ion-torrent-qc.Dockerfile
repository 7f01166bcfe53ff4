# Modeled on: amafanasyev/qc-pipeline-docker:Dockerfile (commit c8242a27ba2d2e56fa56842b81e2f98dac19f2ad)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: maintainer, env-multi-pair, env-from-env, add-archive, add-archive-name-from-env, add-archive-tar-bz2, relative-workdir, trailing-whitespace, space-after-backslash, add-local-file, copy-after-run, volume, volume-json-array, entrypoint-exec, line-continuation, comments
FROM ubuntu:14.04@sha256:9d0765f746592c22b1a3e71cac930ca31562f7ef7eed81078797818dacc6f9df
MAINTAINER Example Maintainer <maintainer@example.org>

# build dependencies
RUN apt-get update && apt-get install -y \
    cmake \
    default-jre \
    g++ \
    libbz2-dev \
    libncurses-dev \
    zlib1g-dev


# versions and paths used below
ENV BUILD_ROOT_DIR=/opt/tsvc-tmp/ \
    TVC_VERSION=tvc-4.4.3 \
    ARMADILLO_VERSION=armadillo-4.300.8 \
    SAMTOOLS_VERSION=samtools-0.1.19 \
    HTSLIB_VERSION=htslib-1.1 \
    DISTRIBUTION_CODENAME=ubuntu_14.04
ENV TVC_SOURCE_DIR=$BUILD_ROOT_DIR/$TVC_VERSION
ENV TVC_INSTALL_DIR=$BUILD_ROOT_DIR/$TVC_VERSION-$DISTRIBUTION_CODENAME-binary
ENV TVC_ROOT_DIR=/opt/$TVC_VERSION


RUN mkdir $BUILD_ROOT_DIR \
    && mkdir $TVC_ROOT_DIR


# the installed binaries on PATH
ENV PATH=$TVC_ROOT_DIR/bin:$PATH

# local source archives, unpacked by ADD
ADD $TVC_VERSION.tar.gz $BUILD_ROOT_DIR
ADD $ARMADILLO_VERSION.tar.gz $BUILD_ROOT_DIR
ADD $SAMTOOLS_VERSION.tar.bz2 $BUILD_ROOT_DIR
ADD $HTSLIB_VERSION.tar.gz $BUILD_ROOT_DIR

# linear algebra library
WORKDIR $BUILD_ROOT_DIR/$ARMADILLO_VERSION 
RUN cmake . && make -j4


# old samtools, needed by the caller
WORKDIR $BUILD_ROOT_DIR/$SAMTOOLS_VERSION
RUN make -j4


WORKDIR $BUILD_ROOT_DIR/$HTSLIB_VERSION
RUN make -j4


# out-of-tree build: the second WORKDIR is relative to the first
WORKDIR $BUILD_ROOT_DIR
RUN mkdir $TVC_VERSION-build 
WORKDIR $TVC_VERSION-build 
RUN cmake $TVC_SOURCE_DIR -DCMAKE_INSTALL_PREFIX:PATH=$TVC_INSTALL_DIR -DCMAKE_BUILD_TYPE:STRING=RelWithDebInfo 
RUN make -j4 install


# gather the binaries in $TVC_ROOT_DIR
WORKDIR $BUILD_ROOT_DIR
RUN cp $SAMTOOLS_VERSION/samtools $TVC_INSTALL_DIR/bin/ \ 
    && cp $HTSLIB_VERSION/tabix $TVC_INSTALL_DIR/bin/ \
    && cp $HTSLIB_VERSION/bgzip $TVC_INSTALL_DIR/bin/ \
    && cp -r $TVC_INSTALL_DIR/* $TVC_ROOT_DIR 

# a newer samtools, unpacked straight into /opt
ADD samtools-1.2.tar.bz2 /opt/

WORKDIR /opt/samtools-1.2

RUN make
RUN make prefix=/opt/samtools-1.2 install

ENV PATH /opt/samtools-1.2/bin:$PATH

# a Java helper, unpacked into a folder of its own
ADD sequtils-0.2.tar.bz2 /opt/sequtils-0.2

WORKDIR /opt/sequtils-0.2

# a small wrapper script for it
RUN printf '%s\n' '#!/bin/bash' 'java -jar /opt/sequtils-0.2/sequtils.jar "$@"' > sequtils.sh \
	&& chmod +x sequtils.sh

ENV PATH /opt/sequtils-0.2:$PATH

ADD qc_pipeline.py /opt/

# drop the build trees and the compilers
WORKDIR $BUILD_ROOT_DIR
RUN rm -r * \
    && apt-get --purge -y remove cmake g++ \
    && apt-get -y clean \
    && apt-get -y autoremove


# input and output locations
RUN mkdir /mnt/reference/ \
    && mkdir /mnt/input_bam/ \
    && mkdir /mnt/pipeline-results/
VOLUME ["/mnt/pipeline-results/"]

ENTRYPOINT ["/opt/qc_pipeline.py"]
