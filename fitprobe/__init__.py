"""fitprobe: will this LLM run on this hardware, how well, and with which launch flags?

The Python API (docs/python-api.md): `from fitprobe import plan, check, probe, fit`. The names are loaded on
first use, so `import fitprobe` (and the CLI's start-up) stays cheap."""
__version__ = "0.1.0"

_API = ("plan", "check", "fit", "PlanRequest")


def __getattr__(name: str):
    if name in _API:
        from fitprobe import api

        return getattr(api, name)
    if name == "FitRequest":
        from fitprobe.fitting import FitRequest

        return FitRequest
    if name == "probe":  # the probe package itself is callable: fitprobe.probe() -> ProbeReport
        import importlib

        return importlib.import_module("fitprobe.probe")
    raise AttributeError(f"module 'fitprobe' has no attribute {name!r}")


__all__ = ["plan", "check", "probe", "fit", "PlanRequest", "FitRequest", "__version__"]
