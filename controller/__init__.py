"""os-ken controller apps: pure flow planning plus thin OpenFlow 1.3 shims."""
