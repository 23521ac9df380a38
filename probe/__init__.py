"""Hardware probing: the only part that touches the machine.

`fitprobe.probe` is both this package and the Python API's `probe()`: calling it probes the machine
(`from fitprobe import probe; probe()` -> ProbeReport), since a package and a function cannot share the
name `fitprobe.probe` otherwise."""
import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self):
        """What this machine has -> ProbeReport (GPUs, CPU, RAM, backends; never raises)."""
        from fitprobe.api import probe

        return probe()


sys.modules[__name__].__class__ = _CallablePackage
