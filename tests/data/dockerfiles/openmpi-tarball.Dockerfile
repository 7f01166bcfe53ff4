# Modeled on: ITAM-DS/analisis-numerico-computo-cientifico:C/extensiones_a_C/MPI/openMPI/Ubuntu_Dockerfile/Dockerfile (commit 5f26f7275407adb46bc1991da866d038e0ca38af)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: add-archive, tab-indented-continuation, user-then-run, run-trailing-shell-comment, env-quoted-value, env-self-append, no-final-newline, comments
# Course image: an OpenMPI release unpacked from a local tarball and built
# as an unprivileged user with sudo.

FROM ubuntu:14.04@sha256:9d0765f746592c22b1a3e71cac930ca31562f7ef7eed81078797818dacc6f9df
RUN apt-get update -y && apt-get install -y build-essential \
	nano \
	man \
	openssh-server
RUN groupadd mpi_user
RUN useradd mpi_user -g mpi_user -m -s /bin/bash
ADD openmpi-2.0.2.tar.gz /opt/
RUN cd /opt && chown -hR mpi_user:mpi_user openmpi-2.0.2
RUN mkdir -p /var/run/sshd
RUN echo "mpi_user ALL=(ALL:ALL) NOPASSWD:ALL" | (EDITOR="tee -a" visudo)
RUN echo "mpi_user:mpi" | chpasswd
USER mpi_user
RUN cd /opt/openmpi-2.0.2 && sudo ./configure --prefix=/opt/openmpi-2.0.2 -with-sge && sudo make all install ### built through sudo
ENV PATH="/opt/openmpi-2.0.2/bin:$PATH"
ENV LD_LIBRARY_PATH="/opt/openmpi-2.0.2/lib:LD_LIBRARY_PATH"