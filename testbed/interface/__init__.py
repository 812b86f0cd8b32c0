"""The user interface: the `testbed` command, sweeps and reports."""
