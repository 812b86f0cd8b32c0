"""Analytic oracle for placed schedules: critical path with a max-min fair flow model per fabric."""
