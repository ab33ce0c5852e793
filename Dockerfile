# The kvright operator image: what the Helm chart runs (charts/kvright/values.yaml image.repository,
# operator.command ["python", "-m", "kvright.operator"]). `make image` builds it (docs/helm.md, "The image").
#
# Two stages: the first builds a wheel of this project, the second installs only that wheel and its pinned
# dependencies. The wheel holds `capacity` and `kvright` and nothing of `kvright_dev` (the simulator, demos
# and test helpers; pyproject's package discovery, checked by tests/unit/test_packaging.py), so the image
# carries no development code and no source tree.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the rest of the checkout out of the context).
COPY pyproject.toml README.md ./
COPY capacity ./capacity
COPY kvright ./kvright
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# COPY rather than a RUN --mount of the wheel stage, so builders without BuildKit build it too (the wheel is
# about 300 kB).
COPY --from=wheel /wheels /wheels
RUN python -m pip install /wheels/kvright-*.whl \
    && rm -rf /wheels \
    && groupadd --gid 65532 kvright \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kvright
# Numeric, so the kubelet can check runAsNonRoot; the chart's podSecurityContext runs it as 65532:65532 too.
USER 65532:65532
WORKDIR /tmp
# The chart sets the same command (operator.command); `kvright` (the CLI) is on PATH as well.
CMD ["python", "-m", "kvright.operator"]
