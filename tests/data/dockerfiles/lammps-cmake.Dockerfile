# Modeled on: converged-computing/lammps-time:Dockerfile.cmake (commit 8cabf19f374dcaacb194c0258917b6d757c23b93)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, lowercase-arg-in-from-tag, env-from-arg, arg-after-from, line-continuation, space-after-backslash, workdir-trailing-slash, expose, no-cmd-no-entrypoint
ARG tag=jammy
FROM ubuntu:${tag}@sha256:8ce85481ad987398b8ffc57b3d0f1901c4296b5d226116cc4be7c01b7787d24e
ENV DEBIAN_FRONTEND=noninteractive
ARG LAMMPS_VERSION=develop
ENV LAMMPS_VERSION=${LAMMPS_VERSION}
RUN apt-get update && \
    apt-get install -y fftw3-dev fftw3 libfabric-dev libfabric1 \
        cmake git g++ \
        mpich

WORKDIR /opt/
RUN git clone --depth 1 --branch ${LAMMPS_VERSION} https://github.com/lammps/lammps.git /opt/lammps && \
    cd /opt/lammps && \
    mkdir build && \
    cd build && \
    . /etc/profile && \ 
    cmake ../cmake -DCMAKE_INSTALL_PREFIX:PATH=/usr -DPKG_REAXFF=yes -DBUILD_MPI=yes -DPKG_OPT=yes -DFFT=FFTW3 -DCMAKE_PREFIX_PATH=/usr/lib/mpich && \
    make && \
    make install

EXPOSE 22
WORKDIR /opt/lammps/examples/reaxff/HNS
