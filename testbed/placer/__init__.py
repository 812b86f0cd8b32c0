"""SiP-ML's degree-aware hybrid MP/DP placer: model zoo, balancing, placement, schedules, search."""
