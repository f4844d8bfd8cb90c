from coxswain_ui.cli import main

main()
