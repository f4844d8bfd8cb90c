from coxswain_identity.cli import main

main()
