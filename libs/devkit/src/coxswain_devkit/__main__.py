from coxswain_devkit.cli import main

main()
