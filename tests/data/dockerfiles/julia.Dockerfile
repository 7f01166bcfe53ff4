# Modeled on: docker-library/julia:1.10/bookworm/Dockerfile (commit 0a822ab3dcdf067d4c5094f70a8074b58b2a6f91)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: env-legacy-form, env-from-env, tab-indented-continuation, comment-line-inside-continuation, lone-backslash-continuation-line, quoted-case-patterns, copy-to-dir-trailing-slash, entrypoint-exec, cmd-exec, comments
#
# The original is generated from a template by a script; do not edit it by hand there.
#

FROM debian:bookworm-slim@sha256:12f2bc40491f9f7b029e375c38f2ecef73006e86ca71ea9321b3cf777df92ba8

RUN set -eux; \
	apt-get update; \
	apt-get install -y --no-install-recommends \
		ca-certificates \
# the download step below needs one of curl, wget or fetch
		curl \
	; \
	rm -rf /var/lib/apt/lists/*

ENV JULIA_PATH /usr/local/julia
ENV PATH $JULIA_PATH/bin:$PATH

# release-signing key (placeholder fingerprint for this test corpus)
ENV JULIA_GPG 0123456789ABCDEF0123456789ABCDEF01234567

# release to install
ENV JULIA_VERSION 1.10.6

RUN set -eux; \
	\
	savedAptMark="$(apt-mark showmanual)"; \
	apt-get update; \
	apt-get install -y --no-install-recommends \
		gnupg \
	; \
	rm -rf /var/lib/apt/lists/*; \
	\
# one tarball per architecture (checksums below are invented for this corpus)
	arch="$(dpkg --print-architecture)"; \
	case "$arch" in \
		'amd64') \
			url='https://julialang-s3.julialang.org/bin/linux/x64/1.10/julia-1.10.6-linux-x86_64.tar.gz'; \
			sha256='99354d383b6b4040a154b10b49b886cc6000bd0ce982ed565538ae8541825153'; \
			;; \
		'arm64') \
			url='https://julialang-s3.julialang.org/bin/linux/aarch64/1.10/julia-1.10.6-linux-aarch64.tar.gz'; \
			sha256='5e06295e3ca3864ff6e9ece79195be815229b5a8cc4f29af744f1fcc3eeb6350'; \
			;; \
		*) \
			echo >&2 "error: no Julia build for architecture $arch"; \
			exit 1; \
			;; \
	esac; \
	\
	curl -fL -o julia.tar.gz.asc "$url.asc"; \
	curl -fL -o julia.tar.gz "$url"; \
	\
	echo "$sha256 *julia.tar.gz" | sha256sum --strict --check -; \
	\
	export GNUPGHOME="$(mktemp -d)"; \
	gpg --batch --keyserver keyserver.ubuntu.com --recv-keys "$JULIA_GPG"; \
	gpg --batch --verify julia.tar.gz.asc julia.tar.gz; \
	rm -rf "$GNUPGHOME" julia.tar.gz.asc; \
	\
	mkdir "$JULIA_PATH"; \
	tar -xzf julia.tar.gz -C "$JULIA_PATH" --strip-components 1; \
	rm julia.tar.gz; \
	\
	apt-mark auto '.*' > /dev/null; \
	[ -z "$savedAptMark" ] || apt-mark manual $savedAptMark; \
	apt-get purge -y --auto-remove -o APT::AutoRemove::RecommendsImportant=false; \
	\
# check that the binary starts
	julia --version

COPY docker-entrypoint.sh /usr/local/bin/
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["julia"]
