# Modeled on: ucphhpc/docker-migrid:Dockerfile (commit 06e901c5ef64e004f7786759dcd71626a9434a2e)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, arg-quoted-value, arg-glob-like-value, multi-stage-named, stage-keyword-lowercase-as, arg-redeclared-in-stage, continuation-into-comment-then-instruction-word, comment-line-inside-continuation, env-multi-pair, env-quoted-values, env-from-env, user-then-run, add-local-dir, add-chown, add-url, arg-in-add-url, entrypoint-exec, expose-multi-port, cmd-exec, line-continuation, comments
# Default build arguments; override them with --build-arg KEY=VAL, or through
# an .env file read by docker-compose. A stage that uses one must declare it
# again after its FROM.

ARG BUILD_TYPE=basic
ARG DOMAIN=migrid.test
ARG WILDCARD_DOMAIN=*.migrid.test
ARG PUBLIC_DOMAIN=www.migrid.test
ARG SID_DOMAIN=sid.migrid.test
ARG IO_DOMAIN=io.migrid.test
ARG PUBLIC_HTTP_PORT=80
ARG PUBLIC_HTTPS_PORT=444
ARG SID_HTTPS_PORT=448
ARG SFTP_PORT=2222
ARG MIG_SVN_REPO=https://svn.code.sf.net/p/migrid/code/trunk
ARG MIG_SVN_REV=5250
ARG MIG_GIT_REPO=https://github.com/ucphhpc/migrid-sync.git
ARG MIG_GIT_BRANCH=master
ARG EMULATE_FQDN=migrid.org
ARG ENABLE_SFTP=True
ARG ENABLE_JUPYTER=True
ARG WITH_PY3=no
ARG WITH_GIT=no

# Jupyter
ARG JUPYTER_SERVICES=""
ARG JUPYTER_SERVICES_DESC="{}"

FROM centos:7@sha256:fe4de104d715c95bf9b5237b09c2522798cbb4253125e05059cad53fb254fe18 as init
ARG BUILD_TYPE
ARG DOMAIN
ARG PUBLIC_DOMAIN
ARG SID_DOMAIN
ARG PUBLIC_HTTP_PORT
ARG PUBLIC_HTTPS_PORT
ARG SID_HTTPS_PORT
ARG WITH_PY3
#ARG WITH_GIT

RUN echo "Build type: $BUILD_TYPE"
RUN echo "Domains: $DOMAIN" "${PUBLIC_DOMAIN}" "${SID_DOMAIN}"
RUN echo "Ports: " "${PUBLIC_HTTP_PORT} ${PUBLIC_HTTPS_PORT}" \
    "${SID_HTTPS_PORT}" \
#RUN echo "git checkout: $WITH_GIT"
RUN echo "Python 3 support: $WITH_PY3"

FROM init as base
ARG DOMAIN
ARG WILDCARD_DOMAIN
ARG WITH_PY3

WORKDIR /tmp

# the base image's yum config skips documentation files; keep them
RUN sed -i '/nodocs/d' /etc/yum.conf

RUN yum update -y \
    && yum install -y epel-release \
    && yum clean all \
    && rm -fr /var/cache/yum

RUN yum update -y \
    && yum install -y \
    gcc \
    httpd \
    mod_ssl \
    mod_wsgi \
    openssh-server \
    # both version-control clients, to fetch the code either way
    svn \
    git \
    rsync \
    python-pip \
    wget

RUN if [ "${WITH_PY3}" = "yes" ]; then \
      echo "adding python 3 packages" \
      && yum install -y \
      python3-pip \
      python3-devel \
      python3-mod_wsgi; \
    else \
      echo "python 2 only"; \
    fi;

# a UTF-8 locale, so the WSGI application sees a UTF-8 filesystem encoding
ENV LANG='en_US.UTF-8' LANGUAGE='en_US:en' LC_ALL='en_US.UTF-8'

# the service account
ENV USER=mig
ENV UID=1000
ENV GID=1000

RUN groupadd -g $GID $USER
RUN useradd -u $UID -g $GID -ms /bin/bash $USER

ENV MIG_ROOT=/home/$USER
ENV WEB_DIR=/etc/httpd
ENV CERT_DIR=$WEB_DIR/MiG-certificates

USER root

RUN mkdir -p $CERT_DIR/MiG/${WILDCARD_DOMAIN} \
    && chown $USER:$USER $CERT_DIR \
    && chmod 775 $CERT_DIR

# self-signed test certificates
FROM base as setup_security
ARG DOMAIN
ARG WILDCARD_DOMAIN

RUN curl https://ssl-config.mozilla.org/ffdhe4096.txt -o $CERT_DIR/dhparams.pem

# test CA
RUN openssl genrsa -out ca.key 2048 \
    && openssl req -x509 -new -nodes -key ca.key -sha256 -days 1024 \
    -subj "/C=DK/O=MiGrid-Test/CN=${WILDCARD_DOMAIN}" -out ca.pem

# server key and certificate
RUN openssl genrsa -out server.key 2048 \
    && openssl req -new -key server.key -out server.csr \
    -subj "/C=DK/O=MiGrid-Test/CN=${WILDCARD_DOMAIN}" \
    && openssl x509 -req -days 365 -in server.csr -signkey server.key -out server.crt

RUN cat server.key server.crt > combined.pem \
    && mv server.crt server.key combined.pem $CERT_DIR/MiG/${WILDCARD_DOMAIN}/ \
    && mv ca.pem $CERT_DIR/MiG/${WILDCARD_DOMAIN}/cacert.pem

WORKDIR $CERT_DIR

