# syntax=docker/dockerfile:1
# The thalweg image: the `thalweg` command (flows, `thalweg cluster`) on a slim Python.
#
#   docker build -t thalweg:0.1.0 .                                  # Python 3.11, all extras
#   docker build --build-arg PYTHON_VERSION=3.12 -t thalweg:0.1.0-py3.12 .
#   docker run --rm thalweg:0.1.0 run orders                         # the flagship flow
#
# BUILDER_BASE and RUNTIME_BASE name the two base images (the official Python images by
# default); deploy/image/build_local.py builds the image on a machine without a registry
# from Debian bases it makes itself.
#
# Two stages: `builder` (the full Python image, with a C compiler and OpenSSL's headers)
# compiles the package's optional C extensions into a wheel and collects every dependency
# as a wheel; `runtime` (the slim image: no compiler) installs only those wheels, without
# the index, into /opt/venv and runs as an unprivileged user. docs/deploy.md describes it
# and the Kubernetes manifests that run it (deploy/kubernetes/).
ARG PYTHON_VERSION=3.11
ARG DEBIAN_RELEASE=bookworm
ARG BUILDER_BASE=python:${PYTHON_VERSION}-${DEBIAN_RELEASE}
ARG RUNTIME_BASE=python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE}

FROM ${BUILDER_BASE} AS builder
# Extras of the package the image carries (pyproject.toml): `all` is otlp, files, proto.
ARG THALWEG_EXTRAS=all
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY . /src
# The package with its five C extensions compiled (each is optional: a failed compile
# falls back quietly, so the runtime stage checks that the compiled ones import), then
# every dependency as a wheel (built here if the index has only a source distribution).
RUN python -m pip wheel --no-deps --wheel-dir /wheels /src \
    && python -m pip wheel --wheel-dir /wheels --find-links /wheels "thalweg-bytewax[${THALWEG_EXTRAS}]"

FROM ${RUNTIME_BASE} AS runtime
ARG RUNTIME_BASE
ARG THALWEG_EXTRAS=all
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="thalweg-bytewax" \
      org.opencontainers.image.description="Kafka topics and files into trustworthy tables, on Bytewax" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${RUNTIME_BASE}"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
# Only the builder's wheels, never the index: what runs is what the builder built. Then
# the compiled paths must import (not their pure-Python fallbacks, which only log a
# warning), and an unprivileged user owns the working directory.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install --no-index --find-links /wheels "thalweg-bytewax[${THALWEG_EXTRAS}]" \
    && /opt/venv/bin/python -c "import thalweg_bytewax._record_ids, thalweg_bytewax._kafka_native, thalweg_bytewax.codecs._json_native, thalweg_bytewax.codecs._avro_native, thalweg_bytewax.contracts._native" \
    && groupadd --system --gid 10001 thalweg \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --create-home thalweg
USER 10001:10001
WORKDIR /data
# 2101: the cluster's peers (thalweg cluster); 9464: /live, /ready, /metrics when the
# flow serves them. Kubernetes probes them itself (deploy/kubernetes/), so no HEALTHCHECK.
EXPOSE 2101 9464
ENTRYPOINT ["thalweg"]
CMD ["--help"]
