"""OpenTelemetry's stand-ins memshift recognises (one private class: the meter's proxy).

Part of ``adapters._upstream`` (every private upstream detail in one package): read it when
OpenTelemetry releases.
"""

from __future__ import annotations

__all__ = ["otel_sdk_installed"]


def otel_sdk_installed() -> bool:
    """Whether an SDK (anything but the API's stand-in) is the global tracer or meter
    provider. The tracer's stand-in is public (``ProxyTracerProvider``); the meter's,
    ``_ProxyMeterProvider``, is private (spy-tested)."""
    from opentelemetry import metrics, trace
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) or \
        not isinstance(metrics.get_meter_provider(), _ProxyMeterProvider)
