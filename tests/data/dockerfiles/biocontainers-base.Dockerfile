# Modeled on: BioContainers/containers:biocontainers/1.0.0/Dockerfile (commit 2566891d43e256ad5898165cc8b82cc534a33803)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: label, label-many-single, maintainer, env-legacy-form, line-continuation, whitespace-before-backslash, tab-indented-continuation, user-then-run, env-self-append, volume, volume-json-array, commented-out-cmd, comments-banner
# Base image
FROM ubuntu:16.04@sha256:3887c542834c507c75dbfc2666038f2ed31e056401cbcfbf5a91951eda3f07e1

################## METADATA ######################

LABEL base_image="ubuntu:16.04"
LABEL version="5"
LABEL software="biocontainers"
LABEL software.version="1.0.0"
LABEL about.summary="Base image for bioinformatics tool containers"
LABEL about.home="http://biocontainers.pro"
LABEL about.license="SPDX:Apache-2.0"
LABEL about.tags="Genomics,Proteomics,Transcriptomics,General,Metabolomics"

################## MAINTAINER ######################
MAINTAINER Example Maintainer <maintainer@example.org>

ENV DEBIAN_FRONTEND noninteractive

RUN apt-get clean all && \
    apt-get update && \
    apt-get upgrade -y && \
    apt-get install -y  \
        build-essential \
        cmake           \
        curl            \
        git             \
        wget            \
	python-dev      \
        bzip2           \
        zlib1g-dev &&   \
        apt-get clean && \
        apt-get purge && \
        rm -rf /var/lib/apt/lists/* /tmp/* /var/tmp/*

RUN echo 'export PATH=/opt/conda/bin:$PATH' > /etc/profile.d/conda.sh && \
    wget --quiet https://repo.continuum.io/miniconda/Miniconda2-4.0.5-Linux-x86_64.sh -O ~/miniconda.sh && \
    /bin/bash ~/miniconda.sh -b -p /opt/conda && \
    rm ~/miniconda.sh

RUN mkdir /data /config

# the unprivileged user owns the data and config folders
RUN groupadd fuse && \
    useradd --create-home --shell /bin/bash --user-group --uid 1000 --groups sudo,fuse biodocker && \
    chown biodocker:biodocker /data && \
    chown biodocker:biodocker /config

# everyone may write to the conda tree
RUN chmod 777 -R /opt/conda/

# switch user
USER biodocker

ENV PATH=$PATH:/opt/conda/bin
ENV PATH=$PATH:/home/biodocker/bin
ENV HOME=/home/biodocker

RUN mkdir /home/biodocker/bin

RUN conda config --add channels r
RUN conda config --add channels bioconda

RUN conda upgrade conda

VOLUME ["/data", "/config"]

# a derived image sets its own command, e.g. with 'CMD []'
# CMD ["/bin/bash"]

WORKDIR /data
