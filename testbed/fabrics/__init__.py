"""Fabric kinds, one folder each (section, behaviour, planner, controller rules), their registry
(`all_kinds`), the topology built as data, each kind's timing defaults, and the pieces kinds share."""
