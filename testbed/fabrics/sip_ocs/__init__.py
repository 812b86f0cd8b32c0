"""SiP-OCS: silicon-photonic interfaces into Q optical circuit switches, and its circuit planner."""
