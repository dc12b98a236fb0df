FROM python:3.11-slim
WORKDIR /app
# What the build reads: pyproject.toml (its package-dir maps each folder below to kraftd.*),
# setup.py (lists every subpackage under them) and each mapped folder. tests/test_packaging.py
# checks these COPY lines against pyproject.toml and tests the wheel built from the same inputs.
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY kraftd kraftd
COPY protocol protocol
COPY schemas schemas
COPY storage storage
COPY quorum quorum
COPY server server
COPY config config
COPY pipeline pipeline
# A C compiler for the install only (it builds protocol/_record_walk.pyx, the produce path's
# record walk), removed in the same layer.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
VOLUME /data
EXPOSE 9092 9464
# A command, not an entrypoint: docker-compose.yml gives each node its whole `kraftd serve ...`
# line, and `docker run IMAGE kraftd dump-log ...` works too.
CMD ["kraftd", "serve", "--data-dir", "/data", "--listen", "0.0.0.0:9092", "--metrics-listen", "0.0.0.0:9464"]
