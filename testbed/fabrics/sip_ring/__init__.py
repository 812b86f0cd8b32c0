"""SiP-Ring: micro-ring lightpaths on a fibre ring, and its wavelength planner."""
