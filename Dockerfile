# One image for every Tessera process: `serve` (API), `worker` (batch tasks), `inference` (models over gRPC).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# glibc keeps a malloc arena per thread (HTTP, database, tasks, sharp's pool): two hold the same work in less memory.
ENV MALLOC_ARENA_MAX=2
# The sources first: `npm install` runs the package's `prepare` step, which bundles the CLI from them.
COPY . .
# `npm install`, not `npm ci`, as in .ci/run: the lockfile lists only the optional native binaries of the
# platform it was written on.
# An image may run on another CPU than the one that built it: keep hnswlib-node's portable build
# (scripts/native-build.mjs); `--build-arg TESSERA_PORTABLE_BUILD=` builds it for the build machine's CPU.
ARG TESSERA_PORTABLE_BUILD=1
RUN TESSERA_PORTABLE_BUILD=$TESSERA_PORTABLE_BUILD npm install --omit=dev --no-audit --no-fund && npm cache clean --force
RUN mkdir -p /data && chown node:node /data
USER node
ENV TESSERA_HOME=/data HOST=0.0.0.0 PORT=8080
EXPOSE 8080 50051
ENTRYPOINT ["node", "bin/tessera.js"]
CMD ["serve"]
