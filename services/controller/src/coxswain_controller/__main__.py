from coxswain_controller.cli import main

main()
