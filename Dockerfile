FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kraftd kraftd
COPY protocol protocol
COPY schemas schemas
COPY storage storage
COPY quorum quorum
COPY server server
COPY config config
RUN pip install --no-cache-dir .
VOLUME /data
EXPOSE 9092 9464
# A command, not an entrypoint: docker-compose.yml gives each node its whole `kraftd serve ...`
# line, and `docker run IMAGE kraftd dump-log ...` works too.
CMD ["kraftd", "serve", "--data-dir", "/data", "--listen", "0.0.0.0:9092", "--metrics-listen", "0.0.0.0:9464"]
