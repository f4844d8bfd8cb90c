from coxswain_proxy.cli import main

main()
