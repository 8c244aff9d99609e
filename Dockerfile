# The xwait worker and CLI.  Used by docker-compose.yml.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY schemas ./schemas
COPY topology ./topology
# Editable, so the worker finds schemas/ and topology/ beside its code.
RUN pip install --no-cache-dir -e .
ENV XWAIT_TOPOLOGY=/app/topology
EXPOSE 6066
CMD ["xwait", "worker"]
