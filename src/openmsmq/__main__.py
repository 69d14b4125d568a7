"""``python -m openmsmq``: the ``openmsmq`` command line."""

from openmsmq.cli.main import main

if __name__ == "__main__":
    main()
