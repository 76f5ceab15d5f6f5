from iorig.entry import main

main()
