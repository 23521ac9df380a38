from fitprobe.cli import entry

entry()
