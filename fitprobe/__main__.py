from fitprobe.cli import main

main()