RUN ln -s MiG/${WILDCARD_DOMAIN}/server.crt server.crt \
    && ln -s MiG/${WILDCARD_DOMAIN}/server.key server.key \
    && ln -s MiG/${WILDCARD_DOMAIN}/combined.pem combined.pem \
    && for domain in "${DOMAIN}" "${WILDCARD_DOMAIN}"; do \
           [ -L "$domain" ] || ln -s MiG/${WILDCARD_DOMAIN} $domain; \
       done

WORKDIR $MIG_ROOT
USER $USER

RUN mkdir -p MiG-certificates \
    && cd MiG-certificates \
    && ln -s $CERT_DIR/MiG/${WILDCARD_DOMAIN}/cacert.pem cacert.pem \
    && ln -s $CERT_DIR/dhparams.pem dhparams.pem


FROM setup_security as mig_dependencies
ARG WITH_PY3

# user-level Python packages for the daemons
ENV PATH=$PATH:/home/$USER/.local/bin
RUN pip install --user python-openid
RUN pip install --user \
    watchdog \
    scandir
RUN if [ "$WITH_PY3" = "yes" ]; then \
      pip3 install --user \
      watchdog; \
    fi;
RUN pip install --user \
    pyftpdlib

FROM mig_dependencies as download_mig
ARG MIG_SVN_REPO
ARG MIG_SVN_REV
ARG WITH_GIT
ARG MIG_GIT_REPO
ARG MIG_GIT_BRANCH

# git refuses a non-empty target folder, hence the detour
RUN if [ "$WITH_GIT" = "yes" ]; then \
      git clone --branch ${MIG_GIT_BRANCH} ${MIG_GIT_REPO} migrid.git && \
        rsync -a migrid.git/ ./ && \
        rm -rf migrid.git/ ; \
    else \
      svn checkout -r ${MIG_SVN_REV} ${MIG_SVN_REPO} . ; \
    fi;

ADD --chown=$USER:$USER mig $MIG_ROOT/

FROM download_mig as install_mig
ARG DOMAIN
ARG PUBLIC_DOMAIN
ARG SID_DOMAIN
ARG IO_DOMAIN
ARG PUBLIC_HTTP_PORT
ARG PUBLIC_HTTPS_PORT
ARG SID_HTTPS_PORT
ARG SFTP_PORT
ARG ENABLE_SFTP
ARG ENABLE_JUPYTER
ARG JUPYTER_SERVICES
ARG JUPYTER_SERVICES_DESC

ENV PYTHONPATH=${MIG_ROOT}
# also for login sessions of the service account
RUN echo "PYTHONPATH=${MIG_ROOT}" >> ~/.bash_profile \
    && echo "export PYTHONPATH" >> ~/.bash_profile

WORKDIR $MIG_ROOT/mig/install

RUN echo "Jupyter services: $JUPYTER_SERVICES"

RUN ./generateconfs.py --source=. \
    --destination=generated-confs \
#    --destination_suffix="_svn$(svnversion -n ~/)" \
    --base_fqdn=$DOMAIN \
    --public_fqdn=${PUBLIC_DOMAIN} \
    --sid_fqdn=${SID_DOMAIN} \
    --io_fqdn=${IO_DOMAIN} \
    --public_http_port=${PUBLIC_HTTP_PORT} --public_https_port=${PUBLIC_HTTPS_PORT} \
    --sid_port=${SID_HTTPS_PORT} \
    --sftp_port=${SFTP_PORT} \
    --enable_sftp=${ENABLE_SFTP} \
    --enable_jupyter=${ENABLE_JUPYTER} \
    --jupyter_services=${JUPYTER_SERVICES} \
    "--jupyter_services_desc=${JUPYTER_SERVICES_DESC}" \
    --listen_clause='#Listen' \
    --distro=centos

RUN cp generated-confs/MiGserver.conf $MIG_ROOT/mig/server/ \
    && cp generated-confs/static-skin.css $MIG_ROOT/mig/images/


FROM install_mig as setup_mig_configs
ARG DOMAIN
ARG EMULATE_FQDN

RUN sed -i -e 's/loglevel = info/loglevel = debug/g' $MIG_ROOT/mig/server/MiGserver.conf

USER root

# web server configuration
RUN cp generated-confs/MiG.conf $WEB_DIR/conf.d/ \
    && cp generated-confs/httpd.conf $WEB_DIR/ \
    && cp generated-confs/envvars /etc/sysconfig/httpd

# daily clean-up jobs
RUN chmod 755 generated-confs/{migstateclean,migerrors} \
    && cp generated-confs/{migstateclean,migerrors} /etc/cron.daily/

# point the front page at the development domain
RUN sed -i -e "s/${EMULATE_FQDN}/$DOMAIN/g" $MIG_ROOT/state/wwwpublic/index.html

WORKDIR $MIG_ROOT

# trust the generated certificate
RUN update-ca-trust force-enable \
    && cp $CERT_DIR/combined.pem /etc/pki/ca-trust/source/anchors/ \
    && update-ca-trust extract

FROM setup_mig_configs as start_mig
ARG DOMAIN

# an init process that reaps orphans
ARG TINI_VERSION=v0.18.0
ADD https://github.com/krallin/tini/releases/download/${TINI_VERSION}/tini /tini
RUN chmod +x /tini
ENTRYPOINT ["/tini", "--"]

ADD docker-entry.sh /app/docker-entry.sh
ADD migrid-httpd.env /app/migrid-httpd.env
RUN chown $USER:$USER /app/docker-entry.sh \
    && chmod +x /app/docker-entry.sh

USER root
WORKDIR /app

# informational only; keep in step with the ports the services listen on
EXPOSE 80 443 444 448 2222

CMD ["bash", "/app/docker-entry.sh"]
