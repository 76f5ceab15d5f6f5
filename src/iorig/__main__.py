from iorig.cli import main

main()
