# Modeled on: asaramet/openfoam-2.4.x:Dockerfile (commit 152240827763fd29e9ca0b01f1f5fb096ad433f9)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-after-from, arg-quoted-value, arg-from-arg, workdir-from-arg, tab-indented-continuation, tab-after-instruction, trailing-whitespace, bash-c-multiline-string, no-final-newline, no-cmd-no-entrypoint, comments
FROM debian:8.11-slim@sha256:812d84dac882e1fd175623e653b1dfd69b6e199c9c6d2b5efbb6658c7dc879f2

# compilers, MPI and build tools
RUN apt update \
		&& apt install gcc g++ flex libz-dev libboost-all-dev --force-yes -y \
		&& apt install libbison-dev openmpi-bin libopenmpi-dev cmake git wget --force-yes -y

# install location, plus an alias that loads the environment
ARG VERSION="2.4.x"
ARG TARGET_DIR="/opt/openfoam/${VERSION}"
RUN echo "alias foamInit='source $TARGET_DIR/OpenFOAM-${VERSION}/etc/bashrc'" >> $HOME/.bashrc

# sources and the third-party bundle, leaving out ParaView and CGAL
WORKDIR ${TARGET_DIR}
RUN git clone https://github.com/OpenFOAM/OpenFOAM-2.4.x.git \
		&& wget http://download.sourceforge.net/project/foam/foam/2.4.0/ThirdParty-2.4.0.tgz \
		&& tar zxf ThirdParty-2.4.0.tgz --exclude=ParaView* --exclude=openmpi* --exclude=CGAL*\
		&& rm ThirdParty-2.4.0.tgz && mv ThirdParty-2.4.0 ThirdParty-${VERSION}

WORKDIR $TARGET_DIR/OpenFOAM-${VERSION}
RUN sed -i s:'foamInstall=$HOME/$WM_PROJECT':"foamInstall=$TARGET_DIR":g etc/bashrc 

RUN bash -c "source $TARGET_DIR/OpenFOAM-${VERSION}/etc/bashrc \
		&& ./Allwmake 2>&1 | tee Allwmake.log"

# swak4Foam on top
RUN git clone https://github.com/Unofficial-Extend-Project-Mirror/openfoam-extend-Breeder2.0-libraries-swak4Foam.git ${TARGET_DIR}/swak4Foam
WORKDIR ${TARGET_DIR}/swak4Foam

RUN echo 'SWAK4FOAM_SRC="/opt/openfoam/${VERSION}/swak4Foam/Libraries"' >> ${TARGET_DIR}/OpenFOAM-${VERSION}/etc/bashrc

## its build requirements, then the libraries
RUN	bash -c "source $TARGET_DIR/OpenFOAM-${VERSION}/etc/bashrc \
		&& ./maintainanceScripts/compileRequirements.sh \
		&& export WM_NCOMPPROCS=4 \
		&& ./Allwmake -j 4"

## move the per-user build output into the shared tree
RUN mv /root/OpenFOAM/-2.4.x/platforms/linux64GccDPOpt/lib/* /opt/openfoam/2.4.x/OpenFOAM-2.4.x/platforms/linux64GccDPOpt/lib -v \
		&& rm -rfv /root/OpenFOAM

# users mount their cases here
WORKDIR /OpenFOAM