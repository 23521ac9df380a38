"""The server's Prometheus metrics (prometheus-client), in a registry of its own per server.

Per GPU: total, free and used memory as last probed; the probe's duration and failures; requests by
route and status with their latency; and for each `--watch` model its fit right now (an enum of
fits / tight / exceeds) and margin, so a fleet's monitoring sees which hosts can take which model.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        gpu = ("gpu", "name", "uuid")
        self.gpu_total = Gauge("fitprobe_gpu_memory_total_bytes", "GPU memory, as probed", gpu, registry=r)
        self.gpu_free = Gauge("fitprobe_gpu_memory_free_bytes", "GPU memory free at the last probe", gpu, registry=r)
        self.gpu_used = Gauge("fitprobe_gpu_memory_used_bytes", "GPU memory used at the last probe", gpu, registry=r)
        self.probe_duration = Histogram("fitprobe_probe_duration_seconds", "time to probe this machine",
                                        buckets=LATENCY_BUCKETS, registry=r)
        self.probe_failures = Counter("fitprobe_probe_failures_total", "probes that ended in a hardware error",
                                      registry=r)
        self.requests = Counter("fitprobe_http_requests_total", "HTTP requests", ("method", "route", "status"),
                                registry=r)
        self.latency = Histogram("fitprobe_http_request_duration_seconds", "HTTP request latency",
                                 ("method", "route"), buckets=LATENCY_BUCKETS, registry=r)
        self.fit = Enum("fitprobe_model_fit", "verdict of a --watch model right now (free memory)", ("model",),
                        states=["fits", "tight", "exceeds", "error"], registry=r)
        self.margin = Gauge("fitprobe_model_margin_bytes", "usable minus required right now for a --watch model "
                            "(negative: short)", ("model",), registry=r)
        self.decode = Gauge("fitprobe_model_decode_tokens_per_second", "decode tokens/s per sequence of a --watch "
                            "model's recommended command", ("model",), registry=r)

    def set_gpus(self, report) -> None:
        """The GPU gauges from one probe (devices gone since the last probe disappear)."""
        for gauge in (self.gpu_total, self.gpu_free, self.gpu_used):
            gauge.clear()
        for g in report.gpus:
            if not g.visible:
                continue
            labels = (str(g.index), g.name, g.uuid or "")
            for gauge, value in ((self.gpu_total, g.memory_total_bytes), (self.gpu_free, g.memory_free_bytes),
                                 (self.gpu_used, g.memory_used_bytes)):
                if value is not None:
                    gauge.labels(*labels).set(value)

    def set_watch(self, model: str, output) -> None:
        """A watched model's check: the verdict right now when the probe read free memory, else idle."""
        verdict = output.verdict_now or output.verdict
        self.fit.labels(model).state(verdict.status)
        self.margin.labels(model).set(verdict.margin_bytes)
        if output.recommended.decode_tps is not None:
            self.decode.labels(model).set(output.recommended.decode_tps)

    def watch_failed(self, model: str) -> None:
        """The model could not be sized (unknown, Hub down): state 'error', no stale margin or speed."""
        self.fit.labels(model).state("error")
        for gauge in (self.margin, self.decode):
            try:
                gauge.remove(model)
            except KeyError:
                pass

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
