"""`python -m testbed`: the `testbed` command."""

from testbed.interface.cli import main

raise SystemExit(main())
