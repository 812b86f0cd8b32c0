"""The top of the pure layers: the scenario file (reading, `--set`, wording its errors) and the one
plan every command calls (schedule, prediction, a run's sizing), over the workload kinds."""
