"""The analytic oracle: schedules simulated step by step with max-min fair flows over each fabric's
plan, re-planning as the controller does, and the placer's closed-form iteration estimate."""
