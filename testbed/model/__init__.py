"""The leaf model: scenario, units, errors, the contracts of every file that crosses a process, and
schedule types. It imports nothing else of the project."""
